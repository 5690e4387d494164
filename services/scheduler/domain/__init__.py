"""The scheduler's pure rules and models: workloads, the cluster view, fit, priority, quota, the pass."""
