"""The pod's GPUs as its trainer processes published them (``<stats_dir>/gpus/*.json``).

The sidecar requests no GPU, so NVML in its container may show every GPU of the
node (or none). Each trainer process writes the UUID of its own GPU to the
channel (statictrain.channel.encode_gpu); this reads them back. A malformed file
is logged and left out, never fatal. Nothing is followed out of the channel folder
(``files``): ``gpus/`` and its files are opened without following symlinks, only
regular files named ``<local rank>.json`` of at most MAX_GPU_FILE_BYTES are read, and
at most MAX_GPU_FILES of them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from statictrain import channel

from .files import directory, names, read_regular

__all__ = ["published_gpus", "reader"]

_log = logging.getLogger(__name__)

MAX_GPU_FILES = 64
"""Most ``gpus/*.json`` files read (a pod has a few GPUs)."""
MAX_GPU_FILE_BYTES = 4096
_NAME = re.compile(r"[0-9]{1,4}\.json")


def published_gpus(stats_dir: Path) -> tuple[str, ...]:
    """UUIDs published under ``stats_dir``, sorted, without repeats (empty before the trainer starts)."""
    uuids: set[str] = set()
    try:
        with directory(stats_dir, channel.GPUS_DIR) as folder:
            for name in sorted(n for n in names(folder) if _NAME.fullmatch(n))[:MAX_GPU_FILES]:
                try:
                    text = read_regular(name, MAX_GPU_FILE_BYTES, folder).decode()
                    uuids.add(channel.decode_gpu(text))
                except FileNotFoundError:
                    continue
                except (OSError, UnicodeDecodeError, channel.MalformedRecord) as e:
                    _log.warning("ignoring %s/%s/%s: %s", stats_dir, channel.GPUS_DIR, name, e)
    except FileNotFoundError:
        return ()
    except OSError as e:  # a symlink (not followed) or a file in place of the folder
        _log.warning("ignoring %s/%s: %s (not a folder of its own)", stats_dir, channel.GPUS_DIR, e)
        return ()
    return tuple(sorted(uuids))


def reader(stats_dir: Path) -> Callable[[], tuple[str, ...]]:
    """A no-argument function that reads the published UUIDs now."""
    return lambda: published_gpus(stats_dir)
