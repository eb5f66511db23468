"""On-demand torch.profiler captures, requested through the trainer channel.

The sidecar writes ``<STATS_DIR>/requests/profile-<id>.json`` holding
``{"v": 1, "steps": N}`` (atomically: a dot-file renamed into place); the trainer
takes it, captures N steps into ``<STATS_DIR>/profiles/<id>/`` and removes the
request (``statictrain.channel``). Bounds kept here: N is capped, one request is
pending at a time, a request not taken within the timeout is withdrawn, and the
oldest captures are deleted once ``profiles/`` holds more than the byte budget.
Captured files are served back by the HTTP server (``GET /profiles/<id>/<file>``):
only plain files below the profiles root.

The trainer shares these folders, so nothing here follows a symlink (``files``):
``requests/`` or ``profiles/`` replaced by a link is neither written, read nor
pruned through (a request then answers 503), and a link anywhere below is neither
listed, counted, served nor followed. Listings and the byte count look at no more
than ``files.MAX_ENTRIES`` entries in all and ``files.MAX_DEPTH`` levels (so the byte budget counts only
what they see).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from statictrain.channel import PROFILES_DIR, REQUESTS_DIR, SCHEMA_VERSION

from .files import MAX_ENTRIES, directory, names, open_regular, plain_files

__all__ = ["ProfileError", "ProfileInfo", "ProfileRequests", "ProfileTicket"]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_REQUEST = re.compile(r"^profile-(?P<id>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})\.json$")
_STEPS = re.compile(r"[0-9]{1,6}")
_log = logging.getLogger(__name__)


class ProfileError(Exception):
    """A request that cannot be served; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ProfileTicket:
    """A request just written."""

    id: str
    steps: int
    request: Path
    output: Path


@dataclass(frozen=True)
class ProfileInfo:
    """One profile as listed by GET /profiles."""

    id: str
    state: str
    """requested (waiting for the trainer) | capturing (its folder exists, no finished file yet) |
    captured (files under profiles/<id>/) | expired (not taken in time, withdrawn)"""
    files: tuple[str, ...] = ()
    bytes: int = 0


