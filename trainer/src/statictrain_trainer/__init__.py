"""statictrain_trainer."""
