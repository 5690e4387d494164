"""The scheduler's use cases: submission, the placer and its commits, and the consumed events."""
