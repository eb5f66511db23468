"""On a machine with 2+ GPUs: a trainer on GPU 1 only, the sidecar beside it (seeing every GPU
through NVML, as a sidecar that requests no GPU may on a real node) reports GPU 1 and nothing of
the others.

The oracle is ``nvidia-smi --query-gpu=index,uuid`` (not this project's code): the sidecar's
``gpu_uuid`` labels must be exactly GPU 1's UUID.

    python bench/sidecar_pod_gpus.py --out bench/results/sidecar_pod_gpus.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from statictrain import envvars, metrics


def smi_uuids() -> dict[int, str]:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    rows = [line.split(",") for line in out.strip().splitlines()]
    return {int(i): u.strip() for i, u in rows}


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def labels_of(text: str, metric: str, label: str) -> set[str]:
    found = set()
    for line in text.splitlines():
        if line.startswith(metric + "{") and f'{label}="' in line:
            found.add(line.split(f'{label}="', 1)[1].split('"', 1)[0])
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--gpu", type=int, default=1, help="the GPU the trainer gets")
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args()
    truth = smi_uuids()
    if args.gpu not in truth:
        raise SystemExit(f"GPU {args.gpu} is not on this machine: nvidia-smi lists {sorted(truth)}")
    work = Path(tempfile.mkdtemp(prefix="pod-gpus-"))
    stats = work / "stats"
    base = {k: v for k, v in os.environ.items() if not k.startswith("STATICTRAIN_")}
    sidecar_env = {**base, envvars.STATS_DIR: str(stats), envvars.POD_NAME: "job-worker-0"}
    sidecar_env.pop("CUDA_VISIBLE_DEVICES", None)
    port_file = work / "port"
    sidecar = subprocess.Popen(
        [sys.executable, "-m", "statictrain_sidecar.main", "--port", "0", "--port-file", str(port_file),
         "--interval", "0.2"],
        env=sidecar_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    trainer_env = {
        **base,
        "CUDA_VISIBLE_DEVICES": str(args.gpu),
        envvars.ENTRYPOINT: "statictrain_trainer.examples.gpt2:build_small",
        envvars.COMPILE_MODE: "none",
        envvars.PRECISION: "bf16",
        envvars.MAX_STEPS: "100000",
        envvars.STATS_DIR: str(stats),
        envvars.TERMINATION_LOG: str(work / "termination-log"),
    }
    result: dict[str, Any] = {"nvidia_smi": {str(k): v for k, v in truth.items()}, "trainer_gpu_index": args.gpu}
    if len(truth) < 2:
        result["scope"] = "one GPU only: the publish -> report path and the UUID format, not excluding others"
    trainer: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + args.timeout
        while not port_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        port = int(port_file.read_text())
        before = scrape(port)
        result["before_trainer_reason"] = sorted(labels_of(before, metrics.GPU_AVAILABLE, "reason"))
        result["before_trainer_gpu_uuids"] = sorted(labels_of(before, metrics.GPU_POWER_WATTS, "gpu_uuid"))
        trainer = subprocess.Popen(
            [sys.executable, "-m", "statictrain_trainer.main"],
            env=trainer_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        text = ""
        while time.monotonic() < deadline:
            text = scrape(port)
            if labels_of(text, metrics.GPU_AVAILABLE, "reason") == {"ok"} and labels_of(
                text, metrics.TRAIN_STEP, "pod"
            ):
                break
            if trainer.poll() is not None:
                break
            time.sleep(0.5)
        published = sorted(json.loads(f.read_text())["uuid"] for f in (stats / "gpus").glob("*.json"))
        reported: set[str] = set()
        for metric in (metrics.GPU_UTILIZATION_RATIO, metrics.GPU_POWER_WATTS, metrics.GPU_MEMORY_USED_BYTES):
            reported |= labels_of(text, metric, "gpu_uuid")
        result.update(
            {
                "trainer_published": published,
                "sidecar_reason": sorted(labels_of(text, metrics.GPU_AVAILABLE, "reason")),
                "sidecar_gpu_uuids": sorted(reported),
                "expected": [truth[args.gpu]],
                "trainer_steps_seen": bool(labels_of(text, metrics.TRAIN_STEP, "pod")),
            }
        )
        result["pass"] = result["sidecar_gpu_uuids"] == result["expected"] and published == result["expected"]
    finally:
        for proc in (trainer, sidecar):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if trainer is not None and trainer.stdout is not None:
            result["trainer_log_tail"] = trainer.stdout.read()[-1500:]
        if sidecar.stdout is not None:
            result["sidecar_log_tail"] = sidecar.stdout.read()[-1500:]
    result["command"] = "python " + " ".join(sys.argv)
    result["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("log_tail")}, indent=1))
    return 0 if result.get("pass") else 1


if __name__ == "__main__":
    sys.exit(main())
