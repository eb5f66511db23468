"""``statictrain-preflight -f job.yaml``: catch a job that would waste GPU time before it gets any.

Runs the job's entrypoint on this machine's CPU in a child process
(``preflight_probe``: a model that hangs or crashes takes only the child
down), at a reduced batch, with the spec's compile settings, and reports:

- graph breaks with their source file:line (torch._dynamo.explain);
- compiles and recompiles over two optimizer steps;
- estimated peak GPU memory per GPU model the spec may land on, at the
  spec's batch per GPU (see :func:`peak_bytes` for the basis);
- $/hour per GPU model from the shipped price catalog (statictrain.pricing).

The compile backend is ``aot_eager`` unless ``--backend inductor``: graph
breaks and recompiles are decided by dynamo, before any backend, and
AOTAutograd still traces forward and backward; inductor's C++ code generation
on a CPU took minutes for the 2-layer GPT-2 example here, which is the
cost of a pre-flight, not of a training job.

Exit status: 0 no problem found; 1 a problem that would fail or waste the
job (``fullgraph`` with graph breaks, fits no allowed GPU, the steps raised,
the child crashed or timed out; recompiles and non-finite losses are warnings); 2 bad input or an
entrypoint that does not import (with the import error).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from statictrain import api, envvars, gpus, manifest, preflight_message
from statictrain.pricing import ON_DEMAND, SPOT, Catalog, parse_catalog, shipped_catalog_text

GIB = 1024**3
CONTEXT_RESERVE_BYTES = 1 * GIB
"""Held back on every GPU for the CUDA context, cuBLAS/cuDNN workspaces and allocator slack (assumed)."""
DEFAULT_REDUCED_BATCH = 2
DEFAULT_TIMEOUT_S = float(api.DEFAULTS["preflight"]["timeoutSeconds"])
BACKENDS = ("aot_eager", "inductor")


@dataclass(frozen=True)
class Request:
    """What the child process runs (JSON between the two processes)."""

    entrypoint: str
    mode: str
    fullgraph: bool
    dynamic: bool
    precision: str
    batch_size: int
    """Per-GPU micro-batch from the spec's STATICTRAIN_BATCH_SIZE; 0: the workload's own."""
    reduced_batch: int
    backend: str


def read_spec(path: str | None, spec_json: str | None = None) -> dict[str, Any]:
    """The job's spec from a StaticTrainingJob manifest file (YAML or JSON) or from ``spec_json`` (the spec alone,
    as the operator's pre-flight pod passes it); ValueError saying what is wrong."""
    if spec_json is not None:
        try:
            spec = json.loads(spec_json)
        except ValueError as e:
            raise ValueError(f"--spec is not JSON: {e}") from None
        where = "--spec"
    else:
        assert path is not None
        spec, where = manifest.read_job(path, yaml.safe_load_all).get("spec"), path
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: the spec is not an object")
    if not str(spec.get("entrypoint") or ""):
        raise ValueError(f"{where}: spec.entrypoint is missing; set it to module:function")
    return spec


def spec_env(spec: Mapping[str, Any]) -> dict[str, str]:
    """spec.env as a mapping (the model's own arguments travel this way)."""
    return {
        str(e["name"]): str(e.get("value", "")) for e in spec.get("env") or [] if isinstance(e, dict) and "name" in e
    }


def request(spec: Mapping[str, Any], reduced_batch: int, backend: str) -> Request:
    comp = spec.get("compile") or {}
    raw_batch = spec_env(spec).get(envvars.BATCH_SIZE, "").strip()
    if raw_batch and (not raw_batch.isdigit()):
        raise ValueError(f"spec.env {envvars.BATCH_SIZE}={raw_batch!r} is not a non-negative integer")
    return Request(
        entrypoint=str(spec["entrypoint"]),
        mode=str(comp.get("mode", "default")),
        fullgraph=bool(comp.get("fullgraph", False)),
        dynamic=bool(comp.get("dynamic", False)),
        precision=str(spec.get("precision", "bf16")),
        batch_size=int(raw_batch or 0),
        reduced_batch=reduced_batch,
        backend=backend,
    )


