"""statictrain_operator."""
