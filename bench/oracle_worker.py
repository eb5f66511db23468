"""A small real process standing in for one worker pod's trainer and sidecar (cost oracle scenario).

It exports the sidecar's metric names (statictrain.metrics) for one pod UID over
HTTP, scraped by a real Prometheus, following a script given on the command
line, and writes what it actually did to a JSON log that the oracle reads:

* GPU utilization is 0.9 from launch, except during a stall (``--stall-after`` steps,
  for ``--stall-s`` seconds) when it is 0 and no step is made; like the sidecar, it counts the
  GPU-seconds below 5 % utilization (``statictrain_gpu_idle_seconds_total{below="0.05"}``, summed
  over its GPUs), here from the same clock readings it logs the stall with;
* from ``--start-at`` (Unix time) it compiles for ``--compile-s`` seconds (host-side,
  the GPU stays busy with warm-up), then reports the compile seconds and steps every
  ``--step-s`` seconds from global step ``--start-step``, each step adding
  ``--tokens-per-step`` tokens (its own rank's tokens) and one executed step;
* it stops stepping when the file ``--stop-file`` appears (or after ``--steps``),
  keeps serving its last values until ``--exit-file`` appears, then exits;
* between ``--gap-at`` and ``--gap-at + --gap-s`` its /metrics answers 503 (a scrape gap);
* each GPU draws ``--busy-watts`` while compiling and stepping, ``--idle-watts`` in a stall and nothing
  before ``--start-at`` or after it stopped, and exports NVML's energy counter as the sidecar does
  (``statictrain_gpu_energy_joules_total``, joules since the driver loaded: it starts at a large baseline,
  not at 0); the log holds every change of power and when the process was first scraped.

Counters start at 0 in every process, like a sidecar's. Only the standard library
and prometheus_client are used: no statictrain code, so the process is part of the
scenario, not of the product.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.lock = threading.Lock()
        self.util = 0.9
        self.step = args.start_step
        self.executed = 0
        self.tokens = 0
        self.compile_s = 0.0
        self.util_changes: list[tuple[float, float]] = []
        self.idle_done = 0.0
        """Seconds of finished stalls; a stall under way counts from its start (util_changes[-1])."""
        self.watts = 0.0
        self.watts_since = time.time()
        self.joules_done = 0.0
        """Energy per GPU up to ``watts_since``; the power since then is ``watts``."""
        self.power_changes: list[tuple[float, float]] = []
        self.first_scrape: float | None = None

    def set_power(self, watts: float, now: float) -> None:
        """Called with the lock held."""
        self.joules_done += self.watts * (now - self.watts_since)
        self.watts, self.watts_since = watts, now
        self.power_changes.append((now, watts))


class Collector:
    def __init__(self, state: State, labels: dict[str, str], gpus: int) -> None:
        self.state = state
        self.gpus = gpus
        self.names = sorted(labels)
        self.values = [labels[k] for k in self.names]

    def collect(self) -> Any:
        s = self.state
        with s.lock:
            util, step, executed, tokens, comp = s.util, s.step, s.executed, s.tokens, s.compile_s
            now = time.time()
            idle = s.idle_done + (now - s.util_changes[-1][0] if util == 0.0 else 0.0)
            joules = s.joules_done + s.watts * (now - s.watts_since)

        def gauge(name: str, value: float, extra: dict[str, str] | None = None) -> GaugeMetricFamily:
            extra = extra or {}
            g = GaugeMetricFamily(name, name, labels=[*self.names, *extra])
            g.add_metric([*self.values, *extra.values()], value)
            return g

        def counter(name: str, value: float, extra: dict[str, str] | None = None) -> CounterMetricFamily:
            extra = extra or {}
            c = CounterMetricFamily(name.removesuffix("_total"), name, labels=[*self.names, *extra])
            c.add_metric([*self.values, *extra.values()], value)
            return c

        for i in range(self.gpus):  # one series per GPU of the pod, as the sidecar exports them
            gpu = {"gpu": str(i), "gpu_uuid": f"GPU-{i}", "gpu_model": "NVIDIA H100 80GB HBM3"}
            yield gauge("statictrain_gpu_utilization_ratio", util, gpu)
            yield counter("statictrain_gpu_energy_joules_total", 5.0e9 + 1.0e8 * i + joules, gpu)
        yield gauge("statictrain_train_step", float(step))
        yield gauge("statictrain_train_compile_seconds", comp)
        yield counter("statictrain_train_steps_total", float(executed))
        yield counter("statictrain_train_tokens_total", float(tokens))
        yield counter("statictrain_gpu_idle_seconds_total", self.gpus * idle, {"below": "0.05"})


def serve(port: int, registry: CollectorRegistry, gap: tuple[float, float], state: State) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            now = time.time()
            if gap[0] <= now < gap[0] + gap[1]:
                self.send_response(503)
                self.end_headers()
                return
            with state.lock:
                state.first_scrape = state.first_scrape or now
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--gpus", type=int, default=1, help="GPUs of the pod (one utilization series each)")
    p.add_argument("--labels", required=True, help="JSON object of metric labels (pod_uid, job_name, ...)")
    p.add_argument("--start-at", type=float, required=True)
    p.add_argument("--compile-s", type=float, default=0.0)
    p.add_argument("--step-s", type=float, required=True)
    p.add_argument("--start-step", type=int, default=0)
    p.add_argument("--steps", type=int, default=10**9)
    p.add_argument("--tokens-per-step", type=int, required=True)
    p.add_argument("--stop-file", type=Path, required=True)
    p.add_argument("--exit-file", type=Path, required=True)
    p.add_argument("--stall-after", type=int, default=-1, help="steps before the stall (-1: none)")
    p.add_argument("--stall-s", type=float, default=0.0)
    p.add_argument("--gap-at", type=float, default=0.0)
    p.add_argument("--gap-s", type=float, default=0.0)
    p.add_argument("--log", type=Path, required=True)
    p.add_argument("--busy-watts", type=float, default=650.0, help="per GPU, compiling and stepping")
    p.add_argument("--idle-watts", type=float, default=90.0, help="per GPU, in a stall")
    args = p.parse_args()
    state = State(args)
    reg = CollectorRegistry()
    reg.register(Collector(state, json.loads(args.labels), args.gpus))
    server = serve(args.port, reg, (args.gap_at, args.gap_s), state)
    t0 = args.start_at
    while time.time() < t0:
        time.sleep(0.01)
    with state.lock:
        state.set_power(args.busy_watts, time.time())
    compile_end = t0 + args.compile_s
    while time.time() < compile_end and not args.stop_file.exists():
        time.sleep(0.01)
    with state.lock:
        state.compile_s = args.compile_s
    k = 0
    base = compile_end
    while k < args.steps and not args.stop_file.exists():
        if k == args.stall_after and args.stall_s > 0:
            stall_from = time.time()
            with state.lock:
                state.util = 0.0
                state.util_changes.append((stall_from, 0.0))
                state.set_power(args.idle_watts, stall_from)
            while time.time() < stall_from + args.stall_s and not args.stop_file.exists():
                time.sleep(0.005)
            with state.lock:
                stall_to = time.time()
                state.util = 0.9
                state.util_changes.append((stall_to, 0.9))
                state.set_power(args.busy_watts, stall_to)
                state.idle_done += stall_to - stall_from
            base = time.time() - k * args.step_s
        due = base + (k + 1) * args.step_s
        while time.time() < due:
            time.sleep(min(0.005, max(due - time.time(), 0)))
        if args.stop_file.exists():
            break
        with state.lock:
            state.step += 1
            state.executed += 1
            state.tokens += args.tokens_per_step
        k += 1
    stopped = time.time()
    with state.lock:
        state.set_power(0.0, stopped)
    args.log.write_text(
        json.dumps(
            {
                "start_at": t0,
                "stopped_at": stopped,
                "compile_s": args.compile_s,
                "executed": state.executed,
                "tokens": state.tokens,
                "start_step": args.start_step,
                "final_step": state.step,
                "util_changes": state.util_changes,
                "power_changes": state.power_changes,
                "first_scrape_at": state.first_scrape,
            }
        )
    )
    while not args.exit_file.exists():
        time.sleep(0.05)
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
