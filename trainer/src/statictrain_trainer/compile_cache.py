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
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

log = logging.getLogger(__name__)


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
        return self.folder / f"{self.key.environment}.bin"

    def load(self) -> CacheLoad:
        """Load matching artifacts (the own root's, else the shared one's) into this process's caches; never
        raises."""
        path = self.artifact_path
        if not path.is_file() and self.shared is not None:
            seeded = self.shared / self.key.workload / path.name
            path = seeded if seeded.is_file() else path
        if not path.is_file():
            others = sorted(p.stem for p in self.folder.glob("*.bin")) if self.folder.is_dir() else []
            if others:
                reason = (
                    f"compile cache ignored: it holds artifacts for {', '.join(others)}, not {self.key.environment}"
                )
                status = "miss_other_environment"
            else:
                reason = f"compile cache miss: nothing under {self.folder}"
                status = "miss_empty"
            log.info(reason)
            return CacheLoad(hit=False, reason=reason, status=status)
        try:
            data = path.read_bytes()
            info = torch.compiler.load_cache_artifacts(data)
        except Exception as e:
            reason = f"compile cache ignored: {path} failed to load ({type(e).__name__}: {e})"
            log.warning(reason)
            return CacheLoad(hit=False, reason=reason, status="load_failed")
        if info is None:
            reason = f"compile cache ignored: {path} held no artifacts"
            log.info(reason)
            return CacheLoad(hit=False, reason=reason, status="no_artifacts")
        reason = f"compile cache hit: loaded {len(data)} bytes from {path}"
        log.info(reason)
        return CacheLoad(hit=True, reason=reason, status="hit")

    def save(self, meta: dict[str, object]) -> Path | None:
        """Write this process's artifacts atomically; return the path, or None if there were none."""
        try:
            result = torch.compiler.save_cache_artifacts()
        except Exception as e:
            log.warning("compile cache not saved: %s: %s", type(e).__name__, e)
            return None
        if result is None:
            log.info("compile cache not saved: this process recorded no artifacts")
            return None
        data, _info = result
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.artifact_path
        tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        meta_path = path.with_suffix(".json")
        tmp_meta = meta_path.with_name(f".tmp-{meta_path.name}-{os.getpid()}")
        tmp_meta.write_text(json.dumps({**meta, **asdict(self.key), "bytes": len(data)}, sort_keys=True))
        os.replace(tmp_meta, meta_path)
        log.info("compile cache saved: %d bytes to %s", len(data), path)
        return path
