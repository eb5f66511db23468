"""The chart's lock-down on the real API server: RBAC against an allowlist, admission policies, NetworkPolicy selection.

One release is installed (watching one namespace) for the whole module. RBAC is read
back with ``kubectl auth can-i --list`` as the operator's ServiceAccount; the
admission policies are exercised by real requests made as that ServiceAccount or
by creating jobs; NetworkPolicy selectors are resolved by the API server itself
(``kubectl get -l``), not by our code. Whether a network plugin enforces the
policies is tested with real traffic in tests/integration/realnode/test_network_policy.py.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from statictrain import labels

from .conftest import CRD_FILE, REPO, Kube, stj, wait_for

pytestmark = pytest.mark.cluster

CHART_DIR = REPO / "charts" / "statictrain"

PROM_LABELS = {"app.kubernetes.io/name": "prometheus"}
WORKER_LABELS = {"app.kubernetes.io/managed-by": "statictrain", "statictrain.io/role": "worker"}
ALLOWED_TOLERATIONS = [{"key": "dedicated", "effect": "NoSchedule"}, {"key": "spot"}]

# What the operator's ServiceAccount may do, as `kubectl auth can-i --list` prints it
# (resource, verb); resource names are checked apart. Every Kubernetes account also
# has the self-review rights of system:basic-user.
SELF_REVIEWS = {
    ("selfsubjectreviews.authentication.k8s.io", "create"),
    ("selfsubjectaccessreviews.authorization.k8s.io", "create"),
    ("selfsubjectrulesreviews.authorization.k8s.io", "create"),
}
CLUSTER_SCOPED = {
    ("customresourcedefinitions.apiextensions.k8s.io", "list"),
    ("customresourcedefinitions.apiextensions.k8s.io", "watch"),
    ("nodes", "get"),
    ("nodes", "list"),
    ("nodes", "watch"),
    ("nodes", "patch"),  # the optional node-prices ClusterRole; the admission policy narrows it
}
WATCHED = {
    *((r, v) for r in ("events", "events.events.k8s.io") for v in ("create", "patch")),
    *(("statictrainingjobs.statictrain.io", v) for v in ("get", "list", "watch", "patch", "delete")),
    *(("statictrainingjobs.statictrain.io/status", v) for v in ("get", "patch")),  # no /scale: remediation patches spec
    *(("jobs.batch", v) for v in ("get", "list", "watch", "create", "patch", "delete")),
    ("localqueues.kueue.x-k8s.io", "list"),
    *(("workloads.kueue.x-k8s.io", v) for v in ("list", "patch")),
    *(("services", v) for v in ("get", "list", "watch", "create")),
    ("persistentvolumeclaims", "create"),
    *(("pods", v) for v in ("get", "list", "watch", "create", "delete")),
    *(("leases.coordination.k8s.io", v) for v in ("get", "list", "watch", "create", "patch")),  # + heartbeat
}
# The release's own namespace only: the cost-state ConfigMap (create; get and patch by name).
COST_STATE = {("configmaps", "create"), ("configmaps", "get"), ("configmaps", "patch")}


@dataclass
class Release:
    name: str
    namespace: str
    full: str
    sa: str


@pytest.fixture(scope="module")
def release(cluster: Any) -> Iterator[Release]:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", ns)
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
    name = f"sec-{ns}"
    sets = [
        f"operator.watchNamespaces={{{ns}}}",
        f"networkPolicy.prometheus.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name={ns}",
    ]
    args = ["install", name, str(CHART_DIR), "--namespace", ns, "--wait=false", "--set", "crds.enabled=false"]
    for s in sets:
        args += ["--set", s]
    args += ["--set-json", f"workers.allowedTolerations={json.dumps(ALLOWED_TOLERATIONS)}"]
    cluster.helm(*args)
    full = f"{name}-statictrain-operator"
    try:
        yield Release(name, ns, full, f"system:serviceaccount:{ns}:{full}")
    finally:
        cluster.helm("uninstall", name, "--namespace", ns, check=False)
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def can_i_list(cluster: Any, sa: str, namespace: str) -> tuple[set[tuple[str, str]], dict[str, str]]:
    """(resource, verb) pairs the API server says ``sa`` has in ``namespace``; resource names apart."""
    out = cluster.kubectl("auth", "can-i", "--list", f"--as={sa}", "-n", namespace).stdout
    pairs: set[tuple[str, str]] = set()
    names: dict[str, str] = {}
    for line in out.splitlines()[1:]:
        cols = [c for c in line.split("   ") if c.strip()]
        if not cols or cols[0].strip().startswith("[") or line.startswith(" "):
            continue  # non-resource URLs
        resource = cols[0].strip()
        verbs = line[line.rindex("[") + 1 : line.rindex("]")].split()
        rn = line[line.index("[") : line.rindex("[")].strip() if line.count("[") > 1 else ""
        for verb in verbs:
            pairs.add((resource, verb))
        if rn and rn != "[]":
            names[resource] = rn
    return pairs, names


def test_operator_rights_are_exactly_the_allowlist(cluster: Any, release: Release) -> None:
    other = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", other)
    try:
        def rights(ns: str) -> set[tuple[str, str]]:
            return can_i_list(cluster, release.sa, ns)[0]

        watched = wait_for(lambda: rights(release.namespace) if ("pods", "delete") in rights(release.namespace)
                           else None, "the RoleBindings to take effect")
        assert watched == SELF_REVIEWS | CLUSTER_SCOPED | WATCHED | COST_STATE
        assert f"[{release.full}-cost-state]" in can_i_list(cluster, release.sa, release.namespace)[1]["configmaps"]
        # A namespace the operator does not watch: no namespaced right at all.
        assert rights(other) == SELF_REVIEWS | CLUSTER_SCOPED
        for verb, what in (("get", "secrets"), ("create", "pods/exec"), ("create", "jobs.batch")):
            answer = cluster.kubectl("auth", "can-i", verb, what, f"--as={release.sa}", "-n", other, check=False)
            assert answer.stdout.strip() == "no", (verb, what)
        assert cluster.kubectl("auth", "can-i", "get", "secrets", f"--as={release.sa}", "-A",
                               check=False).stdout.strip() == "no"
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_node_patches_are_limited_to_the_price_annotations(cluster: Any, release: Release) -> None:
    node = cluster.nodes()[0]["metadata"]["name"]
    as_sa = f"--as={release.sa}"

    def refused(*args: str) -> str | None:
        proc = cluster.kubectl(*args, as_sa, check=False)
        return proc.stderr if proc.returncode != 0 else None

    # The policy is loaded asynchronously: wait until a forbidden change is refused by it. Each try
    # writes a new value (a try before the policy acts may succeed; repeating it would be a no-op).
    tries = itertools.count()
    last = ""

    def try_label() -> str | None:
        nonlocal last
        last = str(next(tries))
        return refused("label", "--overwrite", "node", node, f"statictrain-test/evil={last}")

    try:
        msg = wait_for(try_label, "the node policy to act")
        assert "only the statictrain.io price annotations" in msg
        node_labels = cluster.kubectl("get", "node", node, "-o", "json", check=True).stdout
        assert json.loads(node_labels)["metadata"].get("labels", {}).get("statictrain-test/evil") != last
    finally:
        cluster.kubectl("label", "node", node, "statictrain-test/evil-", check=False)
    assert "only the statictrain.io price annotations" in (refused("annotate", "node", node, "example.com/x=1") or "")
    assert refused("taint", "node", node, "statictrain-test=x:NoSchedule") is not None
    # What the price annotator writes is allowed, and removable.
    assert refused("annotate", "--overwrite", "node", node, f"{labels.PRICE_NOTES}=security-test") is None
    assert refused("annotate", "node", node, f"{labels.PRICE_NOTES}-") is None


def test_the_chart_lists_the_annotator_s_annotations() -> None:
    """The admission policy's list (a CEL literal in the chart) is the one in statictrain.labels."""
    text = (CHART_DIR / "templates" / "_helpers.tpl").read_text()
    literal = text.split('define "statictrain.nodePriceAnnotations" -}}')[1].split("{{- end }}")[0].strip()
    annotator = {labels.HOURLY_COST, labels.GPU_HOURLY_COST, labels.PRICE_CAPACITY_TYPE, labels.PRICE_SOURCE,
                 labels.PRICE_UPDATED, labels.PRICE_NOTES}
    assert set(json.loads(literal.replace("'", '"'))) == annotator


