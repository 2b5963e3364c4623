"""podsim: nic package."""
