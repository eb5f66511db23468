"""Fault-injecting training workload for the fault recorder (``STATICTRAIN_ENTRYPOINT=inject:build``).

The GPT-2 example workload (``FAULT_MODEL=gpt2``: 124M, or ``small``: CPU size) whose
``batch()`` injects one fault ``FAULT_AT_S`` seconds after this process's first batch.
Everything else is the project's own trainer: the fault acts through the ordinary loop.

| FAULT | what happens from FAULT_AT_S on | until |
|---|---|---|
| none | nothing | |
| starve | every batch sleeps FAULT_DELAY_S (a data loader that cannot keep up) | the end |
| straggler | rank FAULT_RANK keeps its GPU busy FAULT_DELAY_S before each batch (a slow GPU/node) | the end |
| hang | rank FAULT_RANK spins a GPU kernel (~100 % busy, no step); others wait in NCCL | FAULT_DURATION_S or killed |
| leak | FAULT_LEAK_GBPS GiB/s of device memory kept alive (a leak) | out of memory |
| idle | a CPU-only phase of FAULT_DURATION_S (GPU memory held, no GPU work), then training resumes | phase ends |
| diverge | one bad update: parameters get noise of scale 1e20, so the loss turns Inf/NaN | the end |

``FAULT_MODEL``: ``gpt2`` (124M), ``small`` (CPU size) or ``small-wide`` (CPU size, 4x wider: slower per
token, the CPU dry run's stand-in for a config regression).

The unix time the fault started (and, for ``idle``, ended) is written to ``FAULT_MARK``
(JSON), so the recorder labels the series from what happened, not from what was planned.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import torch
from statictrain_trainer.examples import gpt2
from statictrain_trainer.workload import Workload

CYCLES_PER_SECOND = 1.5e9
"""Rough GPU clock for torch.cuda._sleep (H200 boosts to ~1.98 GHz; the delay is approximate by design)."""


class Injector:
    """Holds the faults' state; ``before_batch`` runs at the start of every batch() call.

    ``FAULT`` and ``FAULT_AT_S`` may list several faults (comma-separated, times ascending):
    each one replaces the previous at its time (e.g. a straggler that then hangs)."""

    def __init__(self, env: dict[str, str], model: torch.nn.Module) -> None:
        kinds = env.get("FAULT", "none").split(",")
        times = [float(x) for x in env.get("FAULT_AT_S", "0").split(",")]
        if len(times) != len(kinds):
            raise ValueError(f"FAULT lists {len(kinds)} faults but FAULT_AT_S {len(times)} times")
        self.plan = list(zip(times, kinds, strict=True))
        self.kind = "none"
        self.delay_s = float(env.get("FAULT_DELAY_S", "0.1"))
        self.duration_s = float(env.get("FAULT_DURATION_S", "60"))
        self.hang_s = float(env["FAULT_DURATION_S"]) if "FAULT_DURATION_S" in env else math.inf
        self.leak_gbps = float(env.get("FAULT_LEAK_GBPS", "2"))
        self.rank = int(env.get("FAULT_RANK", "0"))
        self.mark = Path(env["FAULT_MARK"]) if env.get("FAULT_MARK") else None
        self.my_rank = int(env.get("RANK", "0"))
        self.model = model
        self.t0: float | None = None
        self.started: float | None = None
        self.done = False
        self.marks: list[dict[str, float | str]] = []
        self.leaked: list[torch.Tensor] = []
        self.leaked_bytes = 0

    @property
    def name(self) -> str:
        return "+".join(k for _, k in self.plan)

    def _cuda(self) -> bool:
        return torch.cuda.is_available() and next(self.model.parameters()).is_cuda

    def _write_mark(self) -> None:
        writer = self.rank if any(k in ("straggler", "hang") for _, k in self.plan) else 0
        if self.mark is None or self.my_rank != writer:
            return
        self.mark.write_text(json.dumps({"faults": self.marks}))

    def _switch(self, kind: str, now: float) -> None:
        if self.marks and "end" not in self.marks[-1]:
            self.marks[-1]["end"] = now
        self.kind, self.started, self.done = kind, now, False
        self.marks.append({"fault": kind, "start": now})
        self._write_mark()

    def _finish(self) -> None:
        self.done = True
        self.marks[-1]["end"] = time.time()
        self._write_mark()

    def before_batch(self) -> None:
        now = time.time()
        if self.t0 is None:
            self.t0 = now
        due = [k for at, k in self.plan if now - self.t0 >= at and k != "none"]
        if due and len(due) > len(self.marks):
            self._switch(due[-1], now)
        if self.kind == "none" or self.done:
            return
        getattr(self, "_" + self.kind)(now)

    def _starve(self, now: float) -> None:
        time.sleep(self.delay_s)

    def _straggler(self, now: float) -> None:
        if self.my_rank != self.rank:
            return
        if self._cuda():
            torch.cuda._sleep(int(self.delay_s * CYCLES_PER_SECOND))  # a GPU-side delay
        else:
            time.sleep(self.delay_s)

    def _hang(self, now: float) -> None:
        if self.my_rank != self.rank:
            return
        end = now + self.hang_s
        while time.time() < end:  # the process stays alive, its GPU busy, no step completes
            if self._cuda():
                torch.cuda._sleep(int(1.0 * CYCLES_PER_SECOND))
                torch.cuda.synchronize()
            else:
                time.sleep(1.0)
        self._finish()

    def _leak(self, now: float) -> None:
        assert self.started is not None
        want = int((now - self.started) * self.leak_gbps * 2**30)
        if want - self.leaked_bytes >= 2**20:
            device = next(self.model.parameters()).device
            n = want - self.leaked_bytes
            self.leaked.append(torch.empty(n, dtype=torch.uint8, device=device))
            self.leaked_bytes = want

    def _idle(self, now: float) -> None:
        a = torch.randn(256, 256)
        end = now + self.duration_s
        while time.time() < end:  # CPU work only; the model stays on the GPU
            a = torch.tanh(a @ a)
        self._finish()

    def _diverge(self, now: float) -> None:
        with torch.no_grad():
            for p in self.model.parameters():
                p.add_(torch.randn_like(p) * 1e20)
        self.done = True  # the damage stays: the window runs to the end


def build() -> Workload:
    """The GPT-2 workload with the fault named by FAULT (see the module docstring)."""
    size = os.environ.get("FAULT_MODEL", "gpt2")
    if size == "gpt2":
        base = gpt2.build()
    elif size == "small-wide":
        base = gpt2.workload(gpt2.GPTConfig(n_layer=2, n_head=2, n_embd=256, vocab_size=256, block_size=64), 4,
                             "gpt2-small-wide-cpu")  # fmt: skip
    else:
        base = gpt2.build_small()
    injector = Injector(dict(os.environ), base.model)
    inner = base.batch

    def batch(start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        injector.before_batch()
        return inner(start, count)

    base.batch = batch
    base.name = f"{base.name}+fault-{injector.name}"
    return base
