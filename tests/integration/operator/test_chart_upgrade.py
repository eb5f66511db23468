"""The chart on the real API server: `helm upgrade` serves a CRD's new field (the CRD is a template), `helm
uninstall` keeps the CRD, and every object of the chart (defaults and every option on, the Prometheus Operator's
monitors included) passes a strict server-side dry run, the `helm test` pod under Pod Security "restricted"."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import REPO, wait_for

pytestmark = pytest.mark.cluster

CHART = REPO / "charts" / "statictrain"
MONITORING_CRDS = Path(__file__).with_name("monitoring-crds.yaml")


def chart_with_group(tmp_path: Path, group: str) -> tuple[Path, Path]:
    """A copy of the chart whose CRD serves `group` instead of statictrain.io (a CRD of its own, so this test
    cannot disturb the session's); returns the chart and its CRD file."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    (crd_file,) = (chart / "files" / "crds").glob("*.yaml")
    crd = yaml.safe_load(crd_file.read_text())
    crd["metadata"]["name"] = f"{crd['spec']['names']['plural']}.{group}"
    crd["spec"]["group"] = group
    crd_file.write_text(yaml.safe_dump(crd, sort_keys=False))
    return chart, crd_file


def add_spec_field(crd_file: Path, name: str) -> None:
    crd = yaml.safe_load(crd_file.read_text())
    for version in crd["spec"]["versions"]:
        version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][name] = {"type": "string"}
    crd_file.write_text(yaml.safe_dump(crd, sort_keys=False))


def test_helm_upgrade_serves_a_new_crd_field_and_uninstall_keeps_the_crd(
    cluster: Any, namespace: str, tmp_path: Path
) -> None:
    group = f"up{uuid.uuid4().hex[:8]}.test.statictrain.io"
    chart, crd_file = chart_with_group(tmp_path, group)
    crd_name = f"statictrainingjobs.{group}"
    release = f"up-{namespace}"[:40]
    light = ["--set", "operator.replicas=0", "--set", "extender.enabled=false", "--set", "networkPolicy.enabled=false"]
    job = {"apiVersion": f"{group}/v1alpha1", "kind": "StaticTrainingJob", "metadata": {"name": "j"},
           "spec": {"image": "x", "entrypoint": "m:f", "newField": "kept"}}

    def new_field_served() -> bool:
        cluster.kubectl("apply", "-n", namespace, "--validate=false", "-f", "-", input=json.dumps(job))
        got = json.loads(cluster.kubectl("get", "-n", namespace, f"statictrainingjobs.{group}", "j", "-o",
                                         "json").stdout)
        return got["spec"].get("newField") == "kept"

    try:
        cluster.helm("install", release, str(chart), "-n", namespace, "--wait=false", *light)
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd_name}", "--timeout=60s")
        crd = json.loads(cluster.kubectl("get", "crd", crd_name, "-o", "json").stdout)
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == release  # Helm owns it
        assert not new_field_served()  # not in the schema yet: the API server prunes it

        add_spec_field(crd_file, "newField")
        cluster.helm("upgrade", release, str(chart), "-n", namespace, "--wait=false", *light)
        schema = json.loads(cluster.kubectl("get", "crd", crd_name, "-o", "json").stdout)["spec"]["versions"][0]
        assert "newField" in schema["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        wait_for(new_field_served, "the upgraded CRD to serve spec.newField")

        cluster.helm("uninstall", release, "-n", namespace)
        assert cluster.kubectl("get", "crd", crd_name, "--ignore-not-found", "-o", "name").stdout.strip()
        assert json.loads(cluster.kubectl("get", "-n", namespace, f"statictrainingjobs.{group}", "j", "-o",
                                          "json").stdout)["spec"]["newField"] == "kept"  # the jobs survive
    finally:
        cluster.helm("uninstall", release, "-n", namespace, check=False)
        cluster.kubectl("delete", "crd", crd_name, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def platform(cluster: Any) -> Iterator[None]:
    """What the all-options values expect of the cluster: the Prometheus Operator's ServiceMonitor and PodMonitor
    (the minimal stand-ins), Established, and the PriorityClass they name (the API server refuses a pod naming a
    class that does not exist)."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(MONITORING_CRDS))
    for name in ("servicemonitors.monitoring.coreos.com", "podmonitors.monitoring.coreos.com"):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "statictrain-critical"}, "value": 1000000}
    cluster.kubectl("apply", "-f", "-", input=json.dumps(priority))
    yield
    cluster.kubectl("delete", "priorityclass", "statictrain-critical", "--ignore-not-found", check=False)


@pytest.mark.parametrize("options", ["defaults", "all-options"])
def test_every_object_passes_a_strict_server_side_dry_run(
    options: str, cluster: Any, namespace: str, crd: str, platform: None
) -> None:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted",
                    "pod-security.kubernetes.io/warn=restricted")
    args = ["template", "st", str(CHART), "--namespace", namespace, "--kube-version", "1.34.4"]
    if options == "all-options":  # the values file's namespaces, made this test's
        args += ["-f", str(CHART / "ci" / "all-options-values.yaml"),
                 "--set", f"operator.watchNamespaces={{{namespace}}}",
                 "--set", f"cost.customPricesConfigMap={namespace}/prices"]
    rendered = cluster.helm(*args).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = {d["kind"] for d in docs}
    assert {"CustomResourceDefinition", "Deployment", "NetworkPolicy", "Pod"} <= kinds
    if options == "all-options":
        assert {"ServiceMonitor", "PodMonitor", "PodDisruptionBudget", "ValidatingAdmissionPolicy"} <= kinds
    proc = cluster.kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "--validate=strict",
                           "--field-manager=chart-dry-run", "-f", "-", input=rendered, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "would violate PodSecurity" not in proc.stderr, proc.stderr
    assert proc.stdout.count("(server dry run)") == len(docs)
