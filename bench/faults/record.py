"""Records training series with known faults: this project's trainer and sidecar, faults injected.

Each scenario starts the sidecar (``statictrain_sidecar.main``) on the scenario's GPUs and the
trainer (``statictrain_trainer.main``, under ``torch.distributed.run`` for several ranks) with
the fault-injecting workload of ``inject.py``, scrapes the sidecar's ``/metrics`` every second
and keeps the raw samples (``raw.csv``) with what happened (``meta.json``: settings, commits,
the fault's start/end as the workload wrote them, exit codes). ``--split`` turns raw recordings
into the corpus layout: one directory per recording holding ``<metric>.csv`` files of
``timestamp,value``, plus ``labels.json`` (class and fault windows) and ``meta.json``.

    # one H200, three device calls of 6-8 minutes (every 1-GPU scenario, one after another on GPU 0)
    python3 bench/faults/record.py --plan h200 --part 1 --raw /tmp/raw --deadline-s 530 --archive $OUT/raw1.tgz
    python3 bench/faults/record.py --plan h200 --part 2 --raw /tmp/raw --deadline-s 530 --archive $OUT/raw2.tgz
    python3 bench/faults/record.py --plan h200 --part 3 --raw /tmp/raw --deadline-s 530 --archive $OUT/raw3.tgz
    # then, here: the corpus layout
    python bench/faults/record.py --split /tmp/raw --into bench/data/training_faults
    # the 2-GPU scenarios (DDP straggler, then a hang inside a collective), on nvidia-h200-x2
    python3 bench/faults/record.py --plan h200x2 --raw /tmp/raw2 --deadline-s 400
    # dry run on a CPU (tiny model, gloo): both plans, same code path
    python bench/faults/record.py --plan cpu --raw /tmp/raw-cpu --deadline-s 600

Scenarios of one phase run in lanes at the same time (one lane per GPU); the 1-GPU plan is one
lane, so no scenario shares its GPU with another. The straggler needs two GPUs: two ranks on one
GPU slow each other down, which is not what a slow GPU or node does to a job. Add scenarios to
``plan()`` to record more.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAFE_NCCL = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
GPU_KEYS = {
    "statictrain_gpu_utilization_ratio": "util",
    "statictrain_gpu_power_watts": "power",
    "statictrain_gpu_memory_used_bytes": "mem_used",
    "statictrain_gpu_memory_total_bytes": "mem_total",
    "statictrain_gpu_sm_clock_hertz": "sm_clock",
}
TRAIN_KEYS = {
    "statictrain_train_step": "step",
    "statictrain_train_step_seconds_sum": "step_seconds_sum",
    "statictrain_train_step_seconds_count": "step_seconds_count",
    "statictrain_train_tokens_per_second": "tokens_per_second",
    "statictrain_train_loss": "loss",
    "statictrain_train_seconds_since_last_step": "seconds_since_last_step",
}
RANK_KEY = "statictrain_train_rank_step_seconds"
GPU_SERIES = (
    ("util", "gpu_utilization", "mean"),
    ("power", "gpu_power_watts", "mean"),
    ("mem_used", "gpu_memory_used_bytes", "max"),
    ("mem_total", "gpu_memory_total_bytes", "max"),
)
"""Raw GPU key -> job series and how GPUs combine (the operator's queries: avg utilization, max memory)."""
CLASS_OF_FAULT = {"starve": "starvation", "straggler": "straggler", "hang": "hang", "leak": "memory_leak",
                  "idle": "idle", "diverge": "loss_divergence"}  # fmt: skip


@dataclass
class Segment:
    """One trainer process of a scenario (a regression has two: the old and the new commit)."""

    commit: str
    env: dict[str, str]
    seconds: float
    """Seconds to record after the first step (the process may end sooner, e.g. out of memory)."""


@dataclass
class Scenario:
    name: str
    fault_class: str
    gpus: tuple[int, ...]
    segments: list[Segment]
    fault: dict[str, str] = field(default_factory=dict)
    """FAULT_* variables of inject.py (for the last segment)."""


PLANS = ("h200", "h200x2", "cpu")
"""``h200``: every 1-GPU scenario, one after another on GPU 0 of one H200 (two parts, one device call each);
``h200x2``: the 2-GPU (DDP) scenarios (needs two GPUs); ``cpu``: a dry run of both on a CPU (tiny model, gloo)."""


def plan(kind: str, scale: float | None = None, part: int | None = None) -> list[list[list[Scenario]]]:
    """Phases of lanes of scenarios (lanes of one phase run at the same time, on different GPUs).

    Seconds count from each process's first step; every fault starts 20 s (x scale) after the first
    batch, so the detectors have a baseline. ``part`` (1, 2 or 3) picks a third of the 1-GPU scenarios so that
    each fits one device call of at most ~9 minutes."""
    cpu = kind == "cpu"
    s = scale if scale is not None else (0.25 if cpu else 1.0)  # time scale
    base = (
        {"STATICTRAIN_PRECISION": "fp32", "STATICTRAIN_COMPILE_MODE": "none", "FAULT_MODEL": "small"}
        if cpu
        else {"STATICTRAIN_PRECISION": "bf16", "STATICTRAIN_COMPILE_MODE": "none", "FAULT_MODEL": "gpt2"}
    )
    b8 = {**base, "STATICTRAIN_BATCH_SIZE": "8"}
    b16 = {**base, "STATICTRAIN_BATCH_SIZE": "16"}
    compiled = {**b16, "STATICTRAIN_COMPILE_MODE": "default"}
    # A config regression: fp32 instead of bf16 autocast (several times slower per token, more memory).
    # On the CPU dry run there is no bf16 gain to lose: a larger model stands in (slower per token).
    slower = {**b8, "STATICTRAIN_PRECISION": "fp32"} if not cpu else {**b8, "FAULT_MODEL": "small-wide"}
    at = 20 * s

    def one(name: str, cls: str, env: dict[str, str], secs: float, **fault: str) -> Scenario:
        faults = {"FAULT": fault.pop("kind", "none"), "FAULT_AT_S": str(at), **fault}
        return Scenario(name, cls, (0,), [Segment("c1", env, secs * s)], faults)

    part1 = [
        one("clean-eager-b16", "clean", b16, 35),
        # A legitimate change: a new commit doubles the batch (steps take longer, $ per token does not rise).
        Scenario("clean-batch-change", "clean", (0,), [Segment("c1", b8, 25 * s), Segment("c2", b16, 25 * s)]),
        # A regression under a new commit that also moves memory, then the rollback to the earlier commit.
        # The first commit runs long enough to be judged and then count as good (the revert's target).
        Scenario(
            "regression-then-rollback",
            "regression",
            (0,),
            [Segment("c1", b8, 60 * s), Segment("c2", slower, 35 * s), Segment("c1", b8, 30 * s)],
        ),
        one("starvation", "starvation", b16, 40, kind="starve", FAULT_DELAY_S="0.06"),
        one("memory-leak", "memory_leak", b8, 45, kind="leak", FAULT_LEAK_GBPS="5" if not cpu else "0.01"),
        one("loss-divergence", "loss_divergence", b8, 30, kind="diverge"),
    ]
    part2 = [
        one("idle-short", "idle", b8, 75, kind="idle", FAULT_DURATION_S=str(40 * s)),
        one("hang-short", "hang", b8, 85, kind="hang", FAULT_DURATION_S=str(40 * s)),
        one("hang-long", "hang", b8, 150, kind="hang"),
    ]
    part3 = [
        one("idle-long", "idle", b8, 190, kind="idle", FAULT_DURATION_S=str(150 * s)),
        one("clean-compiled-b16", "clean", compiled, 35),
    ]
    ddp = Scenario(
        "ddp-straggler-then-hang",
        "straggler,hang",
        (0, 1),
        [Segment("c1", b16, 130 * s)],
        {
            "FAULT": "straggler,hang",
            "FAULT_AT_S": f"{at},{at + 20 * s}",
            "FAULT_RANK": "1",
            "FAULT_DELAY_S": "0.05" if not cpu else "0.3",
        },
    )
    single = {1: part1, 2: part2, 3: part3}.get(part or 0, part1 + part2 + part3)
    if kind == "h200":
        return [[single]]
    if kind == "h200x2":
        return [[[ddp]]]
    return [[[ddp]], [single]]


def parse_metrics(text: str) -> dict[str, float]:
    """The samples the corpus keeps, keyed ``util.0``, ``step``, ``rank_step_seconds.1``, ..."""
    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name in GPU_KEYS:
                out[f"{GPU_KEYS[name]}.{sample.labels.get('gpu', '0')}"] = float(sample.value)
            elif name in TRAIN_KEYS:
                out[TRAIN_KEYS[name]] = float(sample.value)
            elif name == RANK_KEY:
                out[f"rank_step_seconds.{sample.labels.get('rank', '0')}"] = float(sample.value)
    return out


class Recorder:
    def __init__(self, raw: Path, cpu: bool, deadline: float, python: str) -> None:
        self.raw = raw
        self.cpu = cpu
        self.deadline = deadline
        self.python = python
        self.port = 29600

    def env(self, sc: Scenario, seg: Segment, work: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("STATICTRAIN_", "FAULT"))}
        paths = [str(ROOT / p / "src") for p in ("core", "trainer", "sidecar")] + [str(ROOT / "bench" / "faults")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")])
        env.update(SAFE_NCCL)
        env.update(seg.env)
        env.update(
            {
                "STATICTRAIN_ENTRYPOINT": "inject:build",
                "STATICTRAIN_STATS_DIR": str(work / "stats"),
                "STATICTRAIN_MAX_STEPS": "100000000",
                "STATICTRAIN_JOB": sc.name,
                "STATICTRAIN_NAMESPACE": "faults",
                "STATICTRAIN_COMMIT": seg.commit,
                "STATICTRAIN_TERMINATION_LOG": str(work / f"termination-{seg.commit}.json"),
                "FAULT_MARK": str(work / "fault.json"),
                "PYTHONUNBUFFERED": "1",
                "OMP_NUM_THREADS": "2",
                "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # CUDA indices = NVML indices (the sidecar's --gpus)
                "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor"),
                "TRITON_CACHE_DIR": str(work / "triton"),
            }
        )
        if seg is sc.segments[-1]:
            env.update(sc.fault)
        if not self.cpu:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in sc.gpus)
        return env

    def trainer_cmd(self, sc: Scenario) -> list[str]:
        if len(sc.gpus) == 1:
            return [self.python, "-m", "statictrain_trainer.main"]
        self.port += 1
        return [self.python, "-m", "torch.distributed.run", "--nproc_per_node", str(len(sc.gpus)),
                "--master_port", str(self.port), "-m", "statictrain_trainer.main"]  # fmt: skip

    def run(self, sc: Scenario) -> None:
        work = self.raw / sc.name
        work.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"name": sc.name, "class": sc.fault_class, "gpus": list(sc.gpus), "segments": []}
        budget = sum(seg.seconds for seg in sc.segments) + 18 * len(sc.segments)
        if time.time() + budget > self.deadline:
            meta["skipped"] = f"not enough time left before the deadline (needs ~{budget:.0f} s)"
            (work / "meta.json").write_text(json.dumps(meta, indent=1))
            print(f"[{sc.name}] skipped: {meta['skipped']}", flush=True)
            return
        side_env = self.env(sc, sc.segments[0], work)
        side_cmd = [self.python, "-m", "statictrain_sidecar.main", "--port", "0", "--port-file", str(work / "port"),
                    "--stats-dir", str(work / "stats"), "--interval", "1", "--bind", "127.0.0.1"]  # fmt: skip
        side_cmd += ["--no-nvml"] if self.cpu else ["--gpus", ",".join(str(g) for g in sc.gpus)]
        side_env.pop("CUDA_VISIBLE_DEVICES", None)
        with open(work / "sidecar.log", "w") as log:
            sidecar = subprocess.Popen(side_cmd, env=side_env, stdout=log, stderr=subprocess.STDOUT)
        rows: list[tuple[float, str, float]] = []
        try:
            port = self._wait_port(work / "port", sidecar)
            for seg in sc.segments:
                meta["segments"].append(self._segment(sc, seg, work, port, rows))
        finally:
            sidecar.send_signal(signal.SIGINT)
            sidecar.send_signal(signal.SIGINT)
            try:
                sidecar.wait(10)
            except subprocess.TimeoutExpired:
                sidecar.kill()
        with open(work / "raw.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["time", "key", "value"])
            w.writerows((f"{t:.3f}", k, repr(v)) for t, k, v in rows)
        mark = work / "fault.json"
        meta["fault"] = {**sc.fault, **(json.loads(mark.read_text()) if mark.exists() else {})}
        (work / "meta.json").write_text(json.dumps(meta, indent=1))
        print(f"[{sc.name}] {len(rows)} samples, fault {meta['fault']}", flush=True)

    def _wait_port(self, path: Path, proc: subprocess.Popen[bytes]) -> int:
        for _ in range(300):
            if path.exists():
                return int(path.read_text())
            if proc.poll() is not None:
                raise RuntimeError(f"sidecar exited with {proc.returncode}")
            time.sleep(0.1)
        raise RuntimeError("sidecar did not start in 30 s")

    def _segment(
        self, sc: Scenario, seg: Segment, work: Path, port: int, rows: list[tuple[float, str, float]]
    ) -> dict[str, Any]:
        env = self.env(sc, seg, work)
        started = time.time()
        with open(work / f"trainer-{seg.commit}.log", "w") as log:
            proc = subprocess.Popen(
                self.trainer_cmd(sc), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        first_step: float | None = None
        exited_at: float | None = None
        steps0: float | None = None
        hard_end = started + seg.seconds + 120
        while True:
            t = time.time()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    sample = parse_metrics(r.read().decode())
            except OSError as e:
                sample = {}
                print(f"[{sc.name}] scrape failed: {e}", flush=True)
            rows.extend((t, k, v) for k, v in sorted(sample.items()))
            count = sample.get("step_seconds_count")
            if steps0 is None:
                steps0 = count or 0.0
            if first_step is None and count is not None and count > steps0:
                first_step = t
            if exited_at is None and proc.poll() is not None:
                exited_at = t
            if exited_at is not None and t - exited_at >= 3:
                break
            if first_step is not None and t - first_step >= seg.seconds:
                break
            if t >= hard_end or t >= self.deadline:
                break
            time.sleep(max(0.0, 1.0 - (time.time() - t)))
        kill_tree(proc.pid)
        proc.wait()
        term = work / f"termination-{seg.commit}.json"
        return {
            "commit": seg.commit,
            "settings": {k: v for k, v in seg.env.items()},
            "process_start": started,
            "first_step": first_step,
            "trainer_exit": exited_at,
            "exit_code": proc.returncode,
            "termination": json.loads(term.read_text()) if term.exists() else None,
            "end": time.time(),
        }


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc; torchrun starts its workers in new sessions)."""
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children[int(fields[1])].append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants (a hung rank ignores SIGTERM)."""
    for p in [pid, *descendants(pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


def record(args: argparse.Namespace) -> None:
    cpu = args.plan == "cpu"
    args.raw.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rec = Recorder(args.raw, cpu, t0 + args.deadline_s, sys.executable)
    info = {"command": " ".join(sys.argv), "started": t0, "host": platform.node(), "python": platform.python_version()}
    try:
        import torch  # noqa: PLC0415

        info["torch"] = torch.__version__
        info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass

    def lane_runner(lane: list[Scenario]) -> None:
        for sc in lane:
            rec.run(sc)
            if args.archive:
                archive(args.raw, args.archive)

    only = set(args.only.split(",")) if args.only else None
    for phase in plan(args.plan, args.scale, args.part):
        lanes = [[sc for sc in lane if only is None or sc.name in only] for lane in phase]
        threads = [threading.Thread(target=lane_runner, args=(lane,)) for lane in lanes if lane]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    info["seconds"] = time.time() - t0
    (args.raw / "recording.json").write_text(json.dumps(info, indent=1))
    if args.archive:
        archive(args.raw, args.archive)
    print(f"recorded in {info['seconds']:.0f} s", flush=True)


def archive(raw: Path, dest: Path) -> None:
    """What was recorded so far (not the compile caches) as one .tar.gz, replaced atomically (a call cut off
    still returns it)."""
    tmp = dest.with_name(dest.name + ".tmp")

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if Path(info.name).name in ("inductor", "triton") else info

    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(raw, arcname=raw.name, filter=keep)
    tmp.replace(dest)


# ---------------------------------------------------------------- split: raw -> corpus layout


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def fmt(v: float) -> str:
    return "nan" if math.isnan(v) else ("inf" if v == math.inf else ("-inf" if v == -math.inf else f"{v:.6g}"))


def job_series(rows: list[tuple[float, str, float]]) -> dict[str, list[tuple[float, float]]]:
    """Per-scrape job-level series (what the operator's queries give: mean/max over GPUs, step time per interval)."""
    by_time: dict[float, dict[str, float]] = defaultdict(dict)
    for t, k, v in rows:
        by_time[t][k] = v
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    prev: dict[str, float] = {}
    for t in sorted(by_time):
        s = by_time[t]
        for key, name in (("step", "train_step"), ("tokens_per_second", "tokens_per_second"), ("loss", "loss"),
                          ("seconds_since_last_step", "seconds_since_last_step")):  # fmt: skip
            if key in s:
                out[name].append((t, s[key]))
        for key, name, agg in GPU_SERIES:
            vals = [v for k, v in s.items() if k.startswith(key + ".")]
            if vals:
                out[name].append((t, sum(vals) / len(vals) if agg == "mean" else max(vals)))
        for k, v in s.items():
            if k.startswith("rank_step_seconds."):
                out[k].append((t, v))
        c, sm = s.get("step_seconds_count"), s.get("step_seconds_sum")
        if c is not None and sm is not None:
            pc, ps = prev.get("c"), prev.get("s")
            if pc is not None and ps is not None and c > pc:
                out["step_seconds"].append((t, (sm - ps) / (c - pc)))
            prev = {"c": c, "s": sm}
    return out


def split(raw: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    labels: dict[str, Any] = {}
    for meta_path in sorted(raw.glob("*/meta.json")):
        meta = json.loads(meta_path.read_text())
        if meta.get("skipped"):
            print(f"{meta['name']}: skipped ({meta['skipped']})")
            continue
        work = meta_path.parent
        with open(work / "raw.csv") as f:
            rows = [(float(r["time"]), r["key"], float(r["value"])) for r in csv.DictReader(f)]
        series = job_series(rows)
        dest = into / meta["name"]
        dest.mkdir(exist_ok=True)
        for name, points in series.items():
            with open(dest / f"{name}.csv", "w", newline="") as f:
                f.write("timestamp,value\n")
                f.writelines(f"{iso(t)},{fmt(v)}\n" for t, v in points)
        segs = meta["segments"]
        end_of_recording = max(r[0] for r in rows)
        fault = meta.get("fault", {})
        windows: list[list[str]] = []
        if meta["class"] == "regression":  # every segment under another commit than the first one's
            for i, seg in enumerate(segs):
                if seg["commit"] != segs[0]["commit"]:
                    end = segs[i + 1]["process_start"] if i + 1 < len(segs) else end_of_recording
                    windows.append([iso(seg["process_start"]), iso(end), "regression"])
        elif meta["class"] != "clean":
            marks = fault.get("faults", [])
            for i, m in enumerate(marks):
                end = m.get("end") or (segs[-1].get("trainer_exit") if i == len(marks) - 1 else None)
                end = min(end or end_of_recording, end_of_recording)
                windows.append([iso(m["start"]), iso(end), CLASS_OF_FAULT[str(m["fault"])]])
        labels[meta["name"]] = {"class": meta["class"], "windows": windows}
        commits = [{"since": iso(s["process_start"]), "commit": s["commit"], "settings": s["settings"]} for s in segs]
        out_meta = {
            "class": meta["class"],
            "gpus": len(meta["gpus"]),
            "commits": commits,
            "fault": fault,
            "exit_codes": [s["exit_code"] for s in segs],
            "terminations": [s["termination"] for s in segs if s["termination"]],
        }
        (dest / "meta.json").write_text(json.dumps(out_meta, indent=1) + "\n")
        print(f"{meta['name']}: {len(series)} series, class {meta['class']}, windows {windows}")
    (into / "labels.json").write_text(json.dumps(labels, indent=1) + "\n")
    if (raw / "recording.json").exists():
        (into / "recording.json").write_text((raw / "recording.json").read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", choices=PLANS, help="record this plan")
    p.add_argument("--part", type=int, choices=(1, 2, 3), help="a third of the 1-GPU scenarios (one device call each)")
    p.add_argument("--only", help="record only these scenarios of the plan (comma-separated names)")
    p.add_argument("--archive", type=Path, help="keep a .tar.gz of --raw here, refreshed after every scenario")
    p.add_argument("--raw", type=Path, help="where raw recordings go (with --plan)")
    p.add_argument("--deadline-s", type=float, default=400.0, help="skip scenarios that would end after this")
    p.add_argument("--scale", type=float, help="time scale of the plan (default 1 for h200, 0.25 for the cpu dry run)")
    p.add_argument("--split", type=Path, help="raw recordings to turn into the corpus layout")
    p.add_argument("--into", type=Path, help="corpus directory (with --split)")
    args = p.parse_args()
    if args.plan:
        if args.raw is None:
            p.error("--plan needs --raw")
        record(args)
    if args.split:
        if args.into is None:
            p.error("--split needs --into")
        split(args.split, args.into)
    if not args.plan and not args.split:
        p.error("give --plan or --split")


if __name__ == "__main__":
    main()
