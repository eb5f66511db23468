"""Example workloads: ``tiny`` (CPU tests), ``gpt2`` (GPT-2-124M-shaped), ``cnn`` (small ResNet-like)."""
