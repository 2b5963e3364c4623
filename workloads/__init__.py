"""podsim: workloads package."""
