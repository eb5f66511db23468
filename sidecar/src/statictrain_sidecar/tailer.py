"""Tail the trainer channel (``<STATS_DIR>/steps.jsonl``, see ``statictrain.channel``).

Each ``poll()`` reads what was appended since the last one (at most
``max_read_bytes``), decodes complete lines and keeps a trailing partial line
for the next poll: a record being written is waited for, never counted bad. A
line that does not decode, is not UTF-8, or grows past ``max_line_bytes`` is
reported as malformed and skipped; the lines after it are read as usual.

The file is held open between polls, so nothing written before it was replaced
is missed: once the open file is read to its end and the path names another
file, the rest of the old one is read, its incomplete last line (if any) counted
as malformed, and the new file read from its start. A file that shrank, or whose
byte before the read position changed (truncated and written again between two
polls), is read again from its start. Only a regular file is read: a symlink
(never followed out of the directory), FIFO, device or directory in its place is
refused (``status`` says so) and looked at again at the next poll. Nothing here
raises: ``status`` and ``detail`` say what is wrong.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from statictrain.channel import MalformedRecord, StepRecord, decode

__all__ = ["STATUSES", "ChannelTailer", "TailResult"]

STATUSES = ("ok", "waiting_for_trainer", "not_a_file", "unreadable", "malformed")
"""Values of ``ChannelTailer.status``: reading, the latest line valid (ok); no file yet; a symlink, FIFO,
device or directory in its place; open or read failed; read, but its latest complete line was malformed."""

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass
class TailResult:
    """What one poll found."""

    records: list[StepRecord] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    """One reason per skipped line."""


class ChannelTailer:
    """Incremental reader of one JSON-lines file."""

    def __init__(self, path: Path, *, max_line_bytes: int = 64 * 1024, max_read_bytes: int = 1 << 20) -> None:
        self.path = path
        self._max_line = max_line_bytes
        self._max_read = max_read_bytes
        self._fd: int | None = None
        self._file_id: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._offset = 0
        self._last_byte = b""  # the byte just before _offset, as read
        self._partial = b""
        self._skipping = False  # inside an overlong line: drop bytes up to the next newline
        self._last_line_ok: bool | None = None
        self._io = "waiting_for_trainer"
        self.detail = ""
        """What is wrong, in words (empty when status is ok)."""

    @property
    def status(self) -> str:
        """One of STATUSES."""
        if self._io != "ok":
            return self._io
        return "malformed" if self._last_line_ok is False else "ok"

    def poll(self) -> TailResult:
        """Read and decode what is new (at most ``max_read_bytes`` per call); never raises."""
        result = TailResult()
        try:
            if self._fd is None and not self._open():
                return result
            self._io, self.detail = "ok", ""
            budget = self._max_read - self._read(self._max_read, result)
            if budget > 0 and self._replaced():  # read to the end, and the path names another file
                budget -= self._read(budget, result)  # what was written to the old one meanwhile
                if budget > 0:
                    self._drop_partial(result, "incomplete last line of a replaced channel file")
                    self.close()
                    if self._open():
                        self._read(budget, result)
        except OSError as e:  # a read failed: keep the file and the position, try again next poll
            self._io, self.detail = "unreadable", f"cannot read {self.path}: {e}"
        return result

    def close(self) -> None:
        """Release the open file (a later poll opens it again from its start)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> bool:
        try:
            fd = os.open(self.path, _OPEN_FLAGS)
        except FileNotFoundError:
            self._io, self.detail = "waiting_for_trainer", f"no {self.path} yet"
            return False
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENXIO):  # a symlink (O_NOFOLLOW); a socket
                self._io, self.detail = "not_a_file", f"{self.path} is a symlink or socket (not followed)"
            else:
                self._io, self.detail = "unreadable", f"cannot open {self.path}: {e}"
            return False
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            mode = stat.filemode(st.st_mode)
            self._io, self.detail = "not_a_file", f"{self.path} is not a regular file (mode {mode})"
            return False
        self._fd, self._file_id, self._io, self.detail = fd, (st.st_dev, st.st_ino), "ok", ""
        self._restart()
        return True

    def _drop_partial(self, result: TailResult, reason: str) -> None:
        """The line being read will never be finished: count it."""
        if self._partial.strip() and not self._skipping:
            self._bad(result, reason)

    def _restart(self) -> None:
        self._offset, self._last_byte, self._partial, self._skipping = 0, b"", b"", False

    def _replaced(self) -> bool:
        """Whether the path now names another file than the one open (a missing path: not yet)."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) != self._file_id

    def _read(self, budget: int, result: TailResult) -> int:
        """Read up to ``budget`` new bytes of the open file and decode them; the bytes read."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size < self._offset or (
            size > self._offset and self._offset and os.pread(self._fd, 1, self._offset - 1) != self._last_byte
        ):
            self._drop_partial(result, "incomplete last line of a truncated channel file")
            self._restart()  # truncated, or truncated and written again: read it from its start
        chunk = os.pread(self._fd, min(size - self._offset, budget), self._offset)
        if chunk:
            self._offset += len(chunk)
            self._last_byte = chunk[-1:]
            self._consume(chunk, result)
        return len(chunk)

    def _consume(self, chunk: bytes, result: TailResult) -> None:
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            if self._skipping:
                self._skipping = False
                continue
            self._line(raw, result)
        if len(self._partial) > self._max_line:
            if not self._skipping:
                self._bad(result, f"line longer than {self._max_line} bytes")
            self._partial, self._skipping = b"", True

    def _bad(self, result: TailResult, reason: str) -> None:
        result.malformed.append(reason)
        self._last_line_ok = False

    def _line(self, raw: bytes, result: TailResult) -> None:
        if not raw.strip():
            return
        if len(raw) > self._max_line:
            self._bad(result, f"line longer than {self._max_line} bytes")
            return
        try:
            result.records.append(decode(raw.decode("utf-8")))
        except UnicodeDecodeError:
            self._bad(result, "not UTF-8")
        except MalformedRecord as e:
            self._bad(result, str(e))
        else:
            self._last_line_ok = True
