"""statictrain."""
