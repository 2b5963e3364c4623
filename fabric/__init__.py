"""podsim: fabric package."""
