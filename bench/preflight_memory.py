"""Pre-flight memory estimate vs. the GPU's measured peak, for the GPT-2 124M example.

The estimate comes from ``statictrain-preflight --json`` (CPU only, batch 2 and 4,
extrapolated). The oracle shares none of its code: a fresh process per case puts
the same example model on the GPU and runs three optimizer steps the way the
runtime does (autocast bf16, fused AdamW, eager or torch.compile default), then
reads torch.cuda.max_memory_allocated / max_memory_reserved.

    python bench/preflight_memory.py --batches 16 32 --out bench/results/preflight_memory.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENTRYPOINT = "statictrain_trainer.examples.gpt2:build"


def measure(mode: str, batch: int) -> dict[str, float]:
    import torch  # noqa: PLC0415
    from statictrain_trainer.examples import gpt2  # noqa: PLC0415
    from torch.nn import functional as F  # noqa: N812, PLC0415

    torch.manual_seed(0)
    w = gpt2.build()
    model = w.model.cuda()

    def step_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = model(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

    fn = step_loss if mode == "eager" else torch.compile(step_loss)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    for i in range(3):
        x, y = w.batch(i * batch, batch)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fn(x.cuda(), y.cuda())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return {
        "max_allocated_bytes": float(torch.cuda.max_memory_allocated()),
        "max_reserved_bytes": float(torch.cuda.max_memory_reserved()),
        "loss": float(loss),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[16, 32])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--measure", nargs=2, metavar=("MODE", "BATCH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure[0], int(args.measure[1]))))
        return 0
    import torch  # noqa: PLC0415
    from statictrain_trainer import preflight  # noqa: PLC0415

    spec = {
        "apiVersion": "statictrain.io/v1alpha1", "kind": "StaticTrainingJob", "metadata": {"name": "gpt2"},
        "spec": {"image": "x", "entrypoint": ENTRYPOINT, "resources": {"gpusPerReplica": 1, "gpuModels": ["H200"]},
                 "precision": "bf16", "env": [{"name": "STATICTRAIN_BATCH_SIZE", "value": str(args.batches[0])}]},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "job.yaml")
        path.write_text(json.dumps(spec))
        cmd = [sys.executable, "-m", "statictrain_trainer.preflight", "-f", str(path), "--json"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        preflight_s = time.perf_counter() - t0
    est = json.loads(proc.stdout)
    fixed = est["parts"]["parameters"] + est["parts"]["gradients"] + est["parts"]["optimizer_state"]
    rows: list[dict[str, Any]] = []
    for batch in args.batches:
        acts, _ = preflight.activations_at(est["probe"]["activation_bytes"], batch)
        row: dict[str, Any] = {"batch": batch, "estimate_bytes": fixed + acts}
        for mode in ("eager", "compiled"):
            out = subprocess.run([sys.executable, __file__, "--out", "-", "--measure", mode, str(batch)],
                                 capture_output=True, text=True, check=True)  # fmt: skip
            m = json.loads(out.stdout.strip().splitlines()[-1])
            row[mode] = m
            row[f"estimate_over_{mode}_allocated"] = row["estimate_bytes"] / m["max_allocated_bytes"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {
        "command": " ".join(sys.argv),
        "what": "preflight peak-memory estimate (CPU, batches 2 and 4, extrapolated) over the GPU's measured peak "
        "allocated bytes, GPT-2 124M example, T=1024, bf16 autocast, fused AdamW, 3 steps",
        "estimate_basis": est["basis"],
        "estimate_parts_at_first_batch": est["parts"],
        "preflight_seconds": preflight_s,
        "rows": rows,
        "versions": {"torch": torch.__version__, "python": platform.python_version()},
        "machine": {"gpu": torch.cuda.get_device_name(0), "cpus": __import__("os").cpu_count()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
