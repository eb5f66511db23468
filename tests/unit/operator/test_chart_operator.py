"""The chart's operator: leader election on by default, several replicas without it refused; secrets only created,
and only with the profiling token on."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from ..extender.test_chart_extender import CHART, HELM

pytestmark = pytest.mark.skipif(HELM is None, reason="helm is not built yet (make cluster-build)")


def template(*sets: str) -> subprocess.CompletedProcess[str]:
    args = [str(HELM), "template", "st", str(CHART), "--namespace", "ops", "--kube-version", "1.34.4",
            "--show-only", "templates/operator/deployment.yaml"]
    for value in sets:
        args += ["--set", value]
    return subprocess.run(args, capture_output=True, text=True, check=False)


def test_leader_election_is_on_and_uses_the_release_namespace() -> None:
    out = template("operator.replicas=2", "operator.leaderLeaseSeconds=20")
    assert out.returncode == 0, out.stderr
    deployment = yaml.safe_load(out.stdout)
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert deployment["spec"]["replicas"] == 2
    assert env["STATICTRAIN_OPERATOR_LEADER_ELECTION"] == "true"
    assert env["STATICTRAIN_OPERATOR_LEADER_LEASE_S"] == "20"
    assert env["STATICTRAIN_OPERATOR_HEARTBEAT_NAMESPACE"] == "ops"  # where the Lease lives


def test_several_replicas_without_leader_election_are_refused() -> None:
    out = template("operator.replicas=2", "operator.leaderElection=false")
    assert out.returncode != 0 and "operator.replicas > 1 needs operator.leaderElection: true" in out.stderr
    assert template("operator.leaderElection=false").returncode == 0  # one replica needs none


def rules(*sets: str) -> list[dict[str, Any]]:
    args = [str(HELM), "template", "st", str(CHART), "--namespace", "ops", "--kube-version", "1.34.4",
            "--show-only", "templates/operator/rbac.yaml"]
    for value in sets:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return [rule for doc in yaml.safe_load_all(out.stdout) if doc for rule in doc.get("rules") or []]


def test_secrets_may_only_be_created_and_only_with_the_profiling_token_on() -> None:
    assert not [r for r in rules() if "secrets" in r["resources"]]
    for watch in ((), ("operator.watchNamespaces={a,b}",)):
        on = [r for r in rules("workers.sidecar.profilingToken=true", *watch) if "secrets" in r["resources"]]
        assert on and all(r["verbs"] == ["create"] and r["resources"] == ["secrets"] for r in on), on


def env_and_volumes(*sets: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out = template(*sets)
    assert out.returncode == 0, out.stderr
    pod = yaml.safe_load(out.stdout)["spec"]["template"]["spec"]
    return {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}, pod["volumes"]


def test_the_operator_probes_the_extender_service_when_the_extender_is_deployed() -> None:
    env, _ = env_and_volumes()
    assert env["STATICTRAIN_OPERATOR_EXTENDER_HEALTH_URL"] == "http://st-statictrain-extender.ops.svc:8888/healthz"
    assert "STATICTRAIN_OPERATOR_EXTENDER_TLS_DIR" not in env
    env, _ = env_and_volumes("extender.enabled=false")
    assert "STATICTRAIN_OPERATOR_EXTENDER_HEALTH_URL" not in env
    env, volumes = env_and_volumes("extender.tls.secretName=srv", "extender.tls.clientSecretName=cli")
    assert env["STATICTRAIN_OPERATOR_EXTENDER_HEALTH_URL"].startswith("https://st-statictrain-extender.ops.svc:8888/")
    assert env["STATICTRAIN_OPERATOR_EXTENDER_TLS_DIR"] == "/etc/statictrain-extender-probe"
    (probe,) = [v for v in volumes if v["name"] == "extender-probe"]
    items = {(s["secret"]["name"], i["key"]) for s in probe["projected"]["sources"] for i in s["secret"]["items"]}
    assert items == {("srv", "ca.crt")}  # never the extender's own key, nor the scheduler's client certificate
