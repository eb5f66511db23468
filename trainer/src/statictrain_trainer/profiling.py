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
from dataclasses import dataclass
from pathlib import Path

import torch
from statictrain import channel
from torch.profiler import ProfilerActivity, profile

log = logging.getLogger(__name__)

_REQUEST = re.compile(r"^profile-([A-Za-z0-9_.-]{1,64})\.json$")
MAX_STEPS = 100


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
