"""Debian's Prometheus for the local cluster, with file-based service discovery.

Tests and the demo add scrape targets by writing one JSON file per target job
into ``<state>/prometheus/targets/``; Prometheus re-reads the folder every
second and scrapes every second.

Two pools, as a cluster's Prometheus should scrape them:

* ``targets/pods/``: pods (podtargets.py writes the real node's; tests standing
  in for a pod write there too). ``honor_labels: false``: the target's
  ``namespace``, ``pod`` and ``pod_uid`` (the API server's view of the pod, as
  Kubernetes discovery's ``__meta_kubernetes_*`` would give them) replace what
  the exporter claims (kept as ``exported_*``), so no pod can publish series
  under another pod's identity (statictrain_operator.workerpods relies on it).
* ``targets/``: exporters trusted to name others, ``honor_labels: true``: the
  operator, whose job metrics carry each job's namespace, and tests' stand-ins.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

INSTALL_HINT = "install it with 'apt-get install -y prometheus' (Debian/Ubuntu) or put a prometheus binary on PATH"


def find_binary() -> Path:
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if not found:
        raise FileNotFoundError(f"Prometheus not found: {INSTALL_HINT}")
    return Path(found)


POD_TARGETS = "pods"
"""Sub-folder of the targets folder whose targets are pods (labels from discovery win)."""


def config(targets_dir: Path, scrape_interval: str = "1s") -> dict[str, object]:
    """The Prometheus configuration (pure)."""
    return {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": "5s"},
        "scrape_configs": [
            {
                "job_name": "statictrain",
                "honor_labels": True,
                "file_sd_configs": [{"files": [str(targets_dir / "*.json")], "refresh_interval": "1s"}],
            },
            {
                "job_name": "statictrain-pods",
                "honor_labels": False,
                "file_sd_configs": [
                    {"files": [str(targets_dir / POD_TARGETS / "*.json")], "refresh_interval": "1s"}
                ],
            },
        ],
    }


def target_file(targets_dir: Path, job: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job)
    return targets_dir / f"{safe}.json"


def write_target(targets_dir: Path, job: str, address: str, target_labels: dict[str, str]) -> None:
    """Add (or replace) one scrape target; atomic so Prometheus never reads half a file."""
    targets_dir.mkdir(parents=True, exist_ok=True)
    path = target_file(targets_dir, job)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([{"targets": [address], "labels": {"job": job, **target_labels}}]))
    tmp.replace(path)


def start(binary: Path, root: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    targets = root / "targets"
    (targets / POD_TARGETS).mkdir(parents=True, exist_ok=True)
    (root / "prometheus.yml").write_text(yaml.safe_dump(config(targets)))
    with log.open("ab") as out:
        return subprocess.Popen(
            [
                str(binary),
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
                "--web.enable-admin-api",
                "--storage.tsdb.retention.time=2d",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Prometheus exited with code {proc.returncode} at start (see its log)")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    raise TimeoutError(f"Prometheus at {url} not ready after {timeout_s:.0f}s")
