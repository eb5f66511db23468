"""Checkpoints with an integrity check: written atomically, metadata last; loaded only when they verify.

A checkpoint is two files in one directory: ``step-<00000000>.pt`` (``torch.save`` of the state) and
``step-<00000000>.json``, its metadata ``{"format": 2, "step", "bytes", "sha256"}`` (size and SHA-256 of
the ``.pt``). Each is written to a temporary name, fsynced and renamed, the metadata last, so a
checkpoint is complete only once its metadata exists (as torch's distributed checkpoints are). On load,
a checkpoint is used only if its metadata reads back, its payload has that size and checksum, and the
payload says the same format and step; anything else is logged and skipped, and the next older tried.
A ``.pt`` of format 1 (written before checksums, no metadata) is still loaded, with a warning:
``weights_only`` loading still refuses pickled code, but damage that keeps it loadable is not detected.

Pruning keeps the checkpoint just written and the newest complete ones below it, ``keep`` in all, and
only then deletes this trainer's own files (plain files under the names above, and temporary files of
interrupted writes) below the oldest kept. It never counts or deletes files it did not write or cannot
resume from: links, directories, damaged or foreign files, or anything numbered above the checkpoint
just written (such as a checkpoint skipped at resume because it did not fit the model).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard

import torch
from statictrain import envvars

from . import dirfiles
from .errors import one_line
from .exitcodes import UserError

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
LEGACY_FORMAT = 1
"""Written before checksums: a ``.pt`` only, no metadata."""
MAX_STEP = 10**12 - 1
"""Step numbers have 8 to 12 digits in file names; anything larger is not a checkpoint of this trainer."""
MAX_METADATA_BYTES = 64 * 1024
_HASH_CHUNK = 1 << 20
_FINAL = re.compile(r"step-([0-9]{8,12})\.(pt|json)", re.ASCII)
_TEMP = re.compile(re.escape(dirfiles.TEMP_PREFIX) + r"step-([0-9]{8,12})\.(pt|json)-[0-9a-f]{1,32}", re.ASCII)
_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back from disk."""

    step: int
    """Optimizer steps completed when it was written."""
    path: Path
    """Where it was read from."""
    state: dict[str, Any]
    """model, optimizer, scaler and progress counters."""


@dataclass(frozen=True)
class Metadata:
    """What a checkpoint's ``.json`` says about its ``.pt``."""

    step: int
    size: int
    sha256: str


class UnusableError(Exception):
    """Why a checkpoint cannot be resumed from (one line)."""


def payload_name(step: int) -> str:
    return f"step-{step:08d}.pt"


def metadata_name(step: int) -> str:
    return f"step-{step:08d}.json"


def checkpoint_path(directory: Path, step: int) -> Path:
    """The payload file of the checkpoint after ``step`` steps."""
    return directory / payload_name(step)


def parse_metadata(raw: bytes, step: int) -> Metadata:
    """The metadata of the checkpoint named for ``step``; UnusableError saying what is wrong (pure)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise UnusableError(f"its metadata is not JSON ({one_line(e)})") from None
    if not isinstance(data, dict):
        raise UnusableError("its metadata is not a JSON object")
    if not _is_int(data.get("format")) or data["format"] != FORMAT_VERSION:
        raise UnusableError(f"its metadata is not of format {FORMAT_VERSION}")
    if not _is_int(data.get("step")) or data["step"] != step:
        raise UnusableError(f"its metadata names another step than {step}")
    size, digest = data.get("bytes"), data.get("sha256")
    if not _is_int(size) or size < 0:
        raise UnusableError("its metadata has no valid byte count")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise UnusableError("its metadata has no valid sha256")
    return Metadata(step=step, size=size, sha256=digest)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _field(state: object, key: str) -> int | None:
    """An integer field of a loaded payload, or None (also when it holds a tensor or anything else)."""
    value = state.get(key) if isinstance(state, dict) else None
    return value if _is_int(value) else None


def _open(directory: Path, create: bool) -> int | None:
    """The checkpoint directory's descriptor (None when it does not exist and ``create`` is off);
    UserError when it is a symbolic link or not a directory."""
    try:
        return dirfiles.open_dir(directory, create=create)
    except FileNotFoundError:
        if create:
            raise
        return None
    except OSError as e:
        if e.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST):  # EEXIST: a file where it should be made
            raise
        raise UserError(
            f"{envvars.CHECKPOINT_DIR}={directory} is a symbolic link or not a directory: checkpoints are "
            "read and written only in a real directory; point it at one"
        ) from None


def _scan(fd: int) -> dict[int, list[str]]:
    """Step -> this trainer's own file names for it (payload, metadata, leftovers of interrupted writes)."""
    found: dict[int, list[str]] = {}
    for name in dirfiles.plain_files(fd):
        m = _FINAL.fullmatch(name)
        if m and name in (payload_name(int(m.group(1))), metadata_name(int(m.group(1)))):
            found.setdefault(int(m.group(1)), []).append(name)
            continue
        t = _TEMP.fullmatch(name)
        if t:
            found.setdefault(int(t.group(1)), []).append(name)
    return found


