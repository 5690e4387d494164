"""Workload runners that execute on the host: the process runner and its per-workload supervisor.

Nothing is re-exported here: the supervisor imports this package's standard-library modules at every
workload start, and the runner (process.py) pulls in the event models. Import the modules themselves.
"""
