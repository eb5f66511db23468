"""Local workers: a demo and test facility for the GPU-shaped kwok nodes, NOT a kubelet.

Pods on kwok nodes run no processes (pods on the cluster's real node run in
real containers and are left alone here). For StaticTrainingJob worker pods (label
statictrain.io/role=worker) placed on kwok nodes, this runs the pod's trainer
and sidecar containers as local processes with the pod's identity: its env
(fieldRefs resolved from the pod), its volumes mapped to local folders, the
rendezvous rewritten to 127.0.0.1 and a free port per job, and the sidecar
registered as a Prometheus scrape target. When the trainer exits, the pod's
status is set to Succeeded or Failed with the exit code, so the Job controller
and the operator see a real outcome. Differences from a kubelet, on purpose:
one process per pod (torchrun nproc 1, CPU), no images, no resource limits.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statictrain import envvars, labels

from statictrain_localcluster import procs
from statictrain_localcluster.cluster import LocalCluster

TRAINER, SIDECAR = "trainer", "sidecar"
_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")
RENDEZVOUS_KEYS = ("PET_RDZV_ENDPOINT",)
MASTER_KEYS = (envvars.MASTER_ADDR, "PET_MASTER_ADDR")
PORT_KEYS = (envvars.MASTER_PORT, "PET_MASTER_PORT")


def field_value(pod: dict[str, Any], path: str) -> str:
    """The value of a downward-API fieldRef for this pod."""
    meta, spec = pod["metadata"], pod["spec"]
    simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.podIP": "127.0.0.1",
              "status.hostIP": "127.0.0.1"}
    if path in simple:
        return str(simple[path] or "")
    m = _FIELD.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    raise ValueError(f"unsupported fieldRef {path!r}")


@dataclass
class ProcessPlan:
    command: list[str]
    env: dict[str, str]


@dataclass
class Plan:
    trainer: ProcessPlan
    sidecar: ProcessPlan | None
    metrics_port: int
    scrape_labels: dict[str, str] = field(default_factory=dict)


def plan(pod: dict[str, Any], rendezvous_port: int, metrics_port: int, volume_root: Path,
         bin_dir: Path) -> Plan:
    """How to run this pod locally (pure: no processes started)."""
    meta, spec = pod["metadata"], pod["spec"]
    job = meta.get("labels", {}).get(labels.JOB, meta["name"])
    volumes = {v["name"]: v for v in spec.get("volumes", [])}

    def local_dir(volume: str) -> Path:
        v = volumes.get(volume, {})
        ns, pod_name = str(meta["namespace"]), str(meta["name"])
        # emptyDir: per pod; anything shared (PVC, hostPath): per job and volume.
        if "emptyDir" in v or not v:
            return volume_root / ns / pod_name / volume
        claim = str((v.get("persistentVolumeClaim") or {}).get("claimName", volume))
        return volume_root / ns / "shared" / claim

    def process(container: dict[str, Any]) -> ProcessPlan:
        mounts = {m["mountPath"]: local_dir(m["name"]) for m in container.get("volumeMounts", [])}
        env: dict[str, str] = {}
        for e in container.get("env", []):
            if "value" in e:
                env[e["name"]] = str(e["value"])
            elif "fieldRef" in e.get("valueFrom", {}):
                env[e["name"]] = field_value(pod, e["valueFrom"]["fieldRef"]["fieldPath"])
        for key, value in env.items():
            for mount_path, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
                if value == mount_path or value.startswith(mount_path.rstrip("/") + "/"):
                    env[key] = str(local) + value[len(mount_path.rstrip("/")):]
                    break
        for key in MASTER_KEYS:
            if key in env:
                env[key] = "127.0.0.1"
        for key in PORT_KEYS:
            if key in env:
                env[key] = str(rendezvous_port)
        for key in RENDEZVOUS_KEYS:
            if key in env:
                env[key] = f"127.0.0.1:{rendezvous_port}"
        if "PET_NPROC_PER_NODE" in env:
            env["PET_NPROC_PER_NODE"] = "1"  # one CPU process per pod
        env[envvars.METRICS_PORT] = str(metrics_port)
        command = [*container.get("command", []), *container.get("args", [])]
        if command and not os.path.isabs(command[0]) and (bin_dir / command[0]).exists():
            command[0] = str(bin_dir / command[0])
        return ProcessPlan(command, env)

    containers = {c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]}
    if TRAINER not in containers:
        raise ValueError(f"pod {meta['name']} has no {TRAINER!r} container")
    pod_labels = meta.get("labels", {})
    scrape = {"job_name": job, "namespace": meta["namespace"], "pod": meta["name"],
              "commit": pod_labels.get(labels.COMMIT, ""), "team": pod_labels.get(labels.TEAM, "")}
    return Plan(process(containers[TRAINER]), process(containers[SIDECAR]) if SIDECAR in containers else None,
                metrics_port, scrape)


def _spawn(process: ProcessPlan, base_env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start one container's process in its own session, output appended to ``log``."""
    with log.open("ab") as out:  # the child keeps its own descriptor
        return subprocess.Popen(process.command, env={**base_env, **process.env}, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


@dataclass
class Running:
    uid: str
    namespace: str
    name: str
    trainer: subprocess.Popen[bytes]
    sidecar: subprocess.Popen[bytes] | None
    scrape_job: str


class LocalWorkers:
    """Watches worker pods on kwok nodes and runs them locally until stopped."""

    def __init__(self, cluster: LocalCluster, root: Path, poll_s: float = 1.0, log: Any = None) -> None:
        self.cluster = cluster
        self.root = root
        self.poll_s = poll_s
        self.log = log or sys.stderr
        self.ports: dict[str, int] = {}  # job uid-ish key -> rendezvous port
        self.running: dict[str, Running] = {}
        self.done: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="local-workers", daemon=True)
        self.bin_dir = Path(sys.executable).parent
        self.real_node = cluster.state.real_node  # its pods run in containers, not here

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        for r in list(self.running.values()):
            self._kill(r)

    def _say(self, msg: str) -> None:
        print(f"[local-workers] {msg}", file=self.log, flush=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception as e:  # keep the facility alive across API hiccups
                self._say(f"error: {e}")
            self._stop.wait(self.poll_s)

    def _pods(self) -> list[dict[str, Any]]:
        out = self.cluster.kubectl("get", "pods", "-A", "-l", f"{labels.ROLE}=worker", "-o", "json", check=False)
        if out.returncode != 0:
            return []
        items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
        return items

    def _tick(self) -> None:
        pods = {p["metadata"]["uid"]: p for p in self._pods()}
        for uid, r in list(self.running.items()):
            pod = pods.get(uid)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                self._say(f"{r.namespace}/{r.name} deleted: stopping its processes")
                self._kill(r)
                continue
            code = r.trainer.poll()
            if code is not None:
                self._finish(r, code)
        for uid, pod in pods.items():
            if uid in self.running or uid in self.done or pod["metadata"].get("deletionTimestamp"):
                continue
            node = pod["spec"].get("nodeName")
            if pod.get("status", {}).get("phase") == "Running" and node and node != self.real_node:
                self._launch(pod)

    def _launch(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        job_key = f"{meta['namespace']}/{meta.get('labels', {}).get(labels.JOB, meta['name'])}"
        port = self.ports.setdefault(job_key, procs.free_port())
        p = plan(pod, port, procs.free_port(), self.root / "volumes", self.bin_dir)
        logs = self.root / "logs" / meta["namespace"]
        logs.mkdir(parents=True, exist_ok=True)
        for d in {Path(v) for v in p.trainer.env.values() if v.startswith(str(self.root))}:
            d.mkdir(parents=True, exist_ok=True)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "MASTER_", "STATICTRAIN_"))}
        sidecar = None
        if p.sidecar:
            sidecar = _spawn(p.sidecar, base, logs / f"{meta['name']}.sidecar.log")
        trainer = _spawn(p.trainer, base, logs / f"{meta['name']}.trainer.log")
        scrape_job = f"worker-{meta['namespace']}-{meta['name']}"
        self.cluster.add_scrape_target(scrape_job, f"127.0.0.1:{p.metrics_port}", p.scrape_labels)
        self.running[meta["uid"]] = Running(meta["uid"], meta["namespace"], meta["name"], trainer, sidecar, scrape_job)
        self._say(f"{meta['namespace']}/{meta['name']} on {pod['spec']['nodeName']}: trainer pid {trainer.pid}, "
                  f"metrics 127.0.0.1:{p.metrics_port}")

    def _finish(self, r: Running, code: int) -> None:
        time.sleep(2)  # let Prometheus take a last scrape of the sidecar
        phase = "Succeeded" if code == 0 else "Failed"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error", "finishedAt": now,
                      "startedAt": now}
        statuses = [{"name": n, "image": "local", "ready": False, "restartCount": 0, "started": False,
                     "state": {"terminated": terminated}} for n in (TRAINER, SIDECAR)]
        patch = {"status": {"phase": phase, "containerStatuses": statuses,
                            "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted",
                                            "lastTransitionTime": now}]}}
        self.cluster.kubectl("patch", "pod", "-n", r.namespace, r.name, "--subresource=status", "--type=merge",
                             "-p", json.dumps(patch), check=False)
        self._say(f"{r.namespace}/{r.name}: trainer exited {code} -> {phase}")
        self._kill(r)

    def _kill(self, r: Running) -> None:
        pids = [p.pid for p in (r.trainer, r.sidecar) if p is not None and p.poll() is None]
        # each process leads its own session: signal the whole group (torchrun's children too)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, 15)
        procs.terminate(pids, grace_s=10)
        for p in (r.trainer, r.sidecar):
            if p is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=5)
        self.cluster.remove_scrape_target(r.scrape_job)
        self.running.pop(r.uid, None)
        self.done.add(r.uid)
