"""What the profiling sidecar costs the training it watches, measured side by side in one run.

One trainer process (statictrain_trainer, GPT-2 124M shape by default) trains
without stopping; the bench starts and stops a real sidecar process around it in
interleaved phases: no sidecar, sidecar sampling every 1 s, every 100 ms, for
several rounds, while a scraper reads /metrics once a second (Prometheus' local
interval here; real clusters scrape less often). Step times are the trainer's
own (``step_seconds`` of its channel records; each step ends with ``loss.item()``),
assigned to phases by their timestamps; the first seconds of each phase are
dropped. Sidecar CPU comes from /proc/<pid>/stat (user + system) over each
phase. Then 200 back-to-back scrapes give the cost of one scrape.

    python3 bench/sidecar_overhead.py --out bench/results/sidecar_overhead.json
    python3 bench/sidecar_overhead.py --dry-run   # CPU, tiny model, short phases: checks the bench itself

Writes JSON with step_ratio_1s, step_ratio_100ms, sidecar_cpu_pct (1 s sampling),
scrape_ms, gpu, command, and the figures behind them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from statictrain import envvars
from statictrain.channel import STEPS_FILE, MalformedRecord, StepRecord, decode
from statictrain_localcluster import procs

CONFIGS: tuple[float | None, ...] = (None, 1.0, 0.1)
"""Sidecar sample interval per phase; None: no sidecar."""


@dataclass
class Phase:
    """One measured window."""

    interval_s: float | None
    round: int
    start: float
    """Unix time the measured window opened (after settling)."""
    end: float
    sidecar_cpu_s: float = 0.0
    scrapes: int = 0
    steps: list[float] = field(default_factory=list)


def label(interval_s: float | None) -> str:
    return "none" if interval_s is None else f"{round(interval_s * 1000)}ms"


def assign_steps(records: list[StepRecord], phases: list[Phase]) -> None:
    """Give each phase the step times of steps that began and ended inside it (pure)."""
    for r in records:
        begin = r.time - r.step_seconds
        for p in phases:
            if p.start <= begin and r.time <= p.end:
                p.steps.append(r.step_seconds)
                break


def summarize(phases: list[Phase]) -> dict[str, dict[str, float]]:
    """Median and mean step time, step count and sidecar CPU % per configuration (pure)."""
    out: dict[str, dict[str, float]] = {}
    for interval in CONFIGS:
        mine = [p for p in phases if p.interval_s == interval]
        steps = [s for p in mine for s in p.steps]
        wall = sum(p.end - p.start for p in mine)
        out[label(interval)] = {
            "steps": len(steps),
            "median_step_ms": statistics.median(steps) * 1000 if steps else float("nan"),
            "mean_step_ms": statistics.fmean(steps) * 1000 if steps else float("nan"),
            "sidecar_cpu_pct": 100 * sum(p.sidecar_cpu_s for p in mine) / wall if wall else float("nan"),
        }
    return out


def per_round_ratios(phases: list[Phase], interval: float) -> list[float]:
    """Median step time with the sidecar / without, round by round (pure)."""
    out = []
    for rnd in sorted({p.round for p in phases}):
        base = [s for p in phases if p.round == rnd and p.interval_s is None for s in p.steps]
        with_sc = [s for p in phases if p.round == rnd and p.interval_s == interval for s in p.steps]
        if base and with_sc:
            out.append(statistics.median(with_sc) / statistics.median(base))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_records(path: Path) -> list[StepRecord]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(decode(line))
        except MalformedRecord:
            continue
    return out


def wait_for(check: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise SystemExit(f"bench: timed out waiting for {what}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    procs.stop_process(proc, grace_s=60)


class Sidecar:
    """A real sidecar process on a free port."""

    def __init__(self, stats: Path, interval_s: float, env: dict[str, str], work: Path) -> None:
        port_file = work / f"port-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "statictrain_sidecar.main",
                "--port",
                "0",
                "--bind",
                "127.0.0.1",
                "--interval",
                str(interval_s),
                "--port-file",
                str(port_file),
                "--log-level",
                "WARNING",
            ],
            env={**env, envvars.STATS_DIR: str(stats)},
        )
        wait_for(port_file.exists, 60, "the sidecar to bind")
        self.url = f"http://127.0.0.1:{int(port_file.read_text())}/metrics"

    def scrape(self) -> bytes:
        with urllib.request.urlopen(self.url, timeout=10) as resp:
            body: bytes = resp.read()
            return body

    def stop(self) -> None:
        stop(self.proc)


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("torch", "nvidia-ml-py", "prometheus-client", "statictrain-sidecar", "statictrain-trainer"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "absent"
    try:
        out["nvidia_driver"] = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            .stdout.strip()
            .splitlines()[0]
        )
    except (OSError, IndexError):
        out["nvidia_driver"] = "none"
    return out


def gpu_model(scrape: str) -> str:
    for line in scrape.splitlines():
        if line.startswith("statictrain_gpu_memory_total_bytes{") and 'gpu_model="' in line:
            return line.split('gpu_model="', 1)[1].split('"', 1)[0]
    return "none"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("bench/results/sidecar_overhead.json"))
    ap.add_argument("--scrape-out", type=Path, help="also save one /metrics body here")
    ap.add_argument("--entrypoint", default="statictrain_trainer.examples.gpt2:build")
    ap.add_argument("--compile-mode", default="default")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--warmup-steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phase-s", type=float, default=12.0)
    ap.add_argument("--settle-s", type=float, default=2.0)
    ap.add_argument("--scrape-every-s", type=float, default=1.0)
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--dry-run", action="store_true", help="tiny CPU model, short phases (checks the bench)")
    args = ap.parse_args()
    if args.dry_run:
        args.entrypoint, args.compile_mode, args.precision = (
            "statictrain_trainer.examples.gpt2:build_small",
            "none",
            "fp32",
        )
        args.warmup_steps, args.rounds, args.phase_s, args.settle_s, args.scrapes = 3, 1, 3.0, 1.0, 20

    work = Path(tempfile.mkdtemp(prefix="sidecar-bench-"))
    stats = work / "stats"
    env = {
        **os.environ,
        envvars.JOB_NAME: "bench",
        envvars.JOB_NAMESPACE: "bench",
        envvars.COMMIT: "bench",
        envvars.TEAM: "bench",
        envvars.POD_NAME: "bench-worker-0",
        envvars.POD_UID: "bench",
        "PYTHONUNBUFFERED": "1",
    }
    trainer = subprocess.Popen(
        [sys.executable, "-m", "statictrain_trainer.main"],
        env={
            **env,
            envvars.ENTRYPOINT: args.entrypoint,
            envvars.COMPILE_MODE: args.compile_mode,
            envvars.PRECISION: args.precision,
            envvars.MAX_STEPS: "10000000",
            envvars.CHECKPOINT_EVERY: "0",
            envvars.STATS_DIR: str(stats),
            "STATICTRAIN_TERMINATION_LOG": str(work / "termination-log"),
        },
    )
    phases: list[Phase] = []
    sample_scrape = b""
    scrape_wall: list[float] = []
    scrape_cpu_s = 0.0
    try:
        steps_file = stats / STEPS_FILE
        wait_for(
            lambda: steps_file.exists() and len(read_records(steps_file)) >= args.warmup_steps,
            600,
            f"{args.warmup_steps} warm-up steps",
        )
        for rnd in range(args.rounds):
            for interval in CONFIGS:
                sidecar = Sidecar(stats, interval, env, work) if interval is not None else None
                time.sleep(args.settle_s)
                cpu0 = cpu_seconds(sidecar.proc.pid) if sidecar else 0.0
                phase = Phase(interval, rnd, time.time(), 0.0)
                deadline = time.monotonic() + args.phase_s
                while (now := time.monotonic()) < deadline:
                    if sidecar:
                        sample_scrape = sidecar.scrape()
                        phase.scrapes += 1
                    time.sleep(min(args.scrape_every_s, max(0.0, deadline - time.monotonic())))
                del now
                phase.end = time.time()
                if sidecar:
                    phase.sidecar_cpu_s = cpu_seconds(sidecar.proc.pid) - cpu0
                    sidecar.stop()
                phases.append(phase)
                print(f"round {rnd} {label(interval)}: {phase.scrapes} scrapes", file=sys.stderr)
        sidecar = Sidecar(stats, 1.0, env, work)
        time.sleep(args.settle_s)
        for _ in range(5):
            sidecar.scrape()
        cpu0 = cpu_seconds(sidecar.proc.pid)
        for _ in range(args.scrapes):
            t = time.perf_counter()
            sample_scrape = sidecar.scrape()
            scrape_wall.append(time.perf_counter() - t)
        scrape_cpu_s = cpu_seconds(sidecar.proc.pid) - cpu0
        sidecar.stop()
    finally:
        stop(trainer)

    records = read_records(stats / STEPS_FILE)
    assign_steps(records, phases)
    summary = summarize(phases)
    none_ms = summary["none"]["median_step_ms"]
    text = sample_scrape.decode()
    result = {
        "step_ratio_1s": summary["1000ms"]["median_step_ms"] / none_ms,
        "step_ratio_100ms": summary["100ms"]["median_step_ms"] / none_ms,
        "sidecar_cpu_pct": summary["1000ms"]["sidecar_cpu_pct"],
        "sidecar_cpu_pct_100ms": summary["100ms"]["sidecar_cpu_pct"],
        "scrape_ms": statistics.median(scrape_wall) * 1000,
        "scrape_ms_p99": sorted(scrape_wall)[int(0.99 * (len(scrape_wall) - 1))] * 1000,
        "scrape_sidecar_cpu_ms": scrape_cpu_s / args.scrapes * 1000,
        "scrape_bytes": len(sample_scrape),
        "gpu": gpu_model(text),
        "gpu_series_exported": sorted(
            {ln.split("{", 1)[0] for ln in text.splitlines() if ln.startswith("statictrain_gpu_")}
        ),
        "per_round_step_ratio_1s": per_round_ratios(phases, 1.0),
        "per_round_step_ratio_100ms": per_round_ratios(phases, 0.1),
        "by_config": summary,
        "setup": {
            "entrypoint": args.entrypoint,
            "compile_mode": args.compile_mode,
            "precision": args.precision,
            "rounds": args.rounds,
            "phase_s": args.phase_s,
            "settle_s": args.settle_s,
            "scrape_every_s": args.scrape_every_s,
            "scrapes_for_cost": args.scrapes,
            "step_time": "trainer's own step_seconds (ends with loss.item()); median per configuration",
            "cpu": "sidecar user+system seconds from /proc/<pid>/stat over the phase, incl. its scrapes",
        },
        "phases": [{k: v for k, v in asdict(p).items() if k != "steps"} | {"steps": len(p.steps)} for p in phases],
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "versions": versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "processor": platform.machine()},
        "dry_run": args.dry_run,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    if args.scrape_out:
        args.scrape_out.write_text(text)
    print(
        json.dumps({k: result[k] for k in ("step_ratio_1s", "step_ratio_100ms", "sidecar_cpu_pct", "scrape_ms", "gpu")})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
