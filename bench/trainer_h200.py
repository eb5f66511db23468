"""Benchmark of the training runtime on an H200 (or, with tiny settings, on a CPU for a dry run).

Every figure comes from a fresh process running ``python -m statictrain_trainer.trial``
(the runtime's own loop), each with its own empty inductor cache unless said:

- single: eager vs torch.compile(default) at one batch; time to first step
  (model to device + cache lookup + first step) cold, then in a fresh process
  with the shared compile cache the cold run saved.
- ddp: compiled, the same per-GPU batch on 1 GPU and on 2 GPUs (torchrun,
  NCCL), the 2-GPU run once per bucket size of --ddp-buckets (the fastest is
  kept, bucket_tune.pick): scaling efficiency = tokens/s on 2 / (2 x tokens/s on 1).
- autotune: the runtime's autotuner within a budget; its pick and what it measured.
- parity: loss after --parity-steps steps on learnable token chains (examples/gpt2.py
  build_chain) for bf16 eager (seeds 0 and 1: the noise) and each compile mode the tuner
  may pick; with 2+ GPUs it runs on the last GPU while the autotune phase runs on GPU 0.

Time to first step is the runtime's setup (from the Trainer's construction:
model to device, optimizer, compile-cache load, torch.compile wrapper) plus
step 1; ``*_from_process_start_s`` adds interpreter start, imports and the
workload build (the parts are measured in the trial process; see
``setup_breakdown``).

Results merge into ``--out`` (so phases can run in separate calls) with the
command, versions and machine. Only measured values are written.

    python bench/trainer_h200.py --phase single ddp autotune --out bench/results/trainer_h200.json

``--model gpt2`` (default: examples/gpt2.py, batch 16, keys unprefixed as before) or ``--model
llama`` (examples/llama.py, 0.89 B, T=2048, batch 8; every key prefixed ``llama_``, e.g.
``llama_autotuned_mfu``, ``llama_autotuned_over_compiled_default``: the tuner's pick over
default@batch measured by the tuner itself), so the models' results sit side by side in one file.
MFU is in bf16 terms (the model's FLOPs over flops.py's 989 TFLOP/s for an H200), FP8 runs too.
The parity phase adds ``default+fp8`` (tensorwise) where the machine supports float8 training,
else its one-line reason goes to ``parity.not_run``.

On the H200 device machine (no package index there; Python 3.12, torch 2.11.0+cu130): three
calls of under 9 minutes each. torchao 0.18.0 (built against torch 2.11) travels as the wheel in
the worktree's ``.whl/`` (git-ignored: fetch it with ``python3 -m pip download --no-deps
--only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d .whl
torchao==0.18.0``; torchao-0.18.0-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl,
sha256 6540b148…a9feebe, 3.4 MB), carried with ``carry: [".whl"]``; the failure/timeout record lives in
bench/results/autotune-record/ (commit what comes back, so later calls skip what failed). Each
call starts with SETUP (all of it is in ``bench/trainer_h200_device.sh``: ``run`` with carry
``[".whl"]`` and the command ``bash bench/trainer_h200_device.sh llama`` (then ``llama-parity``,
``gpt2``, ``profile``; ``setup`` checks the install only)::

    { python -m pip install -q --no-index --no-deps --target /tmp/ao .whl/torchao-0.18.0-*.whl ||
      python -m zipfile -e .whl/torchao-0.18.0-*.whl /tmp/ao; } &&
    export PYTHONPATH=$PWD/core/src:$PWD/trainer/src:/tmp/ao &&
    python -c 'import torch, torchao; print(torch.__version__, torchao.__version__)' &&
    cp bench/results/trainer_h200.json $OUT/ && mkdir -p $OUT/record &&
    { cp bench/results/autotune-record/*.json $OUT/record/ 2>/dev/null; true; }

then, with COMMON = ``--record-dir $OUT/record --out $OUT/trainer_h200.json --steps 20 --warmup 6``:

1. ``timeout 560 python bench/trainer_h200.py --model llama --phase single autotune
   --autotune-budget 330 --deadline-s 530 --workdir /tmp/bl COMMON > $OUT/llama.log 2>&1``
2. ``timeout 560 python bench/trainer_h200.py --model llama --phase parity --parity-steps 100
   --parity-batch 4 --parity-eager-seeds 2 --workdir /tmp/bl COMMON > $OUT/llama-parity.log 2>&1``
3. ``timeout 560 python bench/trainer_h200.py --model gpt2 --phase single autotune parity
   --autotune-budget 330 --deadline-s 510 --workdir /tmp/bg COMMON > $OUT/gpt2.log 2>&1``

each followed by ``cp -r /tmp/b?/autotune-logs $OUT/ 2>/dev/null; tail -40 $OUT/*.log``. After
each call copy ``trainer_h200.json`` and ``record/*.json`` from the files that come back into
bench/results/ and bench/results/autotune-record/ (the next call's working tree carries them).

Profiles before and after (issue 28: where the time goes), in the time left of any call, after
SETUP; each writes ``breakdown.json`` (device time per step by kind of kernel) and ``top.txt``::

    for v in "bf16 false" "fp8 true"; do set -- $v; STATICTRAIN_ENTRYPOINT=statictrain_trainer.examples.llama:build
      STATICTRAIN_COMPILE_MODE=default STATICTRAIN_PRECISION=bf16 STATICTRAIN_FP8=$2
      python -m statictrain_trainer.trial --result $OUT/prof-llama-$1.json --steps 12 --warmup 6
      --profile $OUT/prof-llama-$1 > $OUT/prof-llama-$1.log 2>&1; done

(the same with ``STATICTRAIN_CHUNKED_LOSS=true`` for the chunked loss, and the gpt2 entrypoint).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch
from statictrain import envvars
from statictrain_trainer import levers
from statictrain_trainer.autotune import Autotuner, Candidate, FailureRecord, record_key, subprocess_runner
from statictrain_trainer.bucket_tune import BucketOutcome, pick
from statictrain_trainer.flops import peak_tflops

MODELS: dict[str, dict[str, Any]] = {
    "gpt2": {"entrypoint": "statictrain_trainer.examples.gpt2:build", "prefix": "", "batch": 16, "max_batch": 128},
    "llama": {"entrypoint": "statictrain_trainer.examples.llama:build", "prefix": "llama_", "batch": 8,
              "max_batch": 32},
}  # fmt: skip
"""--model: its entrypoint, the prefix of its keys in --out (GPT-2's are unprefixed, as before), its
batch (the tuner's start) and the tuner's largest batch."""

SAFE_NCCL = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def base_env(args: argparse.Namespace, work: Path, name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATICTRAIN_")}
    env.update(SAFE_NCCL)
    env.update(
        {
            envvars.ENTRYPOINT: args.entrypoint,
            envvars.PRECISION: args.precision,
            envvars.COMPILE_CACHE: "true",
            "TORCHINDUCTOR_CACHE_DIR": str(work / f"inductor-{name}"),
            "TRITON_CACHE_DIR": str(work / f"triton-{name}"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if args.peak_tflops:
        env[envvars.PEAK_TFLOPS] = str(args.peak_tflops)
    return env


def trial(
    args: argparse.Namespace, env: dict[str, str], work: Path, name: str, *, nproc: int = 1, steps: int = 0
) -> dict[str, Any]:
    """Run one trial process (or torchrun group) and return its JSON result, with wall time."""
    result = work / f"{name}.json"
    module = ["-m", "statictrain_trainer.trial", "--result", str(result)]
    module += ["--steps", str(steps or args.steps), "--warmup", str(args.warmup)]
    if nproc == 1:
        cmd = [sys.executable, *module]
        env = {**env, envvars.WORLD_SIZE: "1", "RANK": "0", "LOCAL_RANK": "0"}
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc)]
        cmd += ["--master_port", str(args.master_port), *module]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    (work / f"{name}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not result.is_file():
        print(proc.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"trial {name} failed with exit {proc.returncode}")
    data: dict[str, Any] = json.loads(result.read_text())
    data["process_wall_seconds"] = wall
    print(
        f"{name:24s} mode={data['compile_mode']:26s} batch={data['batch_size']:4d} "
        f"world={data['world_size']} tok/s={data['tokens_per_s']:,.0f} mfu={data['mfu']:.3f} "
        f"first_step={data['first_step_seconds']:.2f}s "
        f"to_first_step={data['time_to_first_step_seconds']:.2f}s cache_hit={data['cache_hit']} "
        f"peak_mem={data['peak_memory_bytes'] / 2**30:.1f}GiB",
        flush=True,
    )
    return data


def slim(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("step_seconds", "losses")} | {
        "step_seconds": [round(s, 5) for s in data["step_seconds"]],
        "losses": [round(x, 4) for x in data["losses"]],
    }


def from_process_start(data: dict[str, Any]) -> float:
    """Process start to the end of step 1: interpreter start and imports (read from /proc by the trial
    when it can; else the process's wall time outside the trial's main, which also holds process exit),
    the workload build, then the runtime's own time to first step."""
    before_main = data.get("process_start_to_main_seconds")
    if before_main is None or not math.isfinite(before_main):
        before_main = data["process_wall_seconds"] - data["main_seconds"]
    return float(before_main + data["workload_build_seconds"] + data["time_to_first_step_seconds"])


def shared_cache(work: Path, model: str = "gpt2") -> Path:
    """One compile cache for all phases of one model: the single phase's cold run fills it first,
    later phases (the tuner's trials, the 1-GPU DDP baseline) find what earlier ones saved."""
    return work / ("shared-compile-cache" if model == "gpt2" else f"shared-compile-cache-{model}")


def phase_single(args: argparse.Namespace, work: Path, out: dict[str, Any]) -> None:
    cache = shared_cache(work, args.model)
    if cache.exists() and any(cache.iterdir()):
        raise SystemExit(f"{cache} is not empty: the cold run would not be cold")
    eager_env = {
        **base_env(args, work, "eager"),
        envvars.COMPILE_MODE: "none",
        envvars.BATCH_SIZE: str(args.batch),
    }
    eager = trial(args, eager_env, work, "eager")
    cold_env = {
        **base_env(args, work, "cold"),
        envvars.COMPILE_MODE: "default",
        envvars.BATCH_SIZE: str(args.batch),
        envvars.COMPILE_CACHE_DIR: str(cache),
    }
    cold = trial(args, cold_env, work, "compiled_cold")
    fresh = base_env(args, work, "warm")
    warm_env = {**cold_env, **{k: fresh[k] for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}}
    warm = trial(args, warm_env, work, "compiled_warm")
    if not warm["cache_hit"]:
        print(f"warning: warm run missed the cache: {warm['cache_reason']}", file=sys.stderr)
    out["eager_tok_s"] = eager["tokens_per_s"]
    out["compiled_tok_s"] = cold["tokens_per_s"]
    out["compiled_over_eager"] = cold["tokens_per_s"] / eager["tokens_per_s"]
    out["compiled_warm_run_tok_s"] = warm["tokens_per_s"]
    out["eager_mfu"] = eager["mfu"]
    out["compiled_mfu"] = cold["mfu"]
    out["first_step_cold_s"] = cold["time_to_first_step_seconds"]
    out["first_step_warm_s"] = warm["time_to_first_step_seconds"]
    out["warm_over_cold"] = warm["time_to_first_step_seconds"] / cold["time_to_first_step_seconds"]
    out["warm_cache_hit"] = warm["cache_hit"]
    out["warm_cache_reason"] = warm["cache_reason"]
    out["cold_cache_reason"] = cold["cache_reason"]
    out["first_step_cold_from_process_start_s"] = from_process_start(cold)
    out["first_step_warm_from_process_start_s"] = from_process_start(warm)
    out["warm_over_cold_from_process_start"] = from_process_start(warm) / from_process_start(cold)
    out["warm_start_breakdown_s"] = {
        name: {
            "process_start_to_main": r.get("process_start_to_main_seconds"),
            "outside_main_incl_exit": r["process_wall_seconds"] - r["main_seconds"],
            "workload_build": r["workload_build_seconds"],
            **r["setup_breakdown"],
            "first_step": r["first_step_seconds"],
            "first_step_compile_seconds_dynamo": r["compile_seconds"],
        }
        for name, r in (("cold", cold), ("warm", warm))
    }
    out["single_batch_per_gpu"] = args.batch
    out["runs_single"] = {"eager": slim(eager), "compiled_cold": slim(cold), "compiled_warm": slim(warm)}


def phase_ddp(args: argparse.Namespace, work: Path, out: dict[str, Any]) -> None:
    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        out["ddp2_not_measured"] = f"only {torch.cuda.device_count()} GPU visible on this machine"
        print("ddp: skipped,", out["ddp2_not_measured"], flush=True)
        return
    env = {
        **base_env(args, work, "ddp"),
        envvars.COMPILE_MODE: "default",
        envvars.BATCH_SIZE: str(args.ddp_batch),
        envvars.COMPILE_CACHE_DIR: str(shared_cache(work, args.model)),
    }
    one = trial(args, env, work, "ddp_1gpu")
    twos: dict[int, dict[str, Any]] = {}
    for cap in args.ddp_buckets:
        env2 = {**env, envvars.BUCKET_CAP_MB: str(cap)}
        twos[cap] = trial(args, env2, work, f"ddp_2gpu_bucket{cap}", nproc=2)
    outcomes = [BucketOutcome(cap, r["steady_step_seconds"]) for cap, r in twos.items()]
    cap, reason = pick(outcomes, args.ddp_buckets[0])
    two = twos[cap]
    out["ddp1_tok_s"] = one["tokens_per_s"]
    out["ddp2_tok_s"] = two["tokens_per_s"]
    out["ddp2_scaling_efficiency"] = two["tokens_per_s"] / (2 * one["tokens_per_s"])
    out["ddp2_scaling_by_bucket"] = {c: r["tokens_per_s"] / (2 * one["tokens_per_s"]) for c, r in twos.items()}
    out["ddp_batch_per_gpu"] = args.ddp_batch
    out["ddp_bucket_cap_mb"] = cap
    out["ddp_bucket_reason"] = reason
    out["ddp_settings"] = "gradient_as_bucket_view=True; static_graph off under torch.compile (DDPOptimizer)"
    out.pop("ddp2_not_measured", None)
    out["runs_ddp"] = {"one_gpu": slim(one), **{f"two_gpu_bucket{c}": slim(r) for c, r in twos.items()}}


def phase_autotune(args: argparse.Namespace, work: Path, out: dict[str, Any]) -> None:
    env = {**base_env(args, work, "autotune"), envvars.COMPILE_CACHE_DIR: str(shared_cache(work, args.model))}
    budget = args.autotune_budget
    if args.deadline_s:
        budget = min(budget, args.deadline_s - (time.perf_counter() - args.started) - 15)
    if budget <= 0:
        raise SystemExit(f"no time left for autotune before the {args.deadline_s} s deadline")
    runner = subprocess_runner(
        env, 0, time.perf_counter, steps=args.steps, warmup=args.warmup, log_dir=work / "autotune-logs"
    )
    workload_name = args.entrypoint
    fp8_why = fp8_unsupported_here(args)
    fp8_notes = [fp8_why] if fp8_why else []
    tag = torch.cuda.get_device_name(0).replace(" ", "_") if torch.cuda.is_available() else "cpu"
    record_dir = args.record_dir or work / "autotune-record"
    tuner = Autotuner(
        Candidate("default", args.batch),
        max_batch=args.max_batch,
        budget_s=budget,
        runner=runner,
        clock=time.perf_counter,
        gpu=torch.cuda.is_available(),
        record=FailureRecord(record_dir, record_key(workload_name, torch.__version__, tag)),
        fp8_available=fp8_why is None,
        fp8_reason=fp8_why or "",
        unit_hint_s=cold_trial_seconds(out),
    )
    t0 = time.perf_counter()
    report = tuner.tune()
    spent = time.perf_counter() - t0
    print("autotune:", report.reason, flush=True)
    for o in report.outcomes:
        print(f"  {o.candidate.label:34s} ok={o.ok} tok/s={o.tokens_per_s:,.0f} mfu={o.mfu:.3f} "
              f"{o.seconds:.0f}s {o.error}", flush=True)  # fmt: skip
    chosen = (
        next(o for o in report.outcomes if o.ok and o.candidate == report.chosen)
        if any(o.ok for o in report.outcomes)
        else None
    )
    out["autotuned_choice"] = report.chosen.label
    out["autotune_reason"] = report.reason
    out["autotune_budget_s"] = budget
    out["autotune_seconds"] = spent
    out["autotune_outcomes"] = report.to_json()["outcomes"]
    out["autotune_notes"] = list(report.notes) + [n for n in fp8_notes if n not in report.notes]
    out["autotune_record"] = str(record_dir / FailureRecord.FILE)
    if chosen is not None:
        out["autotuned_tok_s"] = chosen.tokens_per_s
        out["autotuned_mfu"] = chosen.mfu
        base = Candidate("default", args.batch)
        default = next((o for o in report.outcomes if o.ok and o.candidate == base), None)
        default_tok_s = default.tokens_per_s if default is not None else out.get("compiled_tok_s")
        if default_tok_s:
            out["autotuned_over_compiled_default"] = chosen.tokens_per_s / default_tok_s
            out["autotuned_over_compiled_default_basis"] = (
                f"{base.label} in the tuner" if default is not None else "the single phase's compiled run"
            )


def cold_trial_seconds(out: dict[str, Any]) -> float:
    """Wall seconds of the single phase's cold compiled run of this model (0 when not measured): the
    tuner's unit of time until its own first cold trial, whose first trial hits the cache that run
    filled and so cannot measure it (pure)."""
    cold = (out.get("runs_single") or {}).get("compiled_cold") or {}
    return float(cold.get("process_wall_seconds") or 0.0)


def fp8_unsupported_here(args: argparse.Namespace) -> str | None:
    """Why this machine cannot run float8 training (tensorwise), or None."""
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    return levers.fp8_unsupported(levers.probe(device, hidden_and_head=True), "tensorwise", args.precision)


PARITY_MODES: tuple[tuple[str, dict[str, str]], ...] = (
    ("default", {envvars.COMPILE_MODE: "default"}),
    ("reduce-overhead", {envvars.COMPILE_MODE: "reduce-overhead"}),
)
PARITY_FP8: tuple[tuple[str, dict[str, str]], ...] = (
    ("default+fp8", {envvars.COMPILE_MODE: "default", envvars.FP8: "true", envvars.FP8_RECIPE: "tensorwise"}),
)
"""Run too where this machine supports float8 training (else its reason goes to parity.not_run)."""


def pick_option(out: dict[str, Any]) -> tuple[str, dict[str, str]] | None:
    """The tuner's pick (this call's or an earlier call's, from --out) as a parity option at the parity
    batch: its compile mode and levers together, as the tuner would run them (pure)."""
    label = out.get("autotuned_choice")
    if not isinstance(label, str):
        return None
    candidate = Candidate.parse(label)
    env = {k: v for k, v in candidate.env().items() if k != envvars.BATCH_SIZE}
    return f"pick:{candidate.label}", env


def parity_verdict(eager: dict[str, float], options: dict[str, float]) -> dict[str, Any]:
    """Each option's final loss against the band the bf16 eager runs span (pure).

    The eager runs differ in seed (initialisation) and include a repeat of seed 0 (run-to-run
    nondeterminism of the kernels); an option computes the same function when its final loss
    falls inside [min, max] of theirs.
    """
    low, high = min(eager.values()), max(eager.values())
    mean = sum(eager.values()) / len(eager)
    return {
        "eager_final_losses": eager,
        "eager_band": [low, high],
        "eager_mean": mean,
        "options_final_loss": options,
        "options_minus_eager_mean": {n: v - mean for n, v in options.items()},
        "within_eager_band": {n: low <= v <= high for n, v in options.items()},
    }


def parity_key(args: argparse.Namespace) -> str:
    """Where the parity phase writes (its command, its machine): ``parity``, or ``parity_pick`` for a part
    (--parity-options), beside the whole run's."""
    return "_".join(("parity", *args.parity_options))


def phase_parity(args: argparse.Namespace, work: Path, out: dict[str, Any], gpu: int | None = None) -> None:
    """Final loss of each compile mode the tuner may pick against the band of bf16 eager runs."""
    entry = args.parity_entrypoint or args.entrypoint.rsplit(":", 1)[0] + ":build_chain"
    eager_runs = [(f"eager_seed{i}", {envvars.COMPILE_MODE: "none", envvars.SEED: str(i)})
                  for i in range(args.parity_eager_seeds)]  # fmt: skip
    eager_runs.append(("eager_seed0_again", {envvars.COMPILE_MODE: "none", envvars.SEED: "0"}))
    fp8_why = fp8_unsupported_here(args)
    pick = pick_option(out)
    modes = tuple(
        (name, over)
        for name, over in (*PARITY_MODES, *(() if fp8_why else PARITY_FP8), *((pick,) if pick else ()))
        if not args.parity_options or name.split(":")[0] in args.parity_options
    )
    runs: dict[str, dict[str, Any]] = {}
    for name, over in (*eager_runs, *modes):
        env = {
            **base_env(args, work, f"parity-{name}"),
            envvars.ENTRYPOINT: entry,
            envvars.BATCH_SIZE: str(args.parity_batch),
            **over,
        }
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        runs[name] = trial(args, env, work, f"parity_{name}", steps=args.parity_steps)
    tail: int = min(50, int(args.parity_steps))

    def final(r: dict[str, Any]) -> float:
        return float(sum(r["losses"][-tail:])) / tail

    eager = {n: final(runs[n]) for n, _ in eager_runs}
    options = {n: final(runs[n]) for n, _ in modes}
    out[parity_key(args)] = {
        "workload": entry,
        "steps": args.parity_steps,
        "batch": args.parity_batch,
        "loss_first": runs["eager_seed0"]["losses"][0],
        "final_loss_mean_of_last_steps": tail,
        **parity_verdict(eager, options),
        "not_run": {n: fp8_why for n, _ in PARITY_FP8 if not args.parity_options or n in args.parity_options}
        if fp8_why
        else {},
        "fp8_ran_as_fp8": {n: runs[n]["levers"]["fp8"] for n, _ in modes if "fp8" in n},
    }


def unprefixed(whole: dict[str, Any], prefix: str) -> dict[str, Any]:
    """One model's keys without their prefix (GPT-2's prefix is empty: all of them) (pure)."""
    if not prefix:
        return whole
    return {k.removeprefix(prefix): v for k, v in whole.items() if k.startswith(prefix)}


def prefixed(part: dict[str, Any], prefix: str) -> dict[str, Any]:
    """One model's keys under its prefix, e.g. llama_autotuned_mfu (pure)."""
    return {prefix + k: v for k, v in part.items()}


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu_count": torch.cuda.device_count(),
    }
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        info["nvidia_smi"] = smi.stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--phase", nargs="+", choices=["single", "ddp", "autotune", "parity"], required=True)
    p.add_argument("--out", type=Path, required=True, help="JSON to merge results into")
    p.add_argument("--model", choices=sorted(MODELS), default="gpt2", help="which example model (key prefix in --out)")
    p.add_argument("--entrypoint", default="", help="default: the model's build")
    p.add_argument("--precision", default="bf16")
    p.add_argument(
        "--batch",
        type=int,
        default=0,
        help="per-GPU batch of eager/compiled and the tuner's start (default: the model's, 16 for gpt2, 8 for llama)",
    )
    p.add_argument("--ddp-batch", type=int, default=32)
    p.add_argument("--ddp-buckets", type=int, nargs="+", default=[25, 100], help="bucket sizes (MB) to measure")
    p.add_argument("--max-batch", type=int, default=0, help="the tuner's largest batch (default: the model's)")
    p.add_argument(
        "--record-dir",
        type=Path,
        default=None,
        help="the tuner's failure/timeout record (autotune-failures.json), kept across calls; "
        "default: <workdir>/autotune-record",
    )
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--autotune-budget", type=float, default=300.0)
    p.add_argument("--deadline-s", type=float, default=0.0, help="shrink the tuner's budget to end by then")
    p.add_argument("--peak-tflops", type=float, default=0.0, help="override (CPU dry runs)")
    p.add_argument("--master-port", type=int, default=29517)
    p.add_argument("--parity-steps", type=int, default=200)
    p.add_argument("--parity-batch", type=int, default=8)
    p.add_argument("--parity-eager-seeds", type=int, default=3, help="bf16 eager runs (seeds 0..N-1) for the band")
    p.add_argument(
        "--parity-options", nargs="*", default=[],
        help="run only these options beside the eager band: default, reduce-overhead, default+fp8, pick "
        "(the tuner's pick from this call or --out; default: all); written under parity_<options>",
    )  # fmt: skip
    p.add_argument("--parity-entrypoint", default="", help="default: the entrypoint's module, function build_chain")
    p.add_argument("--workdir", type=Path, default=None, help="keep trial logs here (default: a temp dir)")
    args = p.parse_args()
    model = MODELS[args.model]
    args.entrypoint = args.entrypoint or model["entrypoint"]
    args.batch = args.batch or model["batch"]
    args.max_batch = args.max_batch or model["max_batch"]
    prefix: str = model["prefix"]
    args.started = time.perf_counter()
    whole: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    out = unprefixed(whole, prefix)  # this model's keys; written back under its prefix
    work = args.workdir or Path(tempfile.mkdtemp(prefix="trainer-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    phases = {"single": phase_single, "ddp": phase_ddp, "autotune": phase_autotune, "parity": phase_parity}
    order = list(args.phase)
    beside: threading.Thread | None = None
    beside_out: dict[str, Any] = {}
    if "parity" in order and "autotune" in order and torch.cuda.device_count() >= 2:
        # Parity on the last GPU while the tuner works on GPU 0 (its trials' compile times are
        # then not cold-machine figures; the tuner compares them with each other only).
        order.remove("parity")

        def parity_beside() -> None:
            try:
                phase_parity(args, work, beside_out, gpu=torch.cuda.device_count() - 1)
            except BaseException as e:  # a failed trial raises SystemExit; keep the rest
                beside_out["parity_error"] = f"{type(e).__name__}: {e}"

        beside = threading.Thread(target=parity_beside, name="parity", daemon=True)
    for name in order:
        t0 = time.perf_counter()
        if name == "autotune" and beside is not None:
            beside.start()
        phases[name](args, work, out)
        if name == "autotune" and beside is not None:
            left = args.deadline_s - (time.perf_counter() - args.started) if args.deadline_s else None
            beside.join(None if left is None else max(1.0, left))
            if beside.is_alive():
                beside_out["parity_error"] = "not finished before the --deadline-s"
            out.update(beside_out)
            out.setdefault("commands", {})[parity_key(args)] = "python " + " ".join(shlex.quote(a) for a in sys.argv)
        print(f"phase {name}: {time.perf_counter() - t0:.0f} s", flush=True)
        key = parity_key(args) if name == "parity" else name
        commands = out.setdefault("commands", {})
        commands[key] = "python " + " ".join(shlex.quote(a) for a in sys.argv)
        out["command"] = "; ".join(f"[{k}] {v}" for k, v in commands.items())
        out["torch"] = torch.__version__
        out["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        out.setdefault("machines", {})[key] = machine()
        out["entrypoint"] = args.entrypoint
        out["precision"] = args.precision
        out["model"] = args.model
        gpu_name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        out["peak_tflops_for_mfu"] = peak_tflops(gpu_name, args.precision, args.peak_tflops)
        out["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        whole.update(prefixed(out, prefix))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(whole, indent=1, allow_nan=True, default=str) + "\n")
    summary = {k: out.get(k) for k in (
        "eager_tok_s", "compiled_tok_s", "compiled_over_eager", "autotuned_tok_s", "autotuned_mfu",
        "autotuned_choice", "autotuned_over_compiled_default", "first_step_cold_s", "first_step_warm_s",
        "warm_over_cold",
        "ddp2_scaling_efficiency", "ddp_bucket_cap_mb", "parity", "torch", "gpu",
    )}  # fmt: skip
    print(json.dumps(summary, indent=1, default=lambda v: None if isinstance(v, float) and math.isnan(v) else v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
