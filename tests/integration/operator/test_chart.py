"""The Helm chart: lint, render, install into the real cluster (PSS restricted), least-privilege RBAC."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from .conftest import Kube, stj, wait_for

pytestmark = pytest.mark.cluster

CHART = pathlib.Path(__file__).resolve().parents[3] / "charts" / "statictrain"


def test_helm_lint_is_clean(cluster: Any) -> None:
    proc = cluster.helm("lint", "--strict", str(CHART))
    assert "0 chart(s) failed" in proc.stdout


def undocumented_values(text: str) -> list[str]:
    """Keys with no "# --" comment block above them and no documented parent key."""
    out: list[str] = []
    stack: list[tuple[int, bool]] = []  # (indent, documented) of the enclosing keys
    comment: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped)
            continue
        if not stripped or stripped.startswith("-") or ":" not in stripped:
            comment = []
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        documented = any(c.startswith("# --") for c in comment) or any(d for _, d in stack)
        is_section = stripped.endswith(":")
        if not documented and not is_section:
            out.append(stripped)
        stack.append((indent, documented))
        comment = []
    return out


def test_every_value_is_documented() -> None:
    assert undocumented_values((CHART / "values.yaml").read_text()) == []


def test_the_documentation_check_finds_a_bare_value() -> None:
    assert undocumented_values("a:\n  # -- documented\n  b: 1\n  c: 2\n") == ["c: 2"]


def _render(cluster: Any, *sets: str) -> list[dict[str, Any]]:
    args = [
        "template",
        "st",
        str(CHART),
        "--namespace",
        "statictrain-system",
        "--include-crds",
        "--kube-version",
        "1.34.0",
    ]
    for s in sets:
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(cluster.helm(*args).stdout) if d]


def test_rendered_objects(cluster: Any) -> None:
    docs = _render(cluster, "operator.watchNamespaces={a,b}", "workers.schedulerName=custom")
    ours = [d for d in docs if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "operator"]
    kinds = sorted(d["kind"] for d in ours)
    assert kinds == [
        *["ClusterRole"] * 2,  # cluster-scoped reads; node price patches
        *["ClusterRoleBinding"] * 2,
        "Deployment",
        "NetworkPolicy",
        *["Role"] * 4,  # one per watched namespace, the heartbeat, the cost-state ConfigMap
        *["RoleBinding"] * 4,
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",  # node patches: price annotations only
        "ValidatingAdmissionPolicyBinding",
    ]
    roles = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in ours if d["kind"] == "Role"}
    assert {ns for ns, _ in roles} == {"a", "b", "statictrain-system"}
    cluster_rules = [r for d in ours if d["kind"] == "ClusterRole" for r in d["rules"]]
    assert {res for r in cluster_rules for res in r["resources"]} == {"customresourcedefinitions", "nodes"}
    policies = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs if d["kind"] == "NetworkPolicy"}
    assert policies == {
        ("statictrain-system", "st-statictrain-operator"),
        ("statictrain-system", "st-statictrain-extender"),
        ("statictrain-system", "st-statictrain-scheduler"),
        ("statictrain-system", "st-statictrain-test"),
        ("a", "st-statictrain-workers"),
        ("b", "st-statictrain-workers"),
    }
    crds = [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert crds == ["statictrainingjobs.statictrain.io"]
    (dep,) = [d for d in ours if d["kind"] == "Deployment"]
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    assert dep["spec"]["replicas"] == 1
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["STATICTRAIN_OPERATOR_NAMESPACES"] == "a,b"
    assert env["STATICTRAIN_OPERATOR_SCHEDULER_NAME"] == "custom"
    assert env["STATICTRAIN_PROMETHEUS_URL"] == "http://prometheus-operated.monitoring.svc:9090"
    assert "--metrics-port=9401" in container["args"]
    assert {"name": "metrics", "containerPort": 9401, "protocol": "TCP"} in container["ports"]
    assert json.loads(env["STATICTRAIN_OPERATOR_TOLERATIONS"])[0]["key"] == "nvidia.com/gpu"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    sc = container["securityContext"]
    assert (sc["allowPrivilegeEscalation"], sc["runAsNonRoot"], sc["capabilities"]["drop"]) == (
        False,
        True,
        ["ALL"],
    )
    assert dep["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"


def test_rbac_grants_no_secrets_and_no_exec(cluster: Any) -> None:
    docs = _render(cluster)
    rules = [
        r
        for d in docs
        if d["kind"] in ("ClusterRole", "Role")
        and d["metadata"]["labels"].get("app.kubernetes.io/component") == "operator"
        for r in d["rules"]
    ]
    assert rules
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "secrets" not in rule["resources"]
        assert "pods/exec" not in rule["resources"]
    granted = {(res, verb) for rule in rules for res in rule["resources"] for verb in rule["verbs"]}
    # Anomaly: restart-from-checkpoint deletes worker pods. ConfigMaps: only the cost state (create, and
    # get/patch of that one name); reading custom prices only when configured.
    assert ("pods", "delete") in granted
    configmap_rules = [r for r in rules if "configmaps" in r["resources"]]
    assert {v for r in configmap_rules for v in r["verbs"]} == {"create", "get", "patch"}
    for rule in configmap_rules:
        assert rule["verbs"] == ["create"] or rule.get("resourceNames") == ["st-statictrain-operator-cost-state"]


def test_custom_prices_grant_reading_that_one_configmap(cluster: Any) -> None:
    docs = _render(cluster, "cost.customPricesConfigMap=ops/prices")
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-prices")]
    assert role["metadata"]["namespace"] == "ops"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["prices"], "verbs": ["get"]}
    ]


def test_install_creates_every_object_in_a_restricted_namespace(cluster: Any, namespace: str, crd: str) -> None:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    release = f"st-{namespace}"[:40]
    cluster.helm(
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--wait=false",
        "--set",
        f"operator.watchNamespaces={{{namespace}}}",
        "--set",
        "crds.enabled=false",  # the session's CRD (fixture crd) is not this release's
    )
    try:
        kube = Kube(cluster, namespace)
        full = f"{release}-statictrain-operator" if "statictrain" not in release else f"{release}-operator"
        assert kube.get("deployment", full) is not None
        assert kube.get("serviceaccount", full) is not None
        assert kube.get("role", f"{full}-heartbeat") is not None
        assert kube.get("rolebinding", f"{full}-heartbeat") is not None
        assert cluster.kubectl("get", "clusterrole", full, "--ignore-not-found").stdout
        assert cluster.kubectl("get", "clusterrolebinding", full, "--ignore-not-found").stdout
        # PSS restricted admits the operator pod (it is created; no node runs it on a kwok cluster).
        wait_for(
            lambda: kube.list("pods", "app.kubernetes.io/component=operator"),
            "the operator pod to be admitted",
        )
        sa = f"system:serviceaccount:{namespace}:{full}"
        can = cluster.kubectl("auth", "can-i", "--list", f"--as={sa}").stdout
        assert "secrets" not in can
        assert "pods/exec" not in can
        for verb, res in (("create", "jobs.batch"), ("patch", "statictrainingjobs.statictrain.io/status")):
            assert (
                cluster.kubectl("auth", "can-i", verb, res, f"--as={sa}", "-n", namespace, check=False).stdout.strip()
                == "yes"
            )
            # watchNamespaces: nothing namespaced outside the watched namespace
            assert (
                cluster.kubectl("auth", "can-i", verb, res, f"--as={sa}", "-n", "default", check=False).stdout.strip()
                == "no"
            )
        assert (
            cluster.kubectl("auth", "can-i", "get", "secrets", f"--as={sa}", "-A", check=False).stdout.strip() == "no"
        )
    finally:
        cluster.helm("uninstall", release, "--namespace", namespace, check=False)


def test_worker_pods_are_admitted_under_pss_restricted(
    namespace: str, kube: Kube, make_operator: Any, cluster: Any
) -> None:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    make_operator()
    kube.apply(stj("pss", replicas=1, resources={"gpusPerReplica": 1}))
    wait_for(lambda: kube.list("pods", "statictrain.io/job=pss"), "the worker pod to be admitted")


def test_node_patching_is_a_separate_optional_cluster_role(cluster: Any) -> None:
    def node_verbs(docs: list[dict[str, Any]]) -> dict[str, set[str]]:
        return {
            d["metadata"]["name"]: {v for r in d["rules"] if "nodes" in r["resources"] for v in r["verbs"]}
            for d in docs
            if d["kind"] == "ClusterRole" and "-operator" in d["metadata"]["name"]
        }

    assert node_verbs(_render(cluster)) == {
        "st-statictrain-operator": {"get", "list", "watch"},
        "st-statictrain-operator-node-prices": {"patch"},
    }
    off = _render(cluster, "operator.rbac.patchNodes=false")
    assert node_verbs(off) == {"st-statictrain-operator": {"get", "list", "watch"}}
    assert not [d for d in off if d["kind"].startswith("ValidatingAdmissionPolicy")]


def test_mutual_tls_gives_the_scheduler_a_client_certificate(cluster: Any) -> None:
    docs = _render(cluster, "extender.tls.secretName=ext-tls", "extender.tls.clientSecretName=sched-client")
    (ext,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-extender")]
    (container,) = ext["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["STATICTRAIN_EXTENDER_TLS_CLIENT_CA_FILE"] == "/etc/statictrain-extender-tls/ca.crt"
    # the kubelet shows no client certificate: /healthz answers it (and the probe reads the node-cache verdict)
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": "HTTPS"}
    (op,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-operator")]
    (probe,) = [v for v in op["spec"]["template"]["spec"]["volumes"] if v["name"] == "extender-probe"]
    shown = [s["secret"] for s in probe["projected"]["sources"]]
    assert shown == [{"name": "ext-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]}]  # not the scheduler's
    (config,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-scheduler")]
    sched = yaml.safe_load(next(iter(config["data"].values())))
    tls = sched["extenders"][0]["tlsConfig"]
    assert tls["certFile"] == "/etc/statictrain-extender-client/tls.crt" and tls["caFile"].endswith("ca.crt")
    args = ["template", "st", str(CHART), "--kube-version", "1.34.0", "--set", "extender.tls.clientSecretName=x"]
    failed = cluster.helm(*args, check=False)
    assert failed.returncode != 0 and "needs extender.tls.secretName" in failed.stderr
