"""statictrain_extender."""