def activations_at(measured: Mapping[str, int], batch: int) -> tuple[int, str]:
    """Activation bytes at ``batch``, extrapolated linearly from the two measured batches, and the basis."""
    points = sorted((int(n), b) for n, b in measured.items())
    (n0, b0), (n1, b1) = points[0], points[-1]
    per_sample = (b1 - b0) / (n1 - n0) if n1 != n0 else b0 / n0
    fixed = max(b0 - per_sample * n0, 0.0)
    value = int(fixed + per_sample * batch)
    basis = (
        f"saved-for-backward bytes of an eager CPU forward at batch {n0} ({b0 / 2**20:.1f} MiB) and {n1} "
        f"({b1 / 2**20:.1f} MiB), linear in batch: {per_sample / 2**20:.2f} MiB/sample"
    )
    return value, basis


def peak_bytes(probe: Mapping[str, Any]) -> tuple[int, dict[str, int], str]:
    """Estimated peak GPU memory at the spec's batch: parameters + gradients + optimizer state + activations.

    Parameters and gradients are the model's own sizes; the optimizer state is
    what AdamW held after the compiled steps (2 x fp32 parameters when they
    were skipped); activations as :func:`activations_at`. Not counted: the
    CUDA context and allocator slack (see CONTEXT_RESERVE_BYTES), DDP's
    gradient buckets, cudagraph pools, and what inductor's fusion saves (eager
    saves at least as much as the compiled graph, so activations are an upper
    estimate for compiled modes).
    """
    comp = probe.get("compile") or {}
    opt = int(comp.get("optimizer_state_bytes") or 2 * probe["parameter_bytes"])
    acts, basis = activations_at(probe["activation_bytes"], int(probe["batch_size"]))
    parts = {
        "parameters": int(probe["parameter_bytes"]),
        "gradients": int(probe["gradient_bytes"]),
        "optimizer_state": opt,
        "activations": acts,
    }
    return sum(parts.values()), parts, basis


def candidate_gpus(spec: Mapping[str, Any], catalog: Catalog) -> list[gpus.Gpu]:
    """GPU models the spec may land on: its gpuModels (every catalog memory size of a family named without
    one), or every GPU model in the catalog when it names none."""
    catalog_models = sorted({e.gpu_model for e in catalog.entries})
    names = [str(n) for n in ((spec.get("resources") or {}).get("gpuModels") or [])]
    out: dict[str, gpus.Gpu] = {}
    for name in names or catalog_models:
        g = gpus.from_name(name)
        if g.model is not None:
            out.setdefault(g.model, g)
        elif g.known:
            for m in catalog_models:
                c = gpus.from_name(m)
                if c.family == g.family and c.model is not None:
                    out.setdefault(c.model, c)
        else:
            out.setdefault(name, g)
    return list(out.values())


def _median_price(catalog: Catalog, model: str, cap: str) -> float | None:
    prices = catalog.gpu_prices(model, SPOT if cap == SPOT else ON_DEMAND)
    return float(statistics.median(prices)) if prices else None


def fit_rows(spec: Mapping[str, Any], peak: int, catalog: Catalog) -> list[dict[str, Any]]:
    """Per candidate GPU: memory, whether the estimate fits, and $/hour of the whole job by capacity type."""
    res = spec.get("resources") or {}
    total_gpus = int(spec.get("replicas", 1)) * int(res.get("gpusPerReplica", 1))
    caps = list((spec.get("placement") or {}).get("capacityTypes") or [ON_DEMAND, SPOT])
    rows: list[dict[str, Any]] = []
    for g in candidate_gpus(spec, catalog):
        mem = g.memory_gb * 10**9 if g.memory_gb is not None else None
        row: dict[str, Any] = {
            "gpu": g.model or g.source,
            "memory_bytes": mem,
            "fits": None if mem is None else peak + CONTEXT_RESERVE_BYTES <= mem,
            "usd_per_hour": {},
        }
        for cap in caps:
            per_gpu = _median_price(catalog, g.model, cap) if g.model else None
            if per_gpu is not None:
                row["usd_per_hour"][cap] = round(per_gpu * total_gpus, 2)
        rows.append(row)
    return rows


