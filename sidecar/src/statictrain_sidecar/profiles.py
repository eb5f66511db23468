"""On-demand torch.profiler captures, requested through the trainer channel.

The sidecar writes ``<STATS_DIR>/requests/profile-<id>.json`` holding
``{"v": 1, "steps": N}`` (atomically: a dot-file renamed into place); the trainer
takes it, captures N steps into ``<STATS_DIR>/profiles/<id>/`` and removes the
request (``statictrain.channel``). Bounds kept here: N is capped, one request is
pending at a time, a request not taken within the timeout is withdrawn, and the
oldest captures are deleted once ``profiles/`` holds more than the byte budget.
Captured files are served back by the HTTP server (``GET /profiles/<id>/<file>``):
only plain files below the fixed profiles root; a symlink anywhere on the way is
refused, and the opened file is checked to lie inside the root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from statictrain.channel import PROFILES_DIR, REQUESTS_DIR, SCHEMA_VERSION

__all__ = ["ProfileError", "ProfileInfo", "ProfileRequests", "ProfileTicket"]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_REQUEST = re.compile(r"^profile-(?P<id>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})\.json$")


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
        self.requests_dir = stats_dir / REQUESTS_DIR
        self.profiles_dir = stats_dir / PROFILES_DIR
        self._root = stats_dir.resolve() / PROFILES_DIR
        """The profiles root, fixed now: served files must lie inside it."""
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
        try:
            steps = int(steps_text or "")
        except ValueError:
            self.outcomes["rejected"] += 1
            raise ProfileError(
                400,
                f"steps={steps_text!r}: give a whole number of steps, 1 to {self._max_steps}, as ?steps=N",
            ) from None
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
        self.requests_dir.mkdir(parents=True, exist_ok=True)
        final = self.requests_dir / f"profile-{pid}.json"
        tmp = self.requests_dir / f".profile-{pid}.json.tmp"
        tmp.write_text(json.dumps({"v": SCHEMA_VERSION, "steps": steps}) + "\n")
        os.replace(tmp, final)
        self.outcomes["requested"] += 1
        return ProfileTicket(pid, steps, final, self.profiles_dir / pid)

    def _pending(self) -> list[str]:
        if not self.requests_dir.is_dir():
            return []
        return sorted(m["id"] for p in self.requests_dir.iterdir() if (m := _REQUEST.match(p.name)))

    def housekeep(self) -> None:
        """Withdraw requests older than the timeout; delete the oldest captures beyond the byte budget."""
        with self._lock:
            self._housekeep()

    def _housekeep(self) -> None:
        now = self._clock()
        for pid in self._pending():
            path = self.requests_dir / f"profile-{pid}.json"
            try:
                age = now - path.stat().st_mtime
            except FileNotFoundError:
                continue  # taken by the trainer meanwhile
            if age > self._timeout_s:
                path.unlink(missing_ok=True)
                self._expired.append(pid)
                self.outcomes["expired"] += 1
        del self._expired[:-100]
        captures = sorted(self._captures(), key=lambda c: c[1])  # oldest first
        total = sum(size for _, _, size in captures)
        for path, _, size in captures:
            if total <= self._max_bytes:
                break
            shutil.rmtree(path, ignore_errors=True)
            total -= size
            self.outcomes["pruned"] += 1

    def _captures(self) -> list[tuple[Path, float, int]]:
        if not self.profiles_dir.is_dir():
            return []
        out = []
        if self.profiles_dir.is_symlink():
            return []
        for d in self.profiles_dir.iterdir():
            if d.is_dir() and not d.is_symlink() and _ID.match(d.name):
                size = sum(f.lstat().st_size for f in _plain_files(d))
                out.append((d, d.lstat().st_mtime, size))
        return out

    def listing(self) -> list[ProfileInfo]:
        """Every known profile: pending, captured and recently expired."""
        with self._lock:
            return self._listing()

    def _listing(self) -> list[ProfileInfo]:
        out = [ProfileInfo(pid, "requested") for pid in self._pending()]
        for path, _, size in sorted(self._captures(), key=lambda c: c[1]):
            names = (str(f.relative_to(path)) for f in _plain_files(path))
            files = tuple(sorted(n for n in names if not Path(n).name.startswith(".")))
            out.append(ProfileInfo(path.name, "captured" if files else "capturing", files, size))
        out.extend(ProfileInfo(pid, "expired") for pid in self._expired)
        return out

    def open_file(self, pid: str, name: str) -> tuple[BinaryIO, int]:
        """One captured file, opened for reading, and its size.

        ProfileError 404 for anything but a plain file inside ``profiles/<id>/``: a path
        part that is empty, ``.`` or ``..``; a symlink anywhere from the profiles root
        down (the root included); a file whose opened descriptor resolves outside the root."""
        missing = ProfileError(404, f"no file {name!r} in profile {pid!r} (GET /profiles lists them)")
        parts = name.split("/")
        if not _ID.match(pid) or any(p in ("", ".", "..") for p in parts):
            raise missing
        path = self.profiles_dir
        for part in ("", pid, *parts[:-1]):
            path = path / part if part else path
            if path.is_symlink() or not path.is_dir():
                raise missing
        path = path / parts[-1]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            raise missing from None
        try:
            st = os.fstat(fd)
            real = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if not stat.S_ISREG(st.st_mode) or not real.is_relative_to(self._root):
                raise missing
        except BaseException:
            os.close(fd)
            raise
        f = os.fdopen(fd, "rb")
        return f, st.st_size


def _plain_files(folder: Path) -> list[Path]:
    """Regular files below ``folder``, symlinks neither listed nor followed."""
    out = []
    for dirpath, _, files in os.walk(folder):
        for name in files:
            p = Path(dirpath) / name
            if not p.is_symlink() and p.is_file():
                out.append(p)
    return out
