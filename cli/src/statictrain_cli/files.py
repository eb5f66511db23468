"""Files the ``statictrain`` commands read and write: bounded input, atomic output.

An input file (``-f``, ``--report``, ``--nodes``, ``--throughput``) is read only
when it is a regular file or standard input (``-``): a FIFO, a device or a
folder is refused without blocking on it, and at most :data:`MAX_INPUT_BYTES`
are read. YAML whose aliases expand to more values than the file has characters
(a "billion laughs" file) is refused. Errors are :class:`InputError` (a
ValueError) naming the file and what to fix.

An output file (``-o``) is written to a temporary file in its folder and renamed
over the target, so a reader never sees half a report and a failed write leaves
the old file as it was; a target that exists and is not a regular file (a
symlink, a FIFO, a device, a folder) is refused rather than followed.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from typing import Any

import yaml

__all__ = ["MAX_INPUT_BYTES", "InputError", "load_json", "load_yaml", "load_yaml_all", "read_input", "write_output"]

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""Largest input file read (a node list of a few thousand nodes is tens of MB)."""
_CHUNK = 1024 * 1024


class InputError(ValueError):
    """An input or output file that cannot be used; the message names it and says why."""


def _read_bounded(fd: int, path: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, min(_CHUNK, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise InputError(f"{path}: larger than {limit // (1024 * 1024)} MiB; is it the right file?")
    return b"".join(chunks)


def read_input(path: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The text (UTF-8) of the regular file ``path``, or of standard input for ``-``."""
    try:
        if path == "-":
            data = _read_bounded(sys.stdin.fileno(), "standard input", limit)
        else:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)  # a FIFO must not block the open
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise InputError(f"{path}: not a regular file (a FIFO, device or folder); give a file")
                os.set_blocking(fd, True)
                data = _read_bounded(fd, path, limit)
            finally:
                os.close(fd)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}); is it the right file?") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def _check_expansion(docs: list[Any], path: str, budget: int) -> None:
    """Refuse documents that hold more values than the file has characters: only YAML aliases do that."""
    stack: list[Any] = list(docs)
    seen = 0
    while stack:
        v = stack.pop()
        seen += 1
        if seen > budget:
            raise InputError(
                f"{path}: its YAML aliases expand to more values than the file holds; write the values out"
            )
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def load_yaml_all(path: str) -> list[Any]:
    """Every YAML (or JSON) document of ``path``, bounded as :func:`read_input`."""
    text = read_input(path)
    try:
        docs = list(yaml.safe_load_all(text))
    except (yaml.YAMLError, ValueError, RecursionError) as e:
        raise InputError(f"cannot parse {path}: {_first_line(e)}") from None
    _check_expansion(docs, path, max(len(text), 1000))
    return docs


def load_yaml(path: str) -> Any:
    """The single YAML (or JSON) document of ``path``."""
    docs = load_yaml_all(path)
    if len(docs) != 1:
        raise InputError(f"{path}: expected one YAML document, found {len(docs)}")
    return docs[0]


def load_json(path: str) -> Any:
    """The JSON document of ``path``."""
    text = read_input(path)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InputError(f"cannot read {path}: not JSON ({_first_line(e)})") from None


def write_output(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    else:
        if not stat.S_ISREG(st.st_mode):
            raise InputError(
                f"cannot write {path}: it exists and is not a regular file (a symlink, FIFO, "
                "device or folder); give another path"
            )
        mode = stat.S_IMODE(st.st_mode)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), mode if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:  # no temporary file left behind, whatever stopped the write
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise InputError(f"cannot write {path}: {e.strerror or e}") from None
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
