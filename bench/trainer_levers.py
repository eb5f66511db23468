"""Each throughput lever on and off, side by side, with torch.profiler breakdowns and loss parity.

Runs ``python -m statictrain_trainer.trial`` once per configuration, two queues at a
time when two GPUs are visible (one queue per GPU; each queue shares one inductor
cache, so compile times here are not cold and are not reported). Writes the
tokens/s, MFU and, where asked, the profile breakdown of each configuration, and
the loss curves of the parity runs (learnable token chains, see
examples/random_data.chain_tokens) against bf16 eager.

    python bench/trainer_levers.py --out bench/results/trainer_levers.json --workdir /tmp/lv
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
from statictrain import envvars

SAFE_NCCL = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
GPT2 = "statictrain_trainer.examples.gpt2:build"
CHAIN = "statictrain_trainer.examples.gpt2:build_chain"

# name, env overrides, profile?  (two queues, one per GPU)
QUEUES: list[list[tuple[str, dict[str, str], bool]]] = [
    [
        ("eager@16", {envvars.COMPILE_MODE: "none"}, True),
        ("default@16", {envvars.COMPILE_MODE: "default"}, True),
        ("default+cudnn@16", {envvars.COMPILE_MODE: "default", envvars.ATTENTION: "cudnn"}, False),
        ("default+chunked@16", {envvars.COMPILE_MODE: "default", envvars.CHUNKED_LOSS: "true"}, False),
        ("default+copt@16", {envvars.COMPILE_MODE: "default", envvars.COMPILE_OPTIMIZER: "true"}, False),
    ],
    [
        ("eager+cudnn+chunked@16",
         {envvars.COMPILE_MODE: "none", envvars.ATTENTION: "cudnn", envvars.CHUNKED_LOSS: "true"}, False),
        ("reduce-overhead@16", {envvars.COMPILE_MODE: "reduce-overhead"}, False),
        ("reduce-overhead+all@16",
         {envvars.COMPILE_MODE: "reduce-overhead", envvars.ATTENTION: "cudnn", envvars.CHUNKED_LOSS: "true",
          envvars.COMPILE_OPTIMIZER: "true"}, True),
    ],
]  # fmt: skip
PARITY: list[list[tuple[str, dict[str, str]]]] = [
    [
        ("parity eager bf16", {envvars.COMPILE_MODE: "none"}),
        ("parity eager bf16 seed 1", {envvars.COMPILE_MODE: "none", envvars.SEED: "1"}),
        ("parity eager+cudnn+chunked",
         {envvars.COMPILE_MODE: "none", envvars.ATTENTION: "cudnn", envvars.CHUNKED_LOSS: "true"}),
    ],
    [
        ("parity reduce-overhead+all",
         {envvars.COMPILE_MODE: "reduce-overhead", envvars.ATTENTION: "cudnn", envvars.CHUNKED_LOSS: "true",
          envvars.COMPILE_OPTIMIZER: "true"}),
    ],
]  # fmt: skip


def safe_name(name: str) -> str:
    return name.replace("@", "-b").replace("+", "-").replace(" ", "_")


def collect(work: Path, names: list[str]) -> list[dict[str, Any]]:
    """Results already in ``work`` (a run stopped by its time limit), under their configuration names."""
    found = []
    for name in names:
        path = work / f"{safe_name(name)}.json"
        if path.is_file():
            data: dict[str, Any] = json.loads(path.read_text())
            found.append({**data, "name": name})
        else:
            found.append({"name": name, "ok": False, "error": "not run: the bench's time limit came first"})
    return found


def run_one(
    args: argparse.Namespace, name: str, env_over: dict[str, str], *, gpu: int, profile: bool, entry: str, steps: int
) -> dict[str, Any]:
    work: Path = args.workdir
    safe = safe_name(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATICTRAIN_")}
    env.update(SAFE_NCCL)
    env.update({
        envvars.ENTRYPOINT: entry, envvars.PRECISION: "bf16", envvars.BATCH_SIZE: str(args.batch),
        envvars.WORLD_SIZE: "1", "RANK": "0", "LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": str(gpu),
        "TORCHINDUCTOR_CACHE_DIR": str(work / f"inductor-gpu{gpu}"), "TRITON_CACHE_DIR": str(work / f"triton-gpu{gpu}"),
        "PYTHONUNBUFFERED": "1",
    })  # fmt: skip
    env.update(env_over)
    result = work / f"{safe}.json"
    cmd = [sys.executable, "-m", "statictrain_trainer.trial", "--result", str(result)]
    cmd += ["--steps", str(steps), "--warmup", str(args.warmup)]
    if profile:
        cmd += ["--profile", str(work / f"profile-{safe}")]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    (work / f"{safe}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not result.is_file():
        last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-3:]
        print(f"{name:28s} FAILED exit {proc.returncode}: {' | '.join(last)[:400]}", flush=True)
        return {"name": name, "ok": False, "exit": proc.returncode, "error": " | ".join(last)[-600:]}
    data: dict[str, Any] = json.loads(result.read_text())
    data["name"] = name
    data["process_wall_seconds"] = wall
    data["gpu_index"] = gpu
    print(
        f"{name:28s} tok/s={data['tokens_per_s']:>11,.0f} mfu={data['mfu']:.3f} "
        f"mem={data['peak_memory_bytes'] / 2**30:5.1f}GiB wall={wall:5.1f}s notes={data['notes']}",
        flush=True,
    )
    return data


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--parity-steps", type=int, default=200)
    p.add_argument("--parity-batch", type=int, default=8)
    p.add_argument("--small", action="store_true", help="CPU-sized model (a dry run of this script)")
    p.add_argument("--collect", action="store_true", help="only summarize the runs already in --workdir")
    p.add_argument("--run-command", default="", help="with --collect: the command that made the runs")
    p.add_argument("--run-torch", default="", help="with --collect: the torch version the runs printed")
    args = p.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    gpus = max(1, torch.cuda.device_count())
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    gpt2, chain = (GPT2 + "_small", CHAIN.replace("build_chain", "build_small_chain")) if args.small else (GPT2, CHAIN)
    parity_over = {envvars.BATCH_SIZE: str(args.parity_batch)}
    queues = [
        [(n, o, prof, gpt2, args.steps) for n, o, prof in q]
        + [(n, {**o, **parity_over}, False, chain, args.parity_steps) for n, o in pq]
        for q, pq in zip(QUEUES, PARITY, strict=True)
    ]
    if gpus < 2:
        queues = [queues[0] + queues[1]]

    def queue(q: list[tuple[str, dict[str, str], bool, str, int]], gpu: int) -> None:
        for name, over, prof, entry, steps in q:
            r = run_one(args, name, over, gpu=gpu, profile=prof, entry=entry, steps=steps)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    if args.collect:
        results.extend(collect(args.workdir, [item[0] for q in queues for item in q]))
    else:
        threads = [threading.Thread(target=queue, args=(q, i)) for i, q in enumerate(queues)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    parity = [r for r in results if r["name"].startswith("parity")]
    results = [r for r in results if not r["name"].startswith("parity")]
    tail = 50
    base = next((r for r in parity if r.get("name") == "parity eager bf16" and r.get("ok")), None)
    parity_summary = {}
    for r in parity:
        if r.get("ok") and base is not None and "losses" in r:
            parity_summary[r["name"]] = {
                "loss_mean_last_50": statistics.fmean(r["losses"][-tail:]),
                "minus_eager_bf16": statistics.fmean(r["losses"][-tail:]) - statistics.fmean(base["losses"][-tail:]),
                "loss_first": r["losses"][0],
            }
    out = {
        "command": args.run_command if args.collect else "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "summarized_by": "python " + " ".join(shlex.quote(a) for a in sys.argv) if args.collect else "",
        "torch": args.run_torch if args.collect else torch.__version__,
        "gpu": next((r["device"] for r in results if "device" in r), "cpu"),
        "gpus_used": gpus,
        "assumption": "configurations ran two at a time, one per GPU of one host; compile caches shared "
        "within a queue (compile times not comparable); GPT-2 124M, bf16 autocast, random tokens",
        "seconds": time.perf_counter() - t0,
        "runs": sorted(
            ({k: v for k, v in r.items() if k not in ("losses", "step_seconds")} for r in results),
            key=lambda r: r["name"],
        ),
        "parity": parity_summary,
        "parity_runs": [{k: v for k, v in r.items() if k != "step_seconds"} for r in parity],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(json.dumps(parity_summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