class ProfileRequests:
    """Profile requests and captures under one stats directory."""

    def __init__(
        self,
        stats_dir: Path,
        *,
        max_steps: int,
        timeout_s: float,
        max_bytes: int,
        clock: Callable[[], float],
        new_id: Callable[[], str],
    ) -> None:
        """``clock``: wall seconds (compared with file mtimes); ``new_id``: a fresh request id."""
        self.stats_dir = stats_dir
        self.requests_dir = stats_dir / REQUESTS_DIR
        self.profiles_dir = stats_dir / PROFILES_DIR
        self._max_steps = max_steps
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._clock = clock
        self._new_id = new_id
        self._expired: list[str] = []
        self.outcomes: dict[str, int] = {"requested": 0, "rejected": 0, "expired": 0, "pruned": 0}
        self._lock = threading.Lock()

    def request(self, steps_text: str | None) -> ProfileTicket:
        """Validate N and write the request file; ProfileError says what was wrong."""
        with self._lock:
            return self._request(steps_text)

    def _request(self, steps_text: str | None) -> ProfileTicket:
        if steps_text is None or not _STEPS.fullmatch(steps_text):  # ASCII digits: int() takes ' 1_2 ', '+١'
            self.outcomes["rejected"] += 1
            shown = steps_text if steps_text is None or len(steps_text) <= 20 else steps_text[:20] + "…"
            raise ProfileError(
                400,
                f"steps={shown!r}: give a whole number of steps, 1 to {self._max_steps}, as ?steps=N",
            )
        steps = int(steps_text)
        if not 1 <= steps <= self._max_steps:
            self.outcomes["rejected"] += 1
            raise ProfileError(
                400,
                f"steps={steps}: ask for 1 to {self._max_steps} steps "
                f"(the sidecar's STATICTRAIN_PROFILE_MAX_STEPS)",
            )
        pending = self._pending()
        if pending:
            self.outcomes["rejected"] += 1
            raise ProfileError(
                409,
                f"profile {pending[0]} is still waiting for the trainer; "
                "try again once it is captured or expired (GET /profiles)",
            )
        pid = self._new_id()
        if not _ID.match(pid):
            raise ValueError(f"profile id {pid!r} has characters outside [A-Za-z0-9_.-]")
        final, tmp = f"profile-{pid}.json", f".profile-{pid}.json.tmp"
        try:
            with directory(self.stats_dir, REQUESTS_DIR, create=True) as d:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=d)
                with os.fdopen(fd, "w") as f:
                    f.write(json.dumps({"v": SCHEMA_VERSION, "steps": steps}) + "\n")
                os.replace(tmp, final, src_dir_fd=d, dst_dir_fd=d)
        except OSError as e:
            raise ProfileError(
                503,
                f"cannot write the request in {self.requests_dir} ({e.strerror or e}): it must be a folder "
                "of the stats directory, not a symlink (none is followed)",
            ) from None
        self.outcomes["requested"] += 1
        return ProfileTicket(pid, steps, self.requests_dir / final, self.profiles_dir / pid)

    def _pending(self) -> list[str]:
        try:
            with directory(self.stats_dir, REQUESTS_DIR) as d:
                return sorted(m["id"] for name in names(d) if (m := _REQUEST.match(name)))
        except OSError:  # none yet, or not a folder of its own
            return []

    def housekeep(self) -> None:
        """Withdraw requests older than the timeout; delete the oldest captures beyond the byte budget."""
        with self._lock:
            self._housekeep()

    def _housekeep(self) -> None:
        self._expire(self._clock())
        try:
            with directory(self.stats_dir, PROFILES_DIR) as root:
                captures = sorted(_captures(root), key=lambda c: c.mtime)  # oldest first
                total = sum(c.bytes for c in captures)
                for c in captures:
                    if total <= self._max_bytes:
                        break
                    try:  # fd-based on Linux: a symlink swapped in meanwhile is not followed
                        shutil.rmtree(c.name, ignore_errors=True, dir_fd=root)
                    except RecursionError:  # deeper than the stack: left, and said so
                        _log.warning("cannot prune %s/%s: nested too deep", self.profiles_dir, c.name)
                        continue
                    total -= c.bytes
                    self.outcomes["pruned"] += 1
        except OSError:  # no profiles folder (yet), or not one of its own
            return

    def _expire(self, now: float) -> None:
        try:
            with directory(self.stats_dir, REQUESTS_DIR) as d:
                for name in names(d):
                    m = _REQUEST.match(name)
                    if m is None:
                        continue
                    try:
                        if now - os.stat(name, dir_fd=d, follow_symlinks=False).st_mtime <= self._timeout_s:
                            continue
                        os.unlink(name, dir_fd=d)
                    except FileNotFoundError:
                        continue  # taken by the trainer meanwhile
                    self._expired.append(m["id"])
                    self.outcomes["expired"] += 1
        except OSError:
            pass
        del self._expired[:-100]

    def listing(self) -> list[ProfileInfo]:
        """Every known profile: pending, captured and recently expired."""
        with self._lock:
            return self._listing()

    def _listing(self) -> list[ProfileInfo]:
        out = [ProfileInfo(pid, "requested") for pid in self._pending()]
        try:
            with directory(self.stats_dir, PROFILES_DIR) as root:
                captures = _captures(root)
        except OSError:
            captures = []
        for c in sorted(captures, key=lambda c: c.mtime):
            out.append(ProfileInfo(c.name, "captured" if c.files else "capturing", c.files, c.bytes))
        out.extend(ProfileInfo(pid, "expired") for pid in self._expired)
        return out

    def open_file(self, pid: str, name: str) -> tuple[BinaryIO, int]:
        """One captured file, opened for reading, and its size.

        ProfileError 404 for anything but a plain file inside ``profiles/<id>/``: a path part
        that is empty, ``.`` or ``..``; a symlink anywhere from the profiles root down (the root
        included); a FIFO, device or folder."""
        missing = ProfileError(404, f"no file {name!r} in profile {pid!r} (GET /profiles lists them)")
        parts = name.split("/")
        if not _ID.match(pid) or any(p in ("", ".", "..") for p in parts):
            raise missing
        try:
            with directory(self.stats_dir, PROFILES_DIR, pid, *parts[:-1]) as d:
                fd, st = open_regular(parts[-1], d)
        except OSError:
            raise missing from None
        return os.fdopen(fd, "rb"), st.st_size


@dataclass(frozen=True)
class _Capture:
    name: str
    mtime: float
    bytes: int
    files: tuple[str, ...]
    """Finished files (no dot-file of a capture still being written), sorted."""


def _captures(root: int) -> list[_Capture]:
    """The capture folders in the profiles root (descriptor ``root``), symlinks skipped; MAX_ENTRIES
    entries looked at in all (a listing's cost is bounded however many folders the trainer makes)."""
    out = []
    left = MAX_ENTRIES
    for name in names(root):
        if left <= 0:
            break
        if not _ID.match(name):
            continue
        try:
            with directory(root, name) as d:
                mtime = os.fstat(d).st_mtime
                found, seen = plain_files(d, left)
        except OSError:  # a symlink, a file, gone meanwhile
            continue
        left -= seen + 1
        files = tuple(sorted(p for p, _ in found if not Path(p).name.startswith(".")))
        out.append(_Capture(name, mtime, sum(size for _, size in found), files))
    return out
