"""The node agent: reads GPUs through a GpuProbe, plays workloads, publishes samples and reports."""
