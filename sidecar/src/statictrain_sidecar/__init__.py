"""statictrain_sidecar."""
