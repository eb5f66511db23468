"""Where the local cluster's files live: the repository and the cache outside it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REPO_FILES", "cache_root"]

REPO_FILES = Path(__file__).resolve().parents[3]  # the repository root in a development install


def cache_root() -> Path:
    """Binaries, images and cluster state: ``$STATICTRAIN_CACHE`` or ``~/.cache/statictrain``."""
    env = os.environ.get("STATICTRAIN_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "statictrain"
