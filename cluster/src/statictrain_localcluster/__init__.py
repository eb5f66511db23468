"""statictrain_localcluster."""
