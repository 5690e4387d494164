"""Use cases: event handlers, metering inside a unit of work, background loops."""
