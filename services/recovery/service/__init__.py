"""Use cases of recovery: event handlers, background loops, and carrying out transitions."""
