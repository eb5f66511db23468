"""Trace replay: a GPU cluster trace against the real local cluster, default scheduler vs statictrain."""
