"""Files below the stats directory, which the trainer (user code) shares: no symlink is ever followed.

The stats directory itself is the sidecar's configuration and opened as named; every
name below it is opened relative to its parent's descriptor with O_NOFOLLOW, so a
folder or file the trainer replaced by a symlink is refused (ELOOP or ENOTDIR), even
if it is replaced between a check and a use. Files are read only when regular (a FIFO
or device is opened without blocking and refused) and only up to a byte limit; walks
stop at a depth and a number of entries.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "NotAPlainFileError",
    "directory",
    "names",
    "open_regular",
    "plain_files",
    "read_regular",
]

MAX_ENTRIES = 10_000
"""Most directory entries one listing or walk looks at; the rest are not seen."""
MAX_DEPTH = 8
"""Deepest folder level a walk enters below its start."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class NotAPlainFileError(OSError):
    """A FIFO, device, socket or directory where a regular file was expected, or one over its limit."""


@contextmanager
def directory(root: Path | int, *names: str, create: bool = False) -> Iterator[int]:
    """A descriptor of ``root/names…``, each name opened without following a symlink (and made
    first when ``create``); OSError when one is missing, a symlink or not a directory. ``root``: a
    configured path (followed as given) or an open directory's descriptor (left open)."""
    fd = os.dup(root) if isinstance(root, int) else os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)
            inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def open_regular(name: str | Path, dir_fd: int | None = None, *, follow: bool = False) -> tuple[int, os.stat_result]:
    """An open descriptor of a regular file and its status; never blocks on a FIFO. ``follow``: a
    symlink is followed (only for paths the sidecar is configured with, never below the stats dir)."""
    flags = _READ_FLAGS & ~os.O_NOFOLLOW if follow else _READ_FLAGS
    fd = os.open(name, flags, dir_fd=dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = stat.filemode(st.st_mode)[0]  # p: FIFO, c/b: device, d: folder, s: socket
        raise NotAPlainFileError(errno.EINVAL, f"not a regular file (mode {kind!r})", str(name))
    return fd, st


def read_regular(name: str | Path, max_bytes: int, dir_fd: int | None = None, *, follow: bool = False) -> bytes:
    """A regular file's content; NotAPlainFileError when it is none or holds more than ``max_bytes``."""
    fd, _ = open_regular(name, dir_fd, follow=follow)
    try:
        data = b""
        while len(data) <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - len(data))):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise NotAPlainFileError(errno.EFBIG, f"larger than {max_bytes} bytes", str(name))
    return data


def names(dir_fd: int) -> list[str]:
    """The names in a directory, at most MAX_ENTRIES of them."""
    out: list[str] = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            if len(out) >= MAX_ENTRIES:
                break
            out.append(entry.name)
    return out


def plain_files(dir_fd: int, max_entries: int = MAX_ENTRIES) -> tuple[list[tuple[str, int]], int]:
    """(path relative to the directory, size) of the regular files below it, symlinks neither listed nor
    followed, and how many entries were looked at: at most ``max_entries``, MAX_DEPTH levels deep."""
    out: list[tuple[str, int]] = []
    seen = 0
    stack: list[tuple[int, str, int]] = [(os.dup(dir_fd), "", 0)]
    try:
        while stack and seen < max_entries:
            fd, prefix, depth = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if seen >= max_entries:
                            break
                        seen += 1
                        if entry.is_file(follow_symlinks=False):
                            out.append((prefix + entry.name, entry.stat(follow_symlinks=False).st_size))
                        elif entry.is_dir(follow_symlinks=False) and depth < MAX_DEPTH:
                            try:
                                inner = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                            except OSError:
                                continue  # replaced meanwhile
                            stack.append((inner, f"{prefix}{entry.name}/", depth + 1))
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return out, seen