def verdict(
    spec: Mapping[str, Any], probe: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> tuple[list[str], list[str]]:
    """Problems that fail the job (exit 1) and warnings about waste that still lets it run."""
    problems: list[str] = []
    warnings: list[str] = []
    breaks = probe["graph_breaks"]
    if breaks and (spec.get("compile") or {}).get("fullgraph"):
        problems.append(f"compile.fullgraph is set and the graph breaks {len(breaks)} time(s): torch.compile will fail")
    comp = probe.get("compile")
    if comp is not None and comp["steps"][-1]["recompiles"] > 0:
        warnings.append("the second step recompiled: each new shape or failed guard compiles again")
    if comp is not None and not probe.get("finite_losses", True):
        warnings.append("a step gave a non-finite loss")
    if int((spec.get("resources") or {}).get("gpusPerReplica", 1)) > 0:
        known = [r for r in rows if r["fits"] is not None]
        if known and not any(r["fits"] for r in known):
            problems.append("the estimated peak memory fits no GPU model the spec allows")
        elif not known:
            warnings.append("no allowed GPU model has a known memory size; fit not checked")
    return problems, warnings


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.1f} MiB"


@dataclass(frozen=True)
class Outcome:
    """The child's measurements and the verdict on them (``--json`` prints this)."""

    probe: dict[str, Any]
    peak_bytes: int
    parts: dict[str, int]
    basis: str
    gpus: list[dict[str, Any]]
    problems: list[str]
    warnings: list[str]
    reserve_bytes: int = CONTEXT_RESERVE_BYTES


def assess(spec: Mapping[str, Any], probe: dict[str, Any], catalog: Catalog) -> Outcome:
    peak, parts, basis = peak_bytes(probe)
    rows = fit_rows(spec, peak, catalog)
    problems, warnings = verdict(spec, probe, rows)
    return Outcome(probe, peak, parts, basis, rows, problems, warnings)


def render(spec: Mapping[str, Any], req: Request, out: Outcome) -> str:
    probe, rows, peak, parts, basis = out.probe, out.gpus, out.peak_bytes, out.parts, out.basis
    lines = [
        f"entrypoint: {req.entrypoint} ({probe['workload']}, {probe['parameters']:,} parameters)",
        f"compile: mode={req.mode} fullgraph={req.fullgraph} dynamic={req.dynamic} precision={req.precision}; "
        f"CPU run with backend {req.backend} at batch {probe['reduced_batch']} "
        f"(spec batch per GPU {probe['batch_size']})",
    ]
    breaks = probe["graph_breaks"]
    lines.append(f"graph breaks: {len(breaks)}")
    lines.extend(f"  {b['location']}: {b['reason']}" + (f"  [{b['code']}]" if b["code"] else "") for b in breaks)
    comp = probe.get("compile")
    if comp is None:
        lines.append("steps: not run (fullgraph would refuse to compile this model)")
    else:
        secs = ", ".join(f"{s['seconds']:.2f}s" for s in comp["steps"])
        lines.append(f"steps: 2 optimizer steps ({secs}); graphs compiled {comp['graphs']}, recompiles "
                     f"{comp['recompiles']} (second step: {comp['steps'][-1]['recompiles']})")  # fmt: skip
    lines.append(
        f"estimated peak GPU memory at batch {probe['batch_size']}: {_gib(peak)} = "
        + " + ".join(f"{k} {_gib(v)}" for k, v in parts.items())
    )
    lines.append(f"  basis: {basis}; an estimate, plus {_gib(CONTEXT_RESERVE_BYTES)} reserved per GPU for the "
                 "CUDA context and workspaces (assumed); GPU memory is the product's GB (10^9 bytes)")  # fmt: skip
    res = spec.get("resources") or {}
    total = int(spec.get("replicas", 1)) * int(res.get("gpusPerReplica", 1))
    if total == 0:
        lines.append("GPUs: none requested (gpusPerReplica 0); no fit check, no GPU price")
    else:
        lines.append(f"GPU models ({total} GPU(s) in the job; $/hour: median catalog price per GPU x {total}):")
        for r in rows:
            mem = _gib(r["memory_bytes"]) if r["memory_bytes"] else "unknown memory"
            fit = {True: "fits", False: "DOES NOT FIT", None: "fit unknown"}[r["fits"]]
            price = ", ".join(f"{c} ${v:.2f}/h" for c, v in r["usd_per_hour"].items()) or "no catalog price"
            lines.append(f"  {r['gpu']}: {mem}, {fit}; {price}")
        lines.append("  $ to finish needs the job's speed on the GPU, which a CPU run cannot measure: "
                     "see `statictrain estimate -f job.yaml` (measured history)")  # fmt: skip
    lines.extend(f"warning: {w}" for w in out.warnings)
    lines.extend(f"PROBLEM: {p}" for p in out.problems)
    lines.append("result: " + ("FAIL" if out.problems else "pass"))
    return "\n".join(lines) + "\n"


