"""Writes to the trainer -> sidecar channel: StepRecords (``<stats_dir>/steps.jsonl``) and
this process's GPU (``<stats_dir>/gpus/<local rank>.json``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

import torch
from statictrain import channel


def gpu_uuid(device: torch.device) -> str:
    """The NVML UUID (``GPU-…``) of a CUDA device, as the sidecar's NVML reports it."""
    raw = str(torch.cuda.get_device_properties(device).uuid)
    return raw if raw.startswith(("GPU-", "MIG-")) else f"GPU-{raw}"


def publish_gpu(stats_dir: Path, local_rank: int, uuid: str) -> Path:
    """Write this process's GPU for the sidecar (atomically: it never reads half a file)."""
    folder = stats_dir / channel.GPUS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{local_rank}.json"
    tmp = folder / f".{local_rank}.json.{os.getpid()}.tmp"
    tmp.write_text(channel.encode_gpu(uuid, local_rank))
    tmp.replace(path)
    return path


class StatsWriter:
    """Appends one JSON line per step and flushes it, so the sidecar sees it at once."""

    def __init__(self, stats_dir: Path) -> None:
        stats_dir.mkdir(parents=True, exist_ok=True)
        self.path = stats_dir / channel.STEPS_FILE
        self._file: TextIO = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, record: channel.StepRecord) -> None:
        self._file.write(channel.encode(record))
        self._file.flush()

    def close(self) -> None:
        self._file.close()
