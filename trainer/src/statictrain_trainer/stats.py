"""Writes StepRecords to the trainer -> sidecar channel (``<stats_dir>/steps.jsonl``)."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from statictrain import channel


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