def result(out: Outcome) -> api.PreflightResult:
    """The compact result (the pre-flight pod's termination message, statictrain.preflight_message)."""
    probe, comp = out.probe, out.probe.get("compile")
    said = "; ".join(out.problems) or "no problem found"
    summary: api.PreflightResult = {
        "passed": not out.problems,
        "message": "; ".join([said, *(f"warning: {w}" for w in out.warnings)]),
        "graphBreaks": len(probe["graph_breaks"]),
        "breaks": [{"location": b["location"], "reason": b["reason"]} for b in probe["graph_breaks"]],
        "peakMemoryBytes": out.peak_bytes,
    }
    if comp is not None:
        summary["recompiles"] = int(comp["recompiles"])
    return summary


def run_probe(req: Request, env: Mapping[str, str], timeout_s: float) -> tuple[int, dict[str, Any] | None, str]:
    """Run the child; its exit code, its result (None when it wrote none) and the tail of its stderr."""
    with tempfile.TemporaryDirectory(prefix="statictrain-preflight-") as tmp:
        req_path, out_path = Path(tmp, "request.json"), Path(tmp, "result.json")
        req_path.write_text(json.dumps(dataclasses.asdict(req)))
        cmd = [sys.executable, "-m", "statictrain_trainer.preflight_probe", str(req_path), str(out_path)]
        child_env = {**os.environ, **env, "CUDA_VISIBLE_DEVICES": ""}
        try:
            proc = subprocess.run(cmd, env=child_env, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return -1, None, f"the model did not finish two CPU steps in {timeout_s:g} s (killed)"
        result = json.loads(out_path.read_text()) if out_path.exists() else None
        return proc.returncode, result, "\n".join(proc.stderr.strip().splitlines()[-20:])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="statictrain-preflight", description=__doc__.split("\n\n")[0])
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("-f", "--filename", help="the StaticTrainingJob manifest (YAML or JSON; - for stdin)")
    source.add_argument("--spec", help="the job's spec as JSON (the operator's pre-flight pod)")
    p.add_argument("--termination-log", help="also write the result there as compact JSON (at most 4 KiB)")
    p.add_argument("--reduced-batch", type=int, default=DEFAULT_REDUCED_BATCH, help="CPU batch (default 2)")
    p.add_argument("--backend", choices=BACKENDS, default="aot_eager", help="torch.compile backend on the CPU")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds the model may take")
    p.add_argument("--json", action="store_true", help="print the measurements and verdict as JSON")
    args = p.parse_args(argv)
    if args.reduced_batch < 1:
        p.error("--reduced-batch must be >= 1")
    return args


def _finish(args: argparse.Namespace, code: int, summary: api.PreflightResult) -> int:
    """Write the termination log when asked (a failure to write is reported, the exit status kept)."""
    if args.termination_log:
        try:
            Path(args.termination_log).write_text(preflight_message.encode(summary), encoding="ascii")
        except OSError as e:
            print(f"warning: cannot write {args.termination_log}: {e}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        spec = read_spec(args.filename, args.spec)
        req = request(spec, args.reduced_batch, args.backend)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return _finish(args, 2, {"passed": False, "message": f"error: {e}"})
    code, probe, stderr = run_probe(req, spec_env(spec), args.timeout)
    if probe is not None and "user_error" in probe:
        print(f"error: {probe['user_error']}", file=sys.stderr)
        return _finish(args, 2, {"passed": False, "message": f"error: {probe['user_error']}"})
    if code != 0 or probe is None:
        why = f"exit status {code}" if code >= 0 else "timeout"
        said = f"the pre-flight process for {req.entrypoint} failed ({why})"
        print(f"FAIL: {said}:\n{stderr}", file=sys.stderr)
        return _finish(args, 1, {"passed": False, "message": f"{said}: ...{stderr[-600:]}"})
    outcome = assess(spec, probe, parse_catalog(shipped_catalog_text()))
    if args.json:
        print(json.dumps(dataclasses.asdict(outcome), indent=1))
    else:
        sys.stdout.write(render(spec, req, outcome))
    return _finish(args, 1 if outcome.problems else 0, result(outcome))


if __name__ == "__main__":
    sys.exit(main())
