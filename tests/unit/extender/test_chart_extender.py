"""The chart's extender templates, rendered by the real helm binary (skipped where helm is not built yet)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from statictrain_localcluster.cluster import cache_root

CHART = Path(__file__).resolve().parents[3] / "charts" / "statictrain"
TEMPLATES = ("deployment.yaml", "rbac.yaml", "scheduler.yaml")


def helm_binary() -> str | None:
    found = shutil.which("helm")
    if found:
        return found
    cached = sorted(cache_root().glob("*/bin/helm"))
    return str(cached[-1]) if cached else None


HELM = helm_binary()
pytestmark = pytest.mark.skipif(HELM is None, reason="helm is not built yet (make cluster-build)")


def render(*sets: str, templates: tuple[str, ...] = TEMPLATES) -> list[dict[str, Any]]:
    args = [str(HELM), "template", "st", str(CHART), "--namespace", "ops", "--kube-version", "1.34.4"]
    for template in templates:
        args += ["--show-only", f"templates/extender/{template}"]
    for value in sets:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def scheduler_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (cm,) = by_kind(docs, "ConfigMap")
    parsed: dict[str, Any] = yaml.safe_load(cm["data"]["config.yaml"])
    return parsed


def test_defaults_render_extender_and_scheduler() -> None:
    docs = render()
    deployments = {d["metadata"]["name"]: d for d in by_kind(docs, "Deployment")}
    assert set(deployments) == {"st-statictrain-extender", "st-statictrain-scheduler"}
    cfg = scheduler_config(docs)
    (extender,) = cfg["extenders"]
    assert extender["urlPrefix"] == "http://st-statictrain-extender.ops.svc:8888/scheduler"
    assert extender["ignorable"] is True
    assert extender["nodeCacheCapable"] is True
    assert [p["schedulerName"] for p in cfg["profiles"]] == ["statictrain-scheduler"]
    for deployment in deployments.values():
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_extender_rbac_reads_nodes_and_pods_and_only_creates_events() -> None:
    (role,) = [r for r in by_kind(render(), "ClusterRole") if r["metadata"]["name"].endswith("extender")]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]


def test_tls_switches_to_https_with_ca() -> None:
    docs = render("extender.tls.secretName=ext-tls", "extender.scheduler.ignorable=false")
    (extender,) = scheduler_config(docs)["extenders"]
    assert extender["urlPrefix"].startswith("https://")
    assert extender["tlsConfig"]["caFile"] == "/etc/statictrain-extender-tls/ca.crt"
    assert extender["ignorable"] is False


def test_scheduler_can_be_left_to_the_cluster() -> None:
    args = [str(HELM), "template", "st", str(CHART), "--kube-version", "1.34.4"]
    args += ["--show-only", "templates/extender/scheduler.yaml"]
    out = subprocess.run(
        [*args, "--set", "extender.scheduler.enabled=false"], capture_output=True, text=True, check=False
    )
    assert out.returncode != 0 and "could not find template" in out.stderr  # renders to nothing
    docs = render("extender.scheduler.enabled=false", templates=("deployment.yaml",))
    assert {d["metadata"]["name"] for d in by_kind(docs, "Deployment")} == {"st-statictrain-extender"}
