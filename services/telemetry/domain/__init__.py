"""Pure telemetry rules and models: metrics, GPU models, rollups, hints, XIDs and the GpuProbe port."""