def test_jobs_may_ask_only_for_allowed_tolerations(cluster: Any, release: Release) -> None:
    kube = Kube(cluster, release.namespace)

    def job(name: str, tolerations: list[dict[str, str]]) -> dict[str, Any]:
        return stj(name, placement={"tolerations": tolerations})

    bad = job("tol-bad", [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}])
    out = wait_for(lambda: (p := kube.create(bad, check=False)).returncode != 0 and p.stderr, "the policy to act")
    assert "ask only for tolerations this cluster allows" in out and '"dedicated"' in out
    everything = job("tol-all", [{"operator": "Exists"}])  # an empty key tolerates every taint
    assert kube.create(everything, check=False).returncode != 0
    wrong_effect = job("tol-effect", [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}])
    assert kube.create(wrong_effect, check=False).returncode != 0
    assert kube.get("statictrainingjob", "tol-bad") is None  # nothing was created
    ok = job("tol-ok", [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
                         {"key": "spot", "operator": "Equal", "value": "true"}])
    kube.create(ok)
    kube.create(job("tol-none", []))
    assert kube.get("statictrainingjob", "tol-ok") is not None


def selected(cluster: Any, kind: str, namespace: str | None, selector: dict[str, Any]) -> set[str]:
    """Names the API server selects with a LabelSelector's matchLabels ({} selects all)."""
    sel = ",".join(f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items())
    args = ["get", kind, "-o", "jsonpath={.items[*].metadata.name}"]
    args += ["-n", namespace] if namespace else []
    args += ["-l", sel] if sel else []
    return set(cluster.kubectl(*args).stdout.split())