def _complete(names: list[str], step: int) -> bool:
    return payload_name(step) in names and metadata_name(step) in names


def list_steps(directory: Path) -> list[int]:
    """Steps of the complete checkpoints (payload and metadata present; not yet verified), newest first."""
    fd = _open(directory, create=False)
    if fd is None:
        return []
    with dirfiles.closing(fd):
        return sorted((s for s, names in _scan(fd).items() if _complete(names, s)), reverse=True)


class _HashingWriter:
    """A binary writer that also hashes and counts what goes through it (for ``torch.save``)."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def save(directory: Path, step: int, state: dict[str, Any], keep: int) -> Path | None:
    """Write the checkpoint for ``step`` (payload, then metadata), then prune to ``keep``. None, with a log
    line, when its names are taken by something that is not a plain file (left as it is), or when ``step``
    is beyond MAX_STEP (only a crafted checkpoint can lead there; its name could not be read back)."""
    if step > MAX_STEP:
        log.error("checkpoint for step %d not written: step numbers end at %d", step, MAX_STEP)
        return None
    fd = _open(directory, create=True)
    assert fd is not None
    with dirfiles.closing(fd):
        for name in (payload_name(step), metadata_name(step)):
            if dirfiles.kind(fd, name) == "other":
                log.error(
                    "checkpoint for step %d not written: %s in %s is not a plain file (a link, directory or "
                    "other); left as it is", step, name, directory,
                )  # fmt: skip
                return None
        # An earlier checkpoint of this step is replaced: it is incomplete from here until the new metadata.
        dirfiles.remove_plain(fd, metadata_name(step))
        with dirfiles.atomic_write(fd, payload_name(step)) as f:
            writer = _HashingWriter(f)
            torch.save({**state, "format": FORMAT_VERSION, "step": step}, writer)  # type: ignore[arg-type]
        meta = {"format": FORMAT_VERSION, "step": step, "bytes": writer.size, "sha256": writer.hash.hexdigest()}
        with dirfiles.atomic_write(fd, metadata_name(step)) as f:
            f.write(json.dumps(meta, sort_keys=True).encode())
        _prune(fd, directory, keep, step)
    return checkpoint_path(directory, step)


def _metadata_fits(fd: int, step: int) -> bool:
    """Its metadata reads back and its payload has the size it names (the checksum is left to loading)."""
    try:
        meta = parse_metadata(dirfiles.read_plain(fd, metadata_name(step), MAX_METADATA_BYTES), step)
        with dirfiles.open_plain(fd, payload_name(step)) as (_f, size):
            return size == meta.size
    except (OSError, UnusableError):
        return False


def _prune(fd: int, directory: Path, keep: int, written: int) -> list[int]:
    """Delete this trainer's files below the oldest of the ``keep`` newest complete checkpoints up to
    ``written`` (itself included); nothing when there are fewer. Returns the steps whose files went."""
    found = _scan(fd)
    below = (s for s in sorted(found, reverse=True) if s < written and _complete(found[s], s))
    kept = [written]
    for s in below:
        if len(kept) >= keep:
            break
        if _metadata_fits(fd, s):
            kept.append(s)
    if len(kept) < keep:
        return []
    removed = []
    for s in sorted(s for s in found if s < kept[-1]):
        try:
            if any([dirfiles.remove_plain(fd, name) for name in found[s]]):
                removed.append(s)
        except OSError as e:
            log.warning("old checkpoint files of step %d in %s not deleted: %s", s, directory, one_line(e))
    return removed


def _sha256(f: BinaryIO, size: int) -> str:
    """SHA-256 of the first ``size`` bytes of ``f`` (from its start)."""
    h = hashlib.sha256()
    left = size
    while left > 0:
        chunk = f.read(min(_HASH_CHUNK, left))
        if not chunk:
            break
        h.update(chunk)
        left -= len(chunk)
    return h.hexdigest()


def _torch_load(f: BinaryIO, map_location: str | torch.device) -> object:
    try:
        return torch.load(f, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises many kinds for a damaged or foreign file
        raise UnusableError(f"it does not load ({one_line(e)})") from None


def _read(fd: int, step: int, names: list[str], map_location: str | torch.device, max_bytes: int | None) -> Any:
    """The state of one checkpoint, verified; UnusableError or OSError saying why not."""
    if payload_name(step) not in names:
        raise UnusableError("its payload is missing")
    if metadata_name(step) not in names:
        with dirfiles.open_plain(fd, payload_name(step), max_bytes) as (f, _size):
            state = _torch_load(f, map_location)
        if _field(state, "format") == FORMAT_VERSION:
            raise UnusableError(f"incomplete: its metadata {metadata_name(step)} is missing")
        if _field(state, "format") != LEGACY_FORMAT or _field(state, "step") != step:
            raise UnusableError("not a statictrain checkpoint")
        log.warning(
            "checkpoint %s has no checksum (format %d, written before format %d): loaded without an "
            "integrity check", payload_name(step), LEGACY_FORMAT, FORMAT_VERSION,
        )  # fmt: skip
        return state
    meta = parse_metadata(dirfiles.read_plain(fd, metadata_name(step), MAX_METADATA_BYTES), step)
    if max_bytes is not None and meta.size > max_bytes:
        raise UnusableError(f"its metadata says {meta.size} bytes, more than the {max_bytes} this model's can take")
    with dirfiles.open_plain(fd, payload_name(step)) as (f, size):
        if size != meta.size:
            raise UnusableError(f"it has {size} bytes, its metadata says {meta.size} (truncated or overwritten)")
        if _sha256(f, size) != meta.sha256:
            raise UnusableError("its checksum does not match its metadata (damaged)")
        f.seek(0)
        state = _torch_load(f, map_location)
    if _field(state, "format") != FORMAT_VERSION or _field(state, "step") != step:
        raise UnusableError(f"not a statictrain checkpoint of format {FORMAT_VERSION} for step {step}")
    return state


def verified(
    directory: Path, map_location: str | torch.device = "cpu", max_bytes: int | None = None
) -> Iterator[Checkpoint]:
    """The checkpoints that pass the integrity check, newest first, each read when it is asked for; each
    one that does not (or is larger than ``max_bytes``) is logged and skipped. A file that appears after
    the scan is not seen; one that disappears is skipped."""
    fd = _open(directory, create=False)
    if fd is None:
        return
    with dirfiles.closing(fd):
        found = _scan(fd)
        for step in sorted(found, reverse=True):
            if not any(name in found[step] for name in (payload_name(step), metadata_name(step))):
                continue  # only leftovers of an interrupted write
            path = checkpoint_path(directory, step)
            try:
                state = _read(fd, step, found[step], map_location, max_bytes)
            except (UnusableError, OSError) as e:
                why = str(e) if isinstance(e, UnusableError) else one_line(e)
                log.warning("skipping unreadable checkpoint %s: %s", path, why)
                continue
            yield Checkpoint(step=step, path=path, state=state)


def load_latest(directory: Path, map_location: str | torch.device = "cpu") -> Checkpoint | None:
    """The newest checkpoint that passes the integrity check, or None."""
    return next(verified(directory, map_location), None)
