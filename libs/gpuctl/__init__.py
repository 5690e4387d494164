"""gpuctl: the command-line client of gpucloud. It talks to the services' public HTTP APIs only."""
