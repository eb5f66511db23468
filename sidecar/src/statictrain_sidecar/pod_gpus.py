"""The pod's GPUs as its trainer processes published them (``<stats_dir>/gpus/*.json``).

The sidecar requests no GPU, so NVML in its container may show every GPU of the
node (or none). Each trainer process writes the UUID of its own GPU to the
channel (statictrain.channel.encode_gpu); this reads them back. A malformed file
is logged and left out, never fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from statictrain import channel

__all__ = ["published_gpus", "reader"]

_log = logging.getLogger(__name__)


def published_gpus(stats_dir: Path) -> tuple[str, ...]:
    """UUIDs published under ``stats_dir``, sorted, without repeats (empty before the trainer starts)."""
    folder = stats_dir / channel.GPUS_DIR
    if not folder.is_dir():
        return ()
    uuids: set[str] = set()
    for path in sorted(folder.glob("*.json")):
        try:
            uuids.add(channel.decode_gpu(path.read_text()))
        except FileNotFoundError:
            continue
        except (OSError, channel.MalformedRecord) as e:
            _log.warning("ignoring %s: %s", path, e)
    return tuple(sorted(uuids))


def reader(stats_dir: Path) -> Callable[[], tuple[str, ...]]:
    """A no-argument function that reads the published UUIDs now."""
    return lambda: published_gpus(stats_dir)
