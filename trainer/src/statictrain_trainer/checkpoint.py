"""Atomic checkpoints: write to a temporary name, fsync, rename; load the newest that reads back whole.

Files are ``step-<00000000>.pt`` in one directory. A crash mid-write leaves a
``.tmp-*`` file that is never loaded; a file that fails to load (truncated,
corrupt, wrong format) is skipped with a log line and the next older one tried.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_NAME = re.compile(r"^step-(\d{8,})\.pt$")


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back from disk."""

    step: int
    """Optimizer steps completed when it was written."""
    path: Path
    """Where it was read from."""
    state: dict[str, Any]
    """model, optimizer, scaler and progress counters."""


def checkpoint_path(directory: Path, step: int) -> Path:
    """The file name for the checkpoint after ``step`` steps."""
    return directory / f"step-{step:08d}.pt"


def list_steps(directory: Path) -> list[int]:
    """Steps of the finished (renamed) checkpoint files, newest first."""
    if not directory.is_dir():
        return []
    steps = []
    for entry in directory.iterdir():
        m = _NAME.match(entry.name)
        if m:
            steps.append(int(m.group(1)))
    return sorted(steps, reverse=True)


def save(directory: Path, step: int, state: dict[str, Any], keep: int) -> Path:
    """Write the checkpoint for ``step`` atomically, then delete all but the newest ``keep``."""
    directory.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(directory, step)
    tmp = directory / f".tmp-{final.name}-{os.getpid()}"
    payload = {"format": FORMAT_VERSION, "step": step, **state}
    with open(tmp, "wb") as f:
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    prune(directory, keep)
    return final


def prune(directory: Path, keep: int) -> list[int]:
    """Delete finished checkpoints beyond the newest ``keep``; return the steps deleted."""
    removed = []
    for step in list_steps(directory)[keep:]:
        checkpoint_path(directory, step).unlink(missing_ok=True)
        removed.append(step)
    return removed


def load_latest(directory: Path, map_location: str | torch.device = "cpu") -> Checkpoint | None:
    """The newest checkpoint that loads completely, or None; broken ones are logged and skipped."""
    for step in list_steps(directory):
        path = checkpoint_path(directory, step)
        try:
            state = torch.load(path, map_location=map_location, weights_only=True)
        except Exception as e:
            log.warning("skipping unreadable checkpoint %s: %s: %s", path, type(e).__name__, e)
            continue
        if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION or state.get("step") != step:
            log.warning("skipping checkpoint %s: not a statictrain checkpoint of format %d", path, FORMAT_VERSION)
            continue
        return Checkpoint(step=step, path=path, state=state)
    return None
