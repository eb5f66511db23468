"""Tail the trainer channel (``<STATS_DIR>/steps.jsonl``, see ``statictrain.channel``).

Each ``poll()`` reads what was appended since the last one, decodes complete
lines and keeps a trailing partial line for the next poll. A file that is
replaced (new inode) or truncated is read again from its start. A line that does
not decode, is not UTF-8, or grows past ``max_line_bytes`` is reported as
malformed and skipped; nothing here raises on bad content.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from statictrain.channel import MalformedRecord, StepRecord, decode

__all__ = ["ChannelTailer", "TailResult"]


@dataclass
class TailResult:
    """What one poll found."""

    records: list[StepRecord] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    """One reason per skipped line."""


class ChannelTailer:
    """Incremental reader of one JSON-lines file."""

    def __init__(self, path: Path, *, max_line_bytes: int = 64 * 1024, max_read_bytes: int = 4 << 20) -> None:
        self.path = path
        self._max_line = max_line_bytes
        self._max_read = max_read_bytes
        self._inode: int | None = None
        self._offset = 0
        self._partial = b""
        self._skipping = False  # inside an overlong line: drop bytes up to the next newline

    def poll(self) -> TailResult:
        """Read and decode everything new (at most ``max_read_bytes`` per call)."""
        result = TailResult()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return result
        if st.st_ino != self._inode or st.st_size < self._offset:
            self._inode, self._offset, self._partial, self._skipping = st.st_ino, 0, b"", False
        if st.st_size == self._offset:
            return result
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read(min(st.st_size - self._offset, self._max_read))
        except FileNotFoundError:
            return result
        self._offset += len(chunk)
        self._consume(chunk, result)
        return result

    def _consume(self, chunk: bytes, result: TailResult) -> None:
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            if self._skipping:
                self._skipping = False
                continue
            self._line(raw, result)
        if len(self._partial) > self._max_line:
            if not self._skipping:
                result.malformed.append(f"line longer than {self._max_line} bytes")
            self._partial, self._skipping = b"", True

    def _line(self, raw: bytes, result: TailResult) -> None:
        if not raw.strip():
            return
        if len(raw) > self._max_line:
            result.malformed.append(f"line longer than {self._max_line} bytes")
            return
        try:
            result.records.append(decode(raw.decode("utf-8")))
        except UnicodeDecodeError:
            result.malformed.append("not UTF-8")
        except MalformedRecord as e:
            result.malformed.append(str(e))