def test_each_network_policy_selects_exactly_the_intended_pods(cluster: Any, release: Release) -> None:
    ns = release.namespace
    kube = Kube(cluster, ns)
    for name, extra in [("prom", PROM_LABELS), ("worker", WORKER_LABELS), ("tenant", {"app": "x"}),
                        ("fake-worker", {"statictrain.io/role": "worker"})]:
        kube.create({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "labels": extra},
                     "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeSelector": {"none": "x"}}})
    wait_for(lambda: len(kube.list("pods", "app.kubernetes.io/component=operator")) == 1, "the operator pod")
    policies = {p["metadata"]["name"]: p["spec"] for p in kube.list("networkpolicies")}
    assert set(policies) == {release.full, f"{release.name}-statictrain-extender",
                             f"{release.name}-statictrain-scheduler", f"{release.name}-statictrain-test",
                             f"{release.name}-statictrain-workers"}
    pods = selected(cluster, "pods", ns, {})

    def targets(spec: dict[str, Any]) -> set[str]:
        return selected(cluster, "pods", ns, spec["podSelector"])

    op = policies[release.full]
    operator_pods = {p["metadata"]["name"] for p in kube.list("pods", "app.kubernetes.io/component=operator")}
    assert targets(op) == operator_pods
    assert op["policyTypes"] == ["Ingress"] and len(op["ingress"]) == 1
    peer, test_peer = op["ingress"][0]["from"]  # Prometheus; the `helm test` pod
    assert selected(cluster, "namespaces", None, peer["namespaceSelector"]) == {ns}
    assert selected(cluster, "pods", ns, peer["podSelector"]) == {"prom"}
    assert selected(cluster, "pods", ns, test_peer["podSelector"]) == set()  # no test pod runs now
    assert op["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 9401}]

    ext = policies[f"{release.name}-statictrain-extender"]
    extender_pods = {p["metadata"]["name"] for p in kube.list("pods", "app.kubernetes.io/component=extender")}
    scheduler_pods = {p["metadata"]["name"] for p in kube.list("pods", "app.kubernetes.io/component=scheduler")}
    assert targets(ext) == extender_pods and extender_pods
    scheduler_peer, operator_peer, _ = ext["ingress"][0]["from"]  # kube-scheduler; the operator's probe; helm test
    assert selected(cluster, "pods", ns, scheduler_peer["podSelector"]) == scheduler_pods and scheduler_pods
    assert selected(cluster, "pods", ns, operator_peer["podSelector"]) == operator_pods
    assert ext["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 8888}]

    wk = policies[f"{release.name}-statictrain-workers"]
    assert targets(wk) == {"worker"}  # not the pod that only claims the role label
    metrics_rule, peers_rule = wk["ingress"]
    (peer,) = metrics_rule["from"]
    assert selected(cluster, "pods", ns, peer["podSelector"]) == {"prom"}
    assert metrics_rule["ports"] == [{"protocol": "TCP", "port": 9400}]
    (peer,) = peers_rule["from"]
    assert selected(cluster, "pods", ns, peer["podSelector"]) == {"worker"}
    ranges = {(p["protocol"], p["port"], p["endPort"]) for p in peers_rule["ports"]}
    assert ranges == {(proto, 1, 9399) for proto in ("TCP", "UDP")} | {(proto, 9401, 65535) for proto in ("TCP", "UDP")}
    assert "tenant" in pods and all("tenant" not in targets(s) for s in policies.values())
