"""Reliability case 12 with real artifacts: a compile cache written on one device, met on another.

Every run is a fresh ``python -m statictrain_trainer.trial`` process (the runtime's own loop and
compile cache) with its own empty inductor cache and one shared compile-cache folder:

1. ``gpu_cold``: compiled on the GPU; saves real artifacts under the GPU's key.
2. ``gpu_warm``: the same on the GPU again: the control, the cache is found and loaded.
3. ``cpu_other``: the same workload on the CPU (``CUDA_VISIBLE_DEVICES=""``) with that folder:
   the GPU's artifacts must be ignored with a log line, and training must run.
4. ``cpu_planted``: the GPU's real artifacts copied under the CPU's file name (a mislabelled
   cache: the kind of file the key cannot catch): the run must not fail, and its losses must equal
   ``cpu_other``'s step for step (the oracle: if GPU kernels had been used, or compilation had
   gone wrong, the CPU's deterministic losses would differ or the run would fail), and it must
   report the cache as unused, not as a hit (the load itself succeeds: torch accepts the bytes).

Another GPU model is not covered: only one model (H200) is lent here. ``--dry-run`` runs on a
CPU-only machine: steps 3-4 with a CPU-written cache standing in for the GPU's (the code path,
not the case).

    python bench/compile_cache_devices.py --entrypoint statictrain_trainer.examples.gpt2:build --precision bf16 \
        --batch 2 --steps 6 --warmup 2 --out bench/results/compile_cache_devices.json
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from statictrain import envvars
from trainer_h200 import base_env, trial


def run(args: argparse.Namespace, work: Path, name: str, *, cpu: bool) -> dict[str, Any]:
    env = {**base_env(args, work, name), envvars.COMPILE_CACHE_DIR: str(work / "cache")}
    env[envvars.BATCH_SIZE] = str(args.batch)
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    data = trial(args, env, work, name)
    keep = ("device", "cache_hit", "cache_reason", "losses", "compile_seconds", "time_to_first_step_seconds")
    return {k: data[k] for k in keep}


def artifacts(work: Path) -> list[Path]:
    return sorted((work / "cache").glob("*/*.bin"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--entrypoint", default="statictrain_trainer.examples.tiny:build")
    p.add_argument("--precision", default="fp32", help="one precision for every run (it is part of the key)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--dry-run", action="store_true", help="CPU only: the code path, not the case")
    args = p.parse_args()
    args.peak_tflops, args.master_port = 1.0, 29531
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("no GPU: run with --dry-run on a CPU-only machine")
    out: dict[str, Any] = {"command": " ".join([sys.executable, *sys.argv]), "torch": torch.__version__}
    out["machine"] = platform.node()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runs = {"gpu_cold": run(args, work, "gpu_cold", cpu=args.dry_run)}
        written = artifacts(work)
        if len(written) != 1:
            raise SystemExit(f"expected one artifact from the cold run, found {written}")
        runs["gpu_warm"] = run(args, work, "gpu_warm", cpu=args.dry_run)
        if args.dry_run:  # stand-in: the CPU's artifact renamed to a GPU's key
            written = [written[0].rename(written[0].with_name("torch-x_cuda-sm90-stand-in.bin"))]
        runs["cpu_other"] = run(args, work, "cpu_other", cpu=True)
        cpu_saved = [a for a in artifacts(work) if a != written[0]]
        if len(cpu_saved) != 1:
            raise SystemExit(f"expected the CPU run to save one artifact of its own, found {cpu_saved}")
        shutil.copyfile(written[0], cpu_saved[0])  # the CPU's file now holds the GPU's bytes
        runs["cpu_planted"] = run(args, work, "cpu_planted", cpu=True)
    other, planted = runs["cpu_other"], runs["cpu_planted"]
    out["runs"] = runs
    out["gpu_artifact"] = written[0].name
    out["warm_run_hit"] = runs["gpu_warm"]["cache_hit"]
    out["other_device_ignored"] = (not other["cache_hit"]) and "ignored" in other["cache_reason"]
    out["planted_run_finished"] = len(planted["losses"]) == args.steps
    out["planted_losses_equal_other"] = planted["losses"] == other["losses"]
    out["planted_reported_unused"] = not planted["cache_hit"] and "graphs matched" in planted["cache_reason"]
    out["loss_fell"] = other["losses"][-1] < other["losses"][0]
    out["dry_run"] = args.dry_run
    out["not_covered"] = "another GPU model: only one model (H200) is lent to this project"
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=1))
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
