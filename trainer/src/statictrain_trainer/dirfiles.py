"""Files inside one directory, reached through the directory's descriptor and never through a link.

Everything here works relative to a directory opened once with ``O_NOFOLLOW``, and opens names inside
it with ``O_NOFOLLOW`` too, so whatever the directory holds (links to elsewhere, FIFOs, directories
where a file is expected) and however it changes meanwhile, nothing outside it is read, written or
deleted, and a path swapped for a link after the open is not followed. Reads are bounded in size;
writes are atomic: a fresh temporary name in the same directory, fsync, rename, fsync of the directory.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a plain file).
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_PREFIX = ".tmp-"


class NotPlainFileError(OSError):
    """A name that is not what it should be (a link, a FIFO or directory where a plain file is expected, a
    file where a directory is), or a file larger than allowed."""


def _open(path: Path | str, flags: int, dir_fd: int | None, mode: int = 0o777) -> int:
    try:
        return os.open(path, flags, mode, dir_fd=dir_fd)
    except OSError as e:
        if e.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        # O_NOFOLLOW refuses a link with ELOOP, or with ENOTDIR when O_DIRECTORY is asked for too.
        try:
            link = stat.S_ISLNK(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        what = "is a symbolic link (not followed)" if link else "is not a directory"
        raise NotPlainFileError(e.errno, f"{path} {what}") from None


def open_dir(path: Path | str, *, dir_fd: int | None = None, create: bool = False) -> int:
    """A descriptor of the directory ``path`` (relative to ``dir_fd`` when given), made first if ``create``;
    close it (``closing``). OSError (ELOOP, ENOTDIR) when it is a link or not a directory."""
    if create:
        if dir_fd is None:
            Path(path).mkdir(parents=True, exist_ok=True)
        else:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, dir_fd=dir_fd)
    return _open(path, _DIR, dir_fd)


@contextlib.contextmanager
def closing(fd: int) -> Iterator[int]:
    """Close a descriptor when the block ends."""
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def opened(root: Path, *names: str, create: bool = False) -> Iterator[int]:
    """A descriptor of ``root/names...``: ``root`` as ``open_dir`` opens it, each name below it opened
    without following a link; made first if ``create``."""
    with contextlib.ExitStack() as stack:
        fd = stack.enter_context(closing(open_dir(root, create=create)))
        for name in names:
            fd = stack.enter_context(closing(open_dir(name, dir_fd=fd, create=create)))
        yield fd


def plain_files(dir_fd: int) -> Iterator[str]:
    """Names of the plain files in the directory (links are not followed, so a link is never one)."""
    with os.scandir(dir_fd) as it:
        for entry in it:
            try:
                if entry.is_file(follow_symlinks=False):
                    yield entry.name
            except OSError:
                continue  # gone or unreadable since it was listed


def kind(dir_fd: int, name: str) -> str | None:
    """``file`` (a plain file), ``other`` (a link, directory, FIFO, ...) or None (nothing by that name)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return "file" if stat.S_ISREG(st.st_mode) else "other"


@contextlib.contextmanager
def open_plain(dir_fd: int, name: str, limit: int | None = None) -> Iterator[tuple[BinaryIO, int]]:
    """The plain file ``name`` opened for reading, and its size; NotPlainFileError when it is not a plain file
    or is larger than ``limit`` bytes."""
    fd = _open(name, _READ, dir_fd)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotPlainFileError(f"{name} is not a plain file")
        if limit is not None and st.st_size > limit:
            raise NotPlainFileError(f"{name} has {st.st_size} bytes, more than the {limit} allowed")
        yield f, st.st_size


def read_plain(dir_fd: int, name: str, limit: int) -> bytes:
    """The bytes of the plain file ``name``, at most ``limit`` (NotPlainFileError otherwise, also when it grows
    past ``limit`` while being read)."""
    with open_plain(dir_fd, name, limit) as (f, _size):
        data = f.read(limit + 1)
    if len(data) > limit:
        raise NotPlainFileError(f"{name} grew past the {limit} bytes allowed while being read")
    return data


@contextlib.contextmanager
def atomic_write(dir_fd: int, name: str) -> Iterator[BinaryIO]:
    """A new file to write; on leaving the block without an error it replaces ``name`` atomically (fsynced,
    renamed, the directory fsynced). On an error the temporary file is removed and ``name`` is untouched.
    NotPlainFileError, before anything is written, when ``name`` is taken by a link, directory or other
    non-plain file (left as it is); should one appear there meanwhile, a link is replaced, never followed."""
    if kind(dir_fd, name) == "other":
        raise NotPlainFileError(f"{name} is not a plain file; left as it is")
    tmp = f"{TEMP_PREFIX}{name}-{secrets.token_hex(6)}"
    fd = _open(tmp, _CREATE, dir_fd, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def remove_plain(dir_fd: int, name: str) -> bool:
    """Delete ``name`` if it is a plain file; True if it was deleted. Anything else is left as it is."""
    if kind(dir_fd, name) != "file":
        return False
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def shown(name: str, limit: int = 80) -> str:
    """A name from a directory as it may go into a log line: ASCII, quoted, at most ``limit`` characters."""
    text = ascii(name)
    return text if len(text) <= limit else text[: limit - 4] + "...'"
