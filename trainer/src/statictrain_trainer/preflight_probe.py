"""The isolated half of the pre-flight check: runs in its own process on the CPU.

    python -m statictrain_trainer.preflight_probe REQUEST.json RESULT.json

Imports the entrypoint, asks torch._dynamo where the model+loss graph breaks,
measures the bytes autograd saves for backward at two reduced batches, then
runs two optimizer steps through torch.compile with the spec's settings and
counts compiles and recompiles. Writes everything it measured to RESULT.json.
Exit status: 0 measured (the verdict is the parent's, preflight.py); 2 the
entrypoint did not import or build (message on stderr and in RESULT.json).
A model that hangs or crashes takes only this process down.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
import torch._dynamo
from torch import nn

from . import dynamo_stats
from .exitcodes import UserError
from .loop import LossModule
from .optim import adamw
from .precision import autocast_factory
from .workload import Workload, load_entrypoint

_CPU = torch.device("cpu")


@contextlib.contextmanager
def _saved_bytes(exclude: set[int], out: list[int]) -> Iterator[None]:
    """Count the storages autograd saves for backward (each storage once, parameters excluded)."""
    seen: set[int] = set()

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in exclude and ptr not in seen:
            seen.add(ptr)
            out[0] += storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield


def activation_bytes(
    module: nn.Module,
    batch: Callable[[int, int], tuple[torch.Tensor, torch.Tensor]],
    count: int,
    autocast: Callable[[], AbstractContextManager[object]],
) -> int:
    """Bytes saved for backward by one eager forward of ``count`` samples."""
    exclude = {p.untyped_storage().data_ptr() for p in module.parameters()}
    total = [0]
    x, y = batch(0, count)
    with _saved_bytes(exclude, total), autocast():
        loss = module(x, y)
    loss.backward()
    module.zero_grad(set_to_none=True)
    return total[0]


def graph_breaks(
    module: nn.Module, x: torch.Tensor, y: torch.Tensor, autocast: Callable[[], Any]
) -> list[dict[str, str]]:
    """Each graph break dynamo takes in model+loss: its reason and the innermost source file:line."""
    with autocast():
        explained = torch._dynamo.explain(module)(x, y)
    out: list[dict[str, str]] = []
    for br in explained.break_reasons:
        frame = br.user_stack[-1] if br.user_stack else None
        where = f"{frame.filename}:{frame.lineno}" if frame is not None else "unknown location"
        code = (frame.line or "").strip() if frame is not None else ""
        out.append({"reason": str(br.reason).strip().splitlines()[0], "location": where, "code": code})
    torch._dynamo.reset()
    return out


def compiled_steps(
    module: nn.Module, workload: Workload, req: dict[str, Any], *, count: int, autocast: Callable[[], Any]
) -> dict[str, Any]:
    """Two optimizer steps through torch.compile; compile counts, step times, losses, optimizer state bytes."""
    backend = req["backend"]
    kwargs: dict[str, Any] = {"fullgraph": req["fullgraph"], "dynamic": req["dynamic"], "backend": backend}
    if backend == "inductor" and req["mode"] != "default":
        kwargs["mode"] = req["mode"]
    forward: Callable[..., torch.Tensor] = module if req["mode"] == "none" else torch.compile(module, **kwargs)
    opt = adamw(module, workload.learning_rate, workload.weight_decay, _CPU)
    before = dynamo_stats.read()
    steps: list[dict[str, Any]] = []
    for i in range(2):
        x, y = workload.batch(i * count, count)
        start = dynamo_stats.read()
        t0 = time.perf_counter()
        with autocast():
            loss = forward(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        now = dynamo_stats.read()
        steps.append({
            "seconds": time.perf_counter() - t0,
            "loss": float(loss.detach()),
            "graphs_compiled": now.unique_graphs - start.unique_graphs,
            "recompiles": now.recompiles - start.recompiles,
        })  # fmt: skip
    after = dynamo_stats.read()
    state = sum(
        t.untyped_storage().nbytes()
        for s in opt.state.values()
        for t in s.values()
        if isinstance(t, torch.Tensor) and t.dim() > 0
    )
    return {
        "steps": steps,
        "graphs": after.unique_graphs - before.unique_graphs,
        "graph_breaks_taken": after.graph_breaks - before.graph_breaks,
        "recompiles": after.recompiles - before.recompiles,
        "optimizer_state_bytes": state,
    }


def probe(req: dict[str, Any]) -> dict[str, Any]:
    torch.manual_seed(0)
    workload = load_entrypoint(req["entrypoint"])
    batch_size = req["batch_size"] or workload.batch_size
    small = max(1, min(req["reduced_batch"], batch_size))
    module = LossModule(workload.model, workload.loss)
    autocast = autocast_factory(req["precision"], _CPU)
    params = list(module.parameters())
    result: dict[str, Any] = {
        "workload": workload.name,
        "workload_batch_size": workload.batch_size,
        "batch_size": batch_size,
        "reduced_batch": small,
        "parameters": sum(p.numel() for p in params),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
        "gradient_bytes": sum(p.numel() * p.element_size() for p in params if p.requires_grad),
    }
    x, y = workload.batch(0, small)
    result["graph_breaks"] = graph_breaks(module, x, y, autocast)
    result["activation_bytes"] = {
        str(n): activation_bytes(module, workload.batch, n, autocast) for n in sorted({small, 2 * small})
    }
    if req["fullgraph"] and result["graph_breaks"]:
        result["compile"] = None  # fullgraph would refuse to compile; the breaks above say where
    else:
        result["compile"] = compiled_steps(module, workload, req, count=small, autocast=autocast)
        losses = [s["loss"] for s in result["compile"]["steps"]]
        result["finite_losses"] = all(math.isfinite(v) for v in losses)
    return result


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m statictrain_trainer.preflight_probe REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    req = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    out = Path(argv[1])
    try:
        result = probe(req)
    except UserError as e:
        out.write_text(json.dumps({"user_error": str(e)}))
        print(f"error: {e}", file=sys.stderr)
        return 2
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
