"""A shared torch.compile cache: inductor/AOTAutograd artifacts on a shared volume.

Artifacts come from ``torch.compiler.save_cache_artifacts`` and go back in with
``load_cache_artifacts`` before the first compile, which fills this process's
local inductor caches so compilation becomes mostly cache lookups.

Layout: ``<dir>/<workload key>/<environment key>.bin`` plus a ``.json`` beside it
that says what made it. An optional second, read-only root with the same layout
(``shared``) is tried when the own one has nothing for the key; it is never
written. The workload key covers the model's structure and the
settings that change the graph; the environment key covers the torch version
and the device. A cache from another torch or device is ignored with a log
line; a file that fails to load is ignored the same way. Never fatal.

Every name below a root is opened without following links (dirfiles.py): an artifact, workload folder
or root that is a symbolic link, not a plain file or directory, or larger than MAX_ARTIFACT_BYTES is
ignored with a log line, never read or written through, and nothing is deleted. Files are written to a
fresh temporary name, fsynced and renamed. The artifacts are code the compiler runs: whoever can write
a root can run code in the trainer, so the roots' boundary is the volume's (see the README).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from . import dirfiles
from .errors import one_line

log = logging.getLogger(__name__)

MAX_ARTIFACT_BYTES = 1 << 30
"""Artifacts larger than this are ignored unread and not saved (GPT-2-124M's are about 10 MB)."""
LISTED_ENTRIES = 1000
"""At most this many entries of a workload folder are looked at to name the other environments cached."""


@dataclass(frozen=True)
class CacheKey:
    """Where one process's artifacts live."""

    workload: str
    """Hash of the model structure and graph-shaping settings."""
    environment: str
    """``torch-<version>_<device>``, readable and safe as a file name."""


@dataclass(frozen=True)
class CacheLoad:
    """What happened when the cache was looked up."""

    hit: bool
    """Artifacts for this workload and environment were found and loaded."""
    reason: str
    """One line for the log."""
    status: str = ""
    """A short fixed code for metrics: hit, miss_empty, miss_other_environment, load_failed, no_artifacts,
    unused (loaded, but none of its graphs matched: set by the loop after the first compile)."""


def model_fingerprint(model: nn.Module) -> str:
    """Hash of the module tree, parameter and buffer names, shapes and dtypes (not values)."""
    h = hashlib.sha256()
    h.update(repr(model).encode())
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
    return h.hexdigest()


def device_tag(device: torch.device) -> str:
    """``cuda-sm90-NVIDIA_H200`` or ``cpu``: what compiled kernels depend on."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        name = torch.cuda.get_device_name(device).replace(" ", "_")
        return f"cuda-sm{major}{minor}-{name}"
    return device.type


def make_key(fingerprint: str, graph_settings: dict[str, object], torch_version: str, device: str) -> CacheKey:
    """Combine model, settings, torch version and device into a key (pure)."""
    h = hashlib.sha256(fingerprint.encode())
    h.update(json.dumps(graph_settings, sort_keys=True).encode())
    env = f"torch-{torch_version}_{device}"
    safe_env = "".join(c if c.isalnum() or c in "-_." else "_" for c in env)
    return CacheKey(workload=h.hexdigest()[:32], environment=safe_env)


class CompileCache:
    """Load and save artifacts for one key under one directory."""

    def __init__(self, root: Path, key: CacheKey, shared: Path | None = None) -> None:
        self.root = root
        self.key = key
        self.shared = shared

    @property
    def folder(self) -> Path:
        return self.root / self.key.workload

    @property
    def artifact_path(self) -> Path:
        return self.folder / self.artifact_name

    @property
    def artifact_name(self) -> str:
        return f"{self.key.environment}.bin"

    def _read(self, root: Path) -> bytes:
        """The artifact file's bytes under ``root``; FileNotFoundError when it has none, another OSError
        when something on the way is a link, not a plain file or directory, or too large."""
        with dirfiles.opened(root, self.key.workload) as folder:
            return dirfiles.read_plain(folder, self.artifact_name, MAX_ARTIFACT_BYTES)

    def _other_environments(self) -> list[str]:
        """Environments of the artifacts in the own folder (from its first LISTED_ENTRIES entries)."""
        try:
            with dirfiles.opened(self.root, self.key.workload) as folder:
                names = list(itertools.islice(dirfiles.plain_files(folder), LISTED_ENTRIES))
        except OSError:
            return []
        return sorted(dirfiles.shown(n[: -len(".bin")]) for n in names if n.endswith(".bin"))

    def load(self) -> CacheLoad:
        """Load matching artifacts (the own root's, else the shared one's) into this process's caches; never
        raises."""
        for root in [self.root] if self.shared is None else [self.root, self.shared]:
            path = root / self.key.workload / self.artifact_name
            try:
                data = self._read(root)
            except FileNotFoundError:
                continue
            except OSError as e:
                return _missed(f"compile cache ignored: {path} is not read ({one_line(e)})", "load_failed")
            return self._load_bytes(path, data)
        others = self._other_environments()
        if others:
            listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            reason = f"compile cache ignored: it holds artifacts for {listed}, not {self.key.environment}"
            return _missed(reason, "miss_other_environment", logging.INFO)
        return _missed(f"compile cache miss: nothing under {self.folder}", "miss_empty", logging.INFO)

    @staticmethod
    def _load_bytes(path: Path, data: bytes) -> CacheLoad:
        try:
            info = torch.compiler.load_cache_artifacts(data)
        except Exception as e:
            return _missed(f"compile cache ignored: {path} failed to load ({one_line(e)})", "load_failed")
        if info is None:
            return _missed(f"compile cache ignored: {path} held no artifacts", "no_artifacts", logging.INFO)
        reason = f"compile cache hit: loaded {len(data)} bytes from {path}"
        log.info(reason)
        return CacheLoad(hit=True, reason=reason, status="hit")

    def save(self, meta: dict[str, object]) -> Path | None:
        """Write this process's artifacts atomically; return the path, or None (logged) if there were none or
        they could not be written."""
        try:
            result = torch.compiler.save_cache_artifacts()
        except Exception as e:
            log.warning("compile cache not saved: %s", one_line(e))
            return None
        if result is None:
            log.info("compile cache not saved: this process recorded no artifacts")
            return None
        data, _info = result
        if len(data) > MAX_ARTIFACT_BYTES:
            log.warning("compile cache not saved: %d bytes, more than the %d a load accepts", len(data),
                        MAX_ARTIFACT_BYTES)  # fmt: skip
            return None
        meta_name = f"{self.key.environment}.json"
        try:
            with dirfiles.opened(self.root, self.key.workload, create=True) as folder:
                with dirfiles.atomic_write(folder, self.artifact_name) as f:
                    f.write(data)
                with dirfiles.atomic_write(folder, meta_name) as f:
                    f.write(json.dumps({**meta, **asdict(self.key), "bytes": len(data)}, sort_keys=True).encode())
        except OSError as e:
            log.warning("compile cache not saved under %s: %s", self.folder, one_line(e))
            return None
        log.info("compile cache saved: %d bytes to %s", len(data), self.artifact_path)
        return self.artifact_path


def _missed(reason: str, status: str, level: int = logging.WARNING) -> CacheLoad:
    log.log(level, reason)
    return CacheLoad(hit=False, reason=reason, status=status)
