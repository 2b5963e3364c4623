"""podsim: scenarios package."""
