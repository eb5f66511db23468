"""The README's demo as a test, with smaller numbers: a real local control plane,
the chart installed with Helm, the operator (with the chart's ServiceAccount),
jobs applied with kubectl in two namespaces at two commits, real CPU training in
local workers, metrics in Prometheus, cost in the job status, a cost report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from statictrain_localcluster import demo

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.slow]
Finished = tuple[demo.Demo, list[dict[str, Any]], dict[str, Any], list[str]]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Finished]:
    out = tmp_path_factory.mktemp("demo")
    args = demo.parse(["--name", f"st-e2e-{os.getpid()}", "--steps", "60", "--timeout", "900", "--poll", "10",
                       "--settle", "15", "--out", str(out)])
    d = demo.Demo(args)
    with demo.running(d):
        d.start_cluster()
        jobs = demo.demo_jobs(args.steps, d.images.get("trainer"))
        d.install_chart()
        d.start_operator()
        d.apply_jobs(jobs)
        items = d.watch(jobs, args.timeout)
        report = d.report()
        closing = d.finish(jobs)
        yield d, items, report, closing


GPU_JOBS = ["gpt2-a10g-ddp", "gpt2-h100", "gpt2-l4"]


def test_every_job_succeeds_one_in_real_containers(finished: Finished) -> None:
    d, items, _, _ = finished
    assert sorted(i["metadata"]["name"] for i in items) == sorted([*GPU_JOBS, demo.REAL_NODE_JOB])
    for item in items:
        assert item["status"]["phase"] == "Succeeded", json.dumps(item["status"], indent=1)
    pods = json.loads(d.cluster.kubectl("get", "pods", "-n", "team-nlp", "-l",
                                        f"statictrain.io/job={demo.REAL_NODE_JOB}", "-o", "json").stdout)["items"]
    assert pods and all(p["spec"]["nodeName"] == d.cluster.state.real_node for p in pods)
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)  # completed by the kubelet, not the harness


def test_gpu_jobs_cost_money(finished: Finished) -> None:
    _, items, _, _ = finished
    for item in items:
        if item["metadata"]["name"] in GPU_JOBS:
            assert Decimal(item["status"]["cost"]["usd"]) > 0, item["metadata"]["name"]


def test_report_lists_both_namespaces_and_commits(
        finished: Finished) -> None:
    _, _, report, _ = finished
    rows = [r for r in report["rows"] if r["job_name"] in GPU_JOBS]  # the CPU job uses no priced GPU
    assert {r["namespace"] for r in rows} == {"team-nlp", "team-vision"}
    assert {r["job_name"] for r in rows} == set(GPU_JOBS)
    assert all(Decimal(r["usd"]) > 0 for r in rows)
    assert all(int(r["tokens"]) > 0 and r["usd_per_1m_tokens"] for r in rows), rows
    by_commit = d_report(finished[0], "commit")
    assert {r["commit"] for r in by_commit["rows"]} == {"a1b2c3d", "e4f5a6b"}


def test_jobs_plus_idle_equal_node_cost(finished: Finished) -> None:
    _, _, report, _ = finished
    ratio = float(report["summary"]["jobs_plus_idle_over_node_cost"])
    assert 0.999 <= ratio <= 1.001, report["summary"]


def test_html_report_is_self_contained(finished: Finished) -> None:
    d, _, _, _ = finished
    html = (Path(d.out) / "cost-report.html").read_text()
    assert "<svg" in html and "team-nlp" in html
    assert "<script src=" not in html


def test_demo_ends_with_screenshot_dashboards_and_gate_verdict(finished: Finished) -> None:
    d, _, _, closing = finished
    text = "\n".join(closing)
    png = Path(d.out) / "cost-report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", text
    assert "no console errors" in text and "statictrain-dashboard-job" in text, text
    assert "--commit e4f5a6b --baseline a1b2c3d --max-regression 5%: PASS" in text or ": FAIL" in text, text


def d_report(d: demo.Demo, by: str) -> dict[str, Any]:
    env = {**os.environ, "KUBECONFIG": str(d.cluster.kubeconfig),
           "STATICTRAIN_PROMETHEUS_URL": d.cluster.prometheus_url}
    proc = subprocess.run([str(Path(sys.executable).parent / "statictrain"), "report", "--from",
                           d.started_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "--by", by, "--format", "json",
                           "--no-progress"], env=env, capture_output=True, text=True, check=True)
    out: dict[str, Any] = json.loads(proc.stdout)
    return out
