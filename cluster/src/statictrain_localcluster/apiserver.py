"""Stop the local cluster's real kube-apiserver and start it again (RELIABILITY case 4).

kwokctl runs each component as a process of its own (``--runtime binary``) and keeps its
pid in ``<workdir>/clusters/<name>/pids/``. ``stopped`` ends the API server with SIGTERM,
and when the block ends starts it again with the same command line, working directory,
environment and log file, records the new pid where kwokctl looks for it, and waits
until ``/readyz`` answers. etcd, the controller-manager, the scheduler and the real node
keep running: only the API server is away.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .cluster import ClusterError, LocalCluster

__all__ = ["Process", "pid_file", "stopped"]


@dataclass(frozen=True)
class Process:
    """What it takes to start a process again as it was."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    log: str


def _read(pid: int) -> Process:
    proc = Path(f"/proc/{pid}")
    argv = [a.decode() for a in proc.joinpath("cmdline").read_bytes().split(b"\0") if a]
    env = dict(
        item.decode().split("=", 1) for item in proc.joinpath("environ").read_bytes().split(b"\0") if b"=" in item
    )
    return Process(argv, os.readlink(proc / "cwd"), env, os.readlink(proc / "fd" / "1"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")


def pid_file(cluster: LocalCluster) -> Path:
    return cluster.root / "kwok" / "clusters" / cluster.name / "pids" / "kube-apiserver.pid"


@contextlib.contextmanager
def stopped(cluster: LocalCluster, ready_timeout_s: float = 180) -> Iterator[Process]:
    """The API server is stopped (SIGTERM, then SIGKILL after 30 s) while the block runs."""
    pids = pid_file(cluster)
    try:
        pid = int(pids.read_text().strip())
        was = _read(pid)
    except (OSError, ValueError) as e:
        raise ClusterError(f"cannot find the running kube-apiserver of {cluster.name!r} ({e})") from None
    if not was.argv or not was.argv[0].endswith("kube-apiserver"):
        raise ClusterError(f"{pids} names pid {pid}, which is not a kube-apiserver: {was.argv[:1]}")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while _alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.2)
    try:
        yield was
    finally:
        # Started by a shell that exits at once: like kwokctl's, the process is nobody's child here.
        script = 'log=$1; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!'
        out = subprocess.run(["sh", "-c", script, "sh", was.log, *was.argv], cwd=was.cwd, env=was.env,
                             capture_output=True, text=True, start_new_session=True, timeout=30, check=True)
        new = int(out.stdout.strip())
        pids.write_text(str(new))
        deadline = time.monotonic() + ready_timeout_s
        while not cluster.running():
            if not _alive(new):
                raise ClusterError(f"kube-apiserver exited on restart; see {was.log}")
            if time.monotonic() > deadline:
                raise ClusterError(f"kube-apiserver not ready {ready_timeout_s:g} s after its restart; see {was.log}")
            time.sleep(0.5)
