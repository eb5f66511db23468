"""Profile requests from the channel: ``<stats_dir>/requests/profile-<id>.json`` -> ``profiles/<id>/``.

A request holds ``{"v": 1, "steps": N}``. The trainer claims it (removes the
file), records the next N steps with torch.profiler and exports a Chrome trace
and a table of the top kernels. A malformed request is removed and answered
with ``profiles/<id>/error.txt``.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from statictrain import channel
from torch.profiler import ProfilerActivity, profile

log = logging.getLogger(__name__)

_REQUEST = re.compile(r"^profile-([A-Za-z0-9_.-]{1,64})\.json$")
MAX_STEPS = 100

# Device-kernel name fragments -> category, first match wins (lower case).
KERNEL_CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("communication", ("nccl",)),
    ("attention", ("flash", "fmha", "attention", "sdpa", "cudnn")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "matmul", "_mm_", "sm90_", "cublas")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("loss", ("cross_entropy", "log_softmax", "nll_loss", "logsumexp", "softmax")),
    ("fused_elementwise", ("triton_",)),
    ("copy", ("memcpy", "memset", "copy_kernel")),
)


def kernel_category(name: str) -> str:
    """Which part of a training step a device kernel belongs to, by its name (pure)."""
    low = name.lower()
    for category, parts in KERNEL_CATEGORIES:
        if any(p in low for p in parts):
            return category
    return "other"


def breakdown(kernels: Iterable[tuple[str, float]], wall_us: float, steps: int) -> dict[str, Any]:
    """Device time per category per step, its share of wall time, and the idle rest (pure).

    ``kernels`` are (name, device microseconds) of every kernel in ``steps`` profiled steps
    that took ``wall_us`` in all.
    """
    per: dict[str, float] = {}
    for name, us in kernels:
        category = kernel_category(name)
        per[category] = per.get(category, 0.0) + us
    busy = sum(per.values())
    step_ms = wall_us / 1000 / max(steps, 1)
    out: dict[str, Any] = {
        "steps": steps,
        "step_ms": step_ms,
        "device_busy_ms_per_step": busy / 1000 / max(steps, 1),
        "idle_share": max(0.0, 1 - busy / wall_us) if wall_us > 0 else 0.0,
        "ms_per_step": {k: v / 1000 / max(steps, 1) for k, v in sorted(per.items(), key=lambda kv: -kv[1])},
    }
    out["share_of_wall"] = {k: v / step_ms for k, v in out["ms_per_step"].items()} if step_ms > 0 else {}
    return out


def device_kernels(prof: profile) -> list[tuple[str, float]]:
    """(name, device microseconds) of each device kernel or copy the profiler saw."""
    out = []
    for event in prof.events():
        device_type = getattr(event, "device_type", None)
        # User annotations (e.g. "Optimizer.step#AdamW.step") also appear on the device timeline:
        # they span kernels that are counted themselves.
        if getattr(event, "is_user_annotation", False):
            continue
        if device_type is not None and str(device_type).endswith("CUDA"):
            out.append((event.name, float(event.device_time)))
    return out


@dataclass(frozen=True)
class ProfileRequest:
    """A claimed request."""

    request_id: str
    """The ``<id>`` of ``profile-<id>.json``."""
    steps: int
    """Steps to record."""


def parse_request(text: str) -> int:
    """Steps asked for; ValueError saying what is wrong (pure)."""
    raw = json.loads(text)
    if not isinstance(raw, dict):
        raise ValueError("request must be a JSON object")
    if raw.get("v", 1) != 1:
        raise ValueError(f"unsupported request version {raw.get('v')!r}")
    steps = raw.get("steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be an integer from 1 to {MAX_STEPS}, got {steps!r}")
    return steps


class ProfileService:
    """Polls the request folder and runs at most one profiler at a time."""

    def __init__(self, stats_dir: Path, device: torch.device) -> None:
        self.requests = stats_dir / channel.REQUESTS_DIR
        self.profiles = stats_dir / channel.PROFILES_DIR
        self.requests.mkdir(parents=True, exist_ok=True)
        self.device = device
        self._active: profile | None = None
        self._request: ProfileRequest | None = None
        self._left = 0

    def _claim(self) -> ProfileRequest | None:
        for entry in sorted(self.requests.iterdir()):
            m = _REQUEST.match(entry.name)
            if not m:
                continue
            request_id = m.group(1)
            try:
                text = entry.read_text()
                entry.unlink()
            except FileNotFoundError:
                continue
            try:
                steps = parse_request(text)
            except ValueError as e:
                out = self.profiles / request_id
                out.mkdir(parents=True, exist_ok=True)
                (out / "error.txt").write_text(f"bad profile request: {e}\n")
                log.warning("bad profile request %s: %s", entry.name, e)
                continue
            return ProfileRequest(request_id, steps)
        return None

    def before_step(self) -> None:
        """Start a profiler if a request is waiting and none runs."""
        if self._active is not None:
            return
        request = self._claim()
        if request is None:
            return
        activities = [ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self._active = profile(activities=activities, record_shapes=False)
        self._active.__enter__()
        self._request = request
        self._left = request.steps
        log.info("profiling %d steps for request %s", request.steps, request.request_id)

    def after_step(self) -> None:
        """Count a step; export and stop when the request is done."""
        if self._active is None or self._request is None:
            return
        self._left -= 1
        if self._left > 0:
            return
        prof, request = self._active, self._request
        self._active, self._request = None, None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        prof.__exit__(None, None, None)
        out = self.profiles / request.request_id
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / ".trace.json.tmp"
        prof.export_chrome_trace(str(tmp))
        tmp.replace(out / "trace.json")
        sort = "self_cuda_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        (out / "top.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=30))
        log.info("profile %s written to %s", request.request_id, out)

    def close(self) -> None:
        if self._active is not None:
            self._active.__exit__(None, None, None)
            self._active = None


class StepWindowProfiler:
    """Profiles steps ``start+1 .. start+steps`` of a run and writes a kernel table and a
    breakdown (``top.txt``, ``breakdown.json``) to ``out``: the bench's before/after profiles."""

    def __init__(self, out: Path, device: torch.device, start: int, steps: int) -> None:
        self.out = out
        self.device = device
        self.start = start
        self.steps = steps
        self._seen = 0
        self._active: profile | None = None
        self._t0 = 0.0
        self.result: dict[str, Any] | None = None

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def before_step(self) -> None:
        if self._seen == self.start and self._active is None and self.result is None:
            self._sync()
            activities = [ProfilerActivity.CPU]
            if self.device.type == "cuda":
                activities.append(ProfilerActivity.CUDA)
            self._active = profile(activities=activities, record_shapes=False)
            self._active.__enter__()
            self._t0 = time.perf_counter()

    def after_step(self) -> None:
        self._seen += 1
        if self._active is None or self._seen < self.start + self.steps:
            return
        self._sync()
        wall_us = (time.perf_counter() - self._t0) * 1e6
        prof, self._active = self._active, None
        prof.__exit__(None, None, None)
        self.out.mkdir(parents=True, exist_ok=True)
        sort = "self_cuda_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        (self.out / "top.txt").write_text(prof.key_averages().table(sort_by=sort, row_limit=40))
        self.result = breakdown(device_kernels(prof), wall_us, self.steps)
        (self.out / "breakdown.json").write_text(json.dumps(self.result, indent=1))

    def close(self) -> None:
        if self._active is not None:
            self._active.__exit__(None, None, None)
            self._active = None
