"""Step times of the replay's running tasks, exported the way trainers and the sidecar export them.

Replay pods are pause containers. For an arm that learns, each running batch task is a
training job stepping at the speed the scenario's truth gives on the GPU it landed on; this
module serves what Prometheus scrapes from such a job: ``statictrain_train_step_seconds``
(``_sum``, ``_count``, ``+Inf`` bucket) with the job's labels, and
``statictrain_gpu_utilization_ratio`` with ``pod_uid`` and ``gpu_model`` (what the sidecar
adds), so the extender's own query (stepstats.py) joins them, through a real Prometheus.
Nothing here talks to the extender.
"""

from __future__ import annotations

import http.server
import math
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from statictrain import metrics

from .workload import Task

__all__ = ["STEP_REFERENCE_S", "Running", "StepExporter", "render"]

STEP_REFERENCE_S = 10.0
"""Trace seconds per training step on the reference GPU (A100), every class."""
JOB_SPREAD = 0.1
"""Jobs of a class differ: each job's step time is off by a lognormal factor of this sd."""


@dataclass(frozen=True, slots=True)
class Running:
    """One task stepping now."""

    namespace: str
    job: str
    pod_uid: str
    gpu_model: str
    step_wall_s: float
    t0: float


def _labels(**values: str) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in values.items()) + "}"


def render(running: Iterable[Running], now: float) -> str:
    """Prometheus text exposition of the running tasks' step counters at ``now``."""
    step, gpu = metrics.TRAIN_STEP_SECONDS, metrics.GPU_UTILIZATION_RATIO
    lines = [f"# TYPE {step} histogram", f"# TYPE {gpu} gauge"]
    for r in running:
        count = max(math.floor((now - r.t0) / r.step_wall_s), 0)
        job = _labels(namespace=r.namespace, job_name=r.job, pod_uid=r.pod_uid)
        bucket = _labels(namespace=r.namespace, job_name=r.job, pod_uid=r.pod_uid, le="+Inf")
        lines += [
            f"{step}_bucket{bucket} {count}",
            f"{step}_sum{job} {count * r.step_wall_s!r}",
            f"{step}_count{job} {count}",
            f"{gpu}{_labels(namespace=r.namespace, pod_uid=r.pod_uid, gpu_model=r.gpu_model)} 1",
        ]
    return "\n".join(lines) + "\n"


def job_factor(name: str) -> float:
    """This job's own step-time factor (fixed by its name)."""
    return math.exp(random.Random(zlib.crc32(name.encode())).gauss(0.0, JOB_SPREAD))


class StepExporter:
    """A /metrics endpoint with one training job per running batch task (a RunReporter)."""

    def __init__(
        self, gpu_model_of: Mapping[str, str], speedup: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._gpu_model_of, self._speedup, self._clock = gpu_model_of, speedup, clock
        self._running: dict[tuple[str, str], Running] = {}
        self._lock = threading.Lock()
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def text(self) -> str:
        with self._lock:
            running = list(self._running.values())
        return render(running, self._clock())

    def started(self, namespace: str, name: str, node: str, task: Task, speed: float) -> None:
        if task.service or node not in self._gpu_model_of:
            return  # services do not train; a pod on a node without a GPU reports no GPU model
        step = STEP_REFERENCE_S / speed / self._speedup * job_factor(name)
        run = Running(namespace, name, f"{namespace}/{name}", self._gpu_model_of[node], step, self._clock())
        with self._lock:
            self._running[(namespace, name)] = run

    def stopped(self, namespace: str, name: str) -> None:
        with self._lock:
            self._running.pop((namespace, name), None)

    def clear(self) -> None:
        with self._lock:
            self._running.clear()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
