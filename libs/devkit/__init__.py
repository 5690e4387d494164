"""Development tools, never imported at run time: the dev stack, the embedded broker, the doc generators."""
