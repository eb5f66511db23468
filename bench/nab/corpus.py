"""Reading NAB-layout corpora: ``data/<category>/*.csv``, ``labels/combined_windows.json``,
``config/profiles.json``. Only I/O lives here; scoring is in statictrain_operator.anomaly.nab."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from statictrain_operator.anomaly import nab


@dataclass(frozen=True)
class Series:
    """One ``timestamp,value`` file."""

    key: str
    """``<category>/<file>.csv`` (the key used by the label files)."""
    timestamps: tuple[str, ...]
    """Timestamps as written in the file."""
    values: tuple[float, ...]
    """Values, in file order."""


def read_series(path: Path, key: str | None = None) -> Series:
    """Read a CSV with a ``timestamp,value`` header; raises ValueError naming the bad row."""
    timestamps: list[str] = []
    values: list[float] = []
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:2]] != ["timestamp", "value"]:
            raise ValueError(f"{path}: the first line must be the header 'timestamp,value', got {header!r}")
        for lineno, row in enumerate(reader, start=2):
            if not row:
                continue
            try:
                timestamps.append(row[0])
                values.append(float(row[1]))
            except (IndexError, ValueError) as exc:
                raise ValueError(f"{path}:{lineno}: expected 'timestamp,number', got {row!r}") from exc
    return Series(key or path.name, tuple(timestamps), tuple(values))


def list_files(root: Path) -> list[Path]:
    """Data files under ``root/data``, sorted."""
    files = sorted((root / "data").glob("*/*.csv"))
    if not files:
        raise ValueError(f"{root}: no data/<category>/*.csv files (is this a NAB-layout folder?)")
    return files


def read_windows(root: Path) -> dict[str, list[list[str]]]:
    """``labels/combined_windows.json``."""
    doc: dict[str, list[list[str]]] = json.loads((root / "labels" / "combined_windows.json").read_text())
    return doc


def read_profiles(root: Path) -> list[nab.Profile]:
    """``config/profiles.json`` as Profile objects."""
    return nab.parse_profiles(json.loads((root / "config" / "profiles.json").read_text()))
