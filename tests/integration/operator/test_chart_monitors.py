"""The chart's Prometheus Operator monitors, run by a real Prometheus: each endpoint's honorLabels and
relabelings translated to the scrape configuration the Prometheus Operator writes from them (our rules only:
its own keep/port rules are left out), targets carrying the __meta_kubernetes_* labels Kubernetes discovery
gives a pod, and exporters that claim other identities. The sidecars' series must carry the pod's own UID,
namespace and name whatever the sidecar claims; the operator's job series keep the namespace they name."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from statictrain_localcluster import prometheus
from statictrain_localcluster.cluster import build_binaries

from .conftest import REPO, free_port, wait_for

CHART = REPO / "charts" / "statictrain"


def monitors() -> dict[str, dict[str, Any]]:
    out = subprocess.run([str(build_binaries() / "helm"), "template", "st", str(CHART), "--namespace", "ops",
                          "--kube-version", "1.34.4", "--set", "serviceMonitor.enabled=true"],
                         capture_output=True, text=True, check=True).stdout
    return {d["kind"]: d for d in yaml.safe_load_all(out) if d and d["kind"] in ("ServiceMonitor", "PodMonitor")}


def scrape_config(job: str, endpoint: dict[str, Any], targets: Path) -> dict[str, Any]:
    """What the Prometheus Operator writes for one endpoint (honorLabels, path, relabelings), with the
    targets from a file instead of Kubernetes discovery."""
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label", "regex": "regex",
            "replacement": "replacement", "separator": "separator", "modulus": "modulus"}
    relabel = [{keys[k]: v for k, v in r.items() if k in keys} | {"action": r.get("action", "replace").lower()}
               for r in endpoint.get("relabelings", [])]
    return {"job_name": job, "honor_labels": endpoint.get("honorLabels", False),
            "metrics_path": endpoint.get("path", "/metrics"), "scrape_interval": "1s",
            "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}], "relabel_configs": relabel}


@contextmanager
def exporter(body: str) -> Iterator[int]:
    """An HTTP server answering every GET with the metrics `body`; yields its port."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def scraped(tmp_path: Path) -> Iterator[dict[str, dict[str, str]]]:
    """A real Prometheus scraping, with the chart's monitors: a sidecar that claims another pod's identity, and
    the operator's /metrics with a job series of another namespace. Yields each series' labels by job."""
    found = monitors()
    with exporter('statictrain_test_sidecar{pod_uid="victim-uid",namespace="victim-ns",pod="victim"} 1\n') as sidecar, \
            exporter('statictrain_test_job_cost{namespace="team-a",job_name="j"} 2\n') as operator:
        yield from run_prometheus(found, (sidecar, operator), tmp_path)


def run_prometheus(found: dict[str, dict[str, Any]], ports: tuple[int, int],
                   tmp_path: Path) -> Iterator[dict[str, dict[str, str]]]:
    pod_targets, op_targets = tmp_path / "pods.json", tmp_path / "operator.json"
    # Kubernetes discovery's view of the pod (the PodMonitor's source labels); for the operator's Service the
    # namespace the Prometheus Operator's own relabeling sets.
    pod_targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{ports[0]}"], "labels": {
        "__meta_kubernetes_pod_uid": "0c7e-real", "__meta_kubernetes_namespace": "team-b",
        "__meta_kubernetes_pod_name": "job-worker-0"}}]))
    op_targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{ports[1]}"], "labels": {"namespace": "ops"}}]))
    config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [
        scrape_config("pods", found["PodMonitor"]["spec"]["podMetricsEndpoints"][0], pod_targets),
        scrape_config("operator", found["ServiceMonitor"]["spec"]["endpoints"][0], op_targets)]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    with (tmp_path / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen([str(prometheus.find_binary()), f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        prometheus.wait_ready(url, proc)

        def series() -> dict[str, dict[str, str]] | None:
            q = urllib.parse.urlencode({"query": '{__name__=~"statictrain_test_.*"}'})
            with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as r:
                result = json.load(r)["data"]["result"]
            by_job = {s["metric"]["job"]: s["metric"] for s in result}
            return by_job if len(by_job) == 2 else None

        yield wait_for(series, "Prometheus to scrape both targets")
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_sidecar_speaks_only_for_its_own_pod(scraped: dict[str, dict[str, str]]) -> None:
    labels = scraped["pods"]
    assert (labels["pod_uid"], labels["namespace"], labels["pod"]) == ("0c7e-real", "team-b", "job-worker-0")
    assert (labels["exported_pod_uid"], labels["exported_namespace"], labels["exported_pod"]) == (
        "victim-uid", "victim-ns", "victim")  # what it claimed, kept apart


def test_the_operator_s_job_series_keep_the_job_s_namespace(scraped: dict[str, dict[str, str]]) -> None:
    labels = scraped["operator"]
    assert labels["namespace"] == "team-a" and labels["job_name"] == "j"
    assert "exported_namespace" not in labels
