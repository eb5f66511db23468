"""Reading a StaticTrainingJob manifest file (the YAML parser is the caller's: the core has no dependencies)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from statictrain import labels


def one_job(docs: Sequence[object], path: str) -> dict[str, Any]:
    """The single StaticTrainingJob among a file's YAML documents; ValueError naming the file and what is wrong."""
    found = [d for d in docs if d is not None]
    if len(found) != 1 or not isinstance(found[0], dict):
        raise ValueError(f"{path}: expected exactly one StaticTrainingJob manifest, found {len(found)} documents")
    doc: dict[str, Any] = found[0]
    if doc.get("kind") != labels.KIND:
        raise ValueError(f"{path}: kind is {doc.get('kind')!r}, expected {labels.KIND}")
    return doc


def read_job(path: str, parse_all: Callable[[str], Iterable[object]]) -> dict[str, Any]:
    """Read ``path`` (``-``: stdin), parse its documents with ``parse_all`` (e.g. yaml.safe_load_all), check them.

    Any failure is a ValueError that names the file.
    """
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e}") from None
    try:
        docs = list(parse_all(text))
    except Exception as e:  # the parser's own error type: any of them means the file is not a manifest
        raise ValueError(f"cannot parse {path}: {e}") from None
    return one_job(docs, path)
