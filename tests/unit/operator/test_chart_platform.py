"""The chart as a platform team installs it, rendered by the real helm binary: CRDs that upgrade, Prometheus
Operator monitors with the tenancy boundary, the bundled kube-scheduler locked down, placement and disruption
options, a values schema that refuses typos, clear failures for bad values, one image-tag rule, overridable
security contexts, one Prometheus namespace, and a `helm test` pod."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml
from statictrain.dcgm import DcgmSettings
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.settings import from_env as operator_settings

from ..extender.test_chart_extender import CHART, HELM

pytestmark = pytest.mark.skipif(HELM is None, reason="helm is not built yet (make cluster-build)")

REPO = CHART.parents[1]
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


def helm_template(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HELM), "template", "st", str(CHART), "--namespace", "ops", "--kube-version", "1.34.4",
                           *args], capture_output=True, text=True, check=False)


def render(*sets: str, files: tuple[str, ...] = (), json_sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    args = [a for s in sets for a in ("--set", s)] + [a for f in files for a in ("-f", f)]
    args += [a for s in json_sets for a in ("--set-json", s)]
    out = helm_template(*args)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def fails(*sets: str) -> str:
    out = helm_template(*[a for s in sets for a in ("--set", s)])
    assert out.returncode != 0, f"rendered with {sets}"
    return out.stderr


def one(docs: list[dict[str, Any]], kind: str, name_end: str = "") -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_end)]
    return doc


def pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    specs = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"}
    specs |= {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Pod"}
    return specs


# ---- CRDs ------------------------------------------------------------------------------------------------------

def test_the_crd_is_a_template_kept_on_uninstall_and_equal_to_the_one_source() -> None:
    source = yaml.safe_load((REPO / "crds" / "statictrain.io_statictrainingjobs.yaml").read_text())
    crd = one(render(), "CustomResourceDefinition")
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert crd["spec"] == source["spec"] and crd["metadata"]["name"] == source["metadata"]["name"]
    assert not [d for d in render("crds.enabled=false") if d["kind"] == "CustomResourceDefinition"]
    assert not (CHART / "crds").exists()  # Helm's crds/ folder is installed once and never upgraded


def test_the_chart_s_crd_copy_is_byte_for_byte_the_repository_s() -> None:
    source = sorted(p.name for p in (REPO / "crds").glob("*.yaml"))
    assert sorted(p.name for p in (CHART / "files" / "crds").glob("*.yaml")) == source
    for name in source:
        assert (CHART / "files" / "crds" / name).read_bytes() == (REPO / "crds" / name).read_bytes(), \
            f"charts/statictrain/files/crds/{name} differs from crds/{name}: run `make chart-crds`"


# ---- Prometheus Operator monitors ------------------------------------------------------------------------------

def test_no_monitor_by_default() -> None:
    assert not [d for d in render() if d["apiVersion"].startswith("monitoring.coreos.com/")]


def test_the_service_monitor_alone_scrapes_the_operator_and_the_sidecars_with_the_tenancy_boundary() -> None:
    docs = render("serviceMonitor.enabled=true", "operator.watchNamespaces={a,b}")
    sm = one(docs, "ServiceMonitor")
    service = one(docs, "Service", "-metrics")
    assert sm["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"] == {"matchNames": ["ops"]}
    (endpoint,) = sm["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] and endpoint["honorLabels"] is True
    pm = one(docs, "PodMonitor")
    assert pm["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/managed-by": "statictrain",
                                                     "statictrain.io/role": "worker"}
    assert pm["spec"]["namespaceSelector"] == {"matchNames": ["a", "b"]}
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics" and endpoint["honorLabels"] is False
    targets = {r["targetLabel"]: r["sourceLabels"] for r in endpoint["relabelings"]}
    assert targets == {"pod_uid": ["__meta_kubernetes_pod_uid"], "namespace": ["__meta_kubernetes_namespace"],
                       "pod": ["__meta_kubernetes_pod_name"]}


def test_the_pod_monitor_follows_its_own_switch_and_the_worker_namespaces() -> None:
    docs = render("serviceMonitor.enabled=true", "podMonitor.enabled=false")
    assert [d["kind"] for d in docs if d["apiVersion"].startswith("monitoring")] == ["ServiceMonitor"]
    pm = one(render("podMonitor.enabled=true", "podMonitor.labels.release=kps"), "PodMonitor")
    assert pm["spec"]["namespaceSelector"] == {"any": True}  # cluster-wide operator: jobs run anywhere
    assert pm["metadata"]["labels"]["release"] == "kps"
    pm = one(render("podMonitor.enabled=true", "networkPolicy.workerNamespaces={x}"), "PodMonitor")
    assert pm["spec"]["namespaceSelector"] == {"matchNames": ["x"]}


def test_a_service_monitor_without_the_metrics_service_is_refused() -> None:
    assert "serviceMonitor.enabled needs operator.metrics.port" in fails("serviceMonitor.enabled=true",
                                                                         "operator.metrics.service.enabled=false")


# ---- the bundled kube-scheduler --------------------------------------------------------------------------------

def test_the_scheduler_has_no_profiling_and_a_network_policy() -> None:
    docs = render()
    config = yaml.safe_load(one(docs, "ConfigMap", "-scheduler")["data"]["config.yaml"])
    assert config["enableProfiling"] is False and config["enableContentionProfiling"] is False
    policy = one(docs, "NetworkPolicy", "-scheduler")
    deployment = one(docs, "Deployment", "-scheduler")
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    (rule,) = policy["spec"]["ingress"]
    port = deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
    assert rule["ports"] == [{"protocol": "TCP", "port": port}]
    assert rule["from"] == one(docs, "NetworkPolicy", "-operator")["spec"]["ingress"][0]["from"][:1]  # Prometheus


def test_every_deployment_takes_placement_priority_spread_and_a_disruption_budget() -> None:
    docs = render(files=(str(CHART / "ci" / "all-options-values.yaml"),))
    components = {"operator": "operator", "extender": "extender", "scheduler": "extender.scheduler"}
    values = yaml.safe_load((CHART / "ci" / "all-options-values.yaml").read_text())
    for component, path in components.items():
        v = values
        for key in path.split("."):
            v = v[key]
        deployment = one(docs, "Deployment", f"-{component}")
        spec = deployment["spec"]["template"]["spec"]
        assert spec["priorityClassName"] == v["priorityClassName"], component
        assert spec["nodeSelector"] == v["nodeSelector"] and spec["tolerations"] == v["tolerations"], component
        (spread,) = spec["topologySpreadConstraints"]
        assert spread["labelSelector"] == {"matchLabels": deployment["spec"]["selector"]["matchLabels"]}, component
        pdb = one(docs, "PodDisruptionBudget", f"-{component}")
        assert pdb["spec"]["selector"] == deployment["spec"]["selector"] and pdb["spec"]["maxUnavailable"] == 1
    assert not [d for d in render() if d["kind"] == "PodDisruptionBudget"]
    given = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"mine": "x"}}}
    spec = pod_specs(render(json_sets=(f"operator.topologySpreadConstraints=[{json.dumps(given)}]",)))
    assert spec["st-statictrain-operator"]["topologySpreadConstraints"] == [given]  # a given selector is kept


# ---- values: schema and failures -------------------------------------------------------------------------------

def schema_keys(schema: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> set[str]:
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    keys = set()
    for key, sub in schema.get("properties", {}).items():
        keys.add(prefix + key)
        keys |= schema_keys(sub, defs, f"{prefix}{key}.")
    return keys


def value_keys(values: dict[str, Any], prefix: str = "") -> set[str]:
    keys = set()
    for key, value in values.items():
        keys.add(prefix + key)
        if isinstance(value, dict) and value:
            keys |= value_keys(value, f"{prefix}{key}.")
    return keys


def test_the_schema_knows_every_value_and_nothing_else() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    known = schema_keys(schema, schema["definitions"])
    values = value_keys(yaml.safe_load((CHART / "values.yaml").read_text()))
    open_maps = ("labels.", "Selector.", "annotations.", "Annotations.", "resources.", "SecurityContext.",
                 "affinity.", "podSelector.")
    assert {k for k in values if not any(m in k for m in open_maps)} - known == set()
    assert known - values - {"global"} == set()


@pytest.mark.parametrize(("setting", "named"), [
    ("operator.replica=2", "replica"),  # a typo
    ("serviceMonitor.enable=true", "enable"),
    ("extender.scheduler.nodeselector.a=b", "nodeselector"),
    ("operator.replicas=two", "/operator/replicas"),  # a wrong type
    ("workers.sidecar.metricsPort=70000", "/workers/sidecar/metricsPort"),
    ("workers.imagePullPolicy=Sometimes", "/workers/imagePullPolicy"),
    ("prometheus.url=prometheus:9090", "/prometheus/url"),
    ("cost.defaultGpuHourlyUsd=four", "/cost/defaultGpuHourlyUsd"),
])
def test_a_bad_value_fails_naming_it(setting: str, named: str) -> None:
    err = fails(setting)
    assert "values don't meet the specifications of the schema" in err and named in err, err


@pytest.mark.parametrize("value", ["prices", "ops/", "/prices", "a/b/c"])
def test_custom_prices_without_a_namespace_fail_with_what_to_write(value: str) -> None:
    err = fails(f"cost.customPricesConfigMap={value}")
    assert f'cost.customPricesConfigMap must be namespace/name (e.g. statictrain-system/prices), got "{value}"' \
        in err, err
    assert "reflect" not in err


def test_a_scheduler_name_the_workers_do_not_use_is_refused() -> None:
    err = fails("extender.scheduler.schedulerName=other")
    assert "extender.scheduler.schedulerName (other) must equal workers.schedulerName (statictrain-scheduler)" in err
    config = yaml.safe_load(one(render("workers.schedulerName=gpu"), "ConfigMap", "-scheduler")["data"]["config.yaml"])
    assert [p["schedulerName"] for p in config["profiles"]] == ["gpu"]  # follows the workers by default


# ---- images, security contexts, Prometheus -----------------------------------------------------------------------

def env_of(docs: list[dict[str, Any]], deployment: str) -> dict[str, str]:
    container = pod_specs(docs)[deployment]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_every_statictrain_image_follows_the_app_version_unless_its_tag_is_set() -> None:
    docs = render()
    specs = pod_specs(docs)
    assert specs["st-statictrain-operator"]["containers"][0]["image"] == f"ghcr.io/statictrain/operator:{APP_VERSION}"
    assert specs["st-statictrain-extender"]["containers"][0]["image"] == f"ghcr.io/statictrain/extender:{APP_VERSION}"
    assert env_of(docs, "st-statictrain-operator")["STATICTRAIN_OPERATOR_SIDECAR_IMAGE"] == \
        f"ghcr.io/statictrain/sidecar:{APP_VERSION}"
    docs = render("workers.sidecar.image.repository=reg.local/sc", "workers.sidecar.image.tag=abc")
    assert env_of(docs, "st-statictrain-operator")["STATICTRAIN_OPERATOR_SIDECAR_IMAGE"] == "reg.local/sc:abc"
    scheduler = pod_specs(docs)["st-statictrain-scheduler"]["containers"][0]["image"]
    assert scheduler == "registry.k8s.io/kube-scheduler:v1.34.4"  # the Kubernetes version, set explicitly


def test_security_contexts_are_restricted_by_default_and_overridable() -> None:
    specs = pod_specs(render())
    assert set(specs) == {"st-statictrain-operator", "st-statictrain-extender", "st-statictrain-scheduler",
                          "st-statictrain-test"}
    for name, spec in specs.items():
        assert spec["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                                           "seccompProfile": {"type": "RuntimeDefault"}}, name
        for c in spec["containers"]:
            assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                                            "seccompProfile": {"type": "RuntimeDefault"}}, name
    openshift = pod_specs(render("podSecurityContext.runAsUser=null", "podSecurityContext.runAsGroup=null"))
    for name, spec in openshift.items():  # restricted-v2 assigns the UID and GID
        assert spec["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}, name


def test_prometheus_url_and_network_policy_name_the_same_namespace() -> None:
    docs = render()
    url = env_of(docs, "st-statictrain-operator")["STATICTRAIN_PROMETHEUS_URL"]
    assert url == "http://prometheus-operated.monitoring.svc:9090"
    assert env_of(docs, "st-statictrain-extender")["STATICTRAIN_PROMETHEUS_URL"] == url
    peer = one(docs, "NetworkPolicy", "-operator")["spec"]["ingress"][0]["from"][0]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    docs = render("prometheus.namespace=obs")
    assert env_of(docs, "st-statictrain-operator")["STATICTRAIN_PROMETHEUS_URL"] == \
        "http://prometheus-operated.obs.svc:9090"
    peer = one(docs, "NetworkPolicy", "-operator")["spec"]["ingress"][0]["from"][0]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}
    everywhere = render(json_sets=("networkPolicy.prometheus.namespaceSelector={}",))
    assert one(everywhere, "NetworkPolicy", "-operator")["spec"]["ingress"][0]["from"][0]["namespaceSelector"] == {}


# ---- helm test ---------------------------------------------------------------------------------------------------

def test_helm_test_probes_the_operator_and_extender_and_the_policies_admit_it() -> None:
    docs = render()
    pod = one(docs, "Pod", "-test")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    args = pod["spec"]["containers"][0]["command"][3:]
    assert args == ["", "http://st-statictrain-operator-metrics.ops.svc:9401/metrics",
                    "http://st-statictrain-extender.ops.svc:8888/healthz"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    test_labels = pod["metadata"]["labels"]
    for name in ("-operator", "-extender"):
        peers = one(docs, "NetworkPolicy", name)["spec"]["ingress"][0]["from"]
        assert any("namespaceSelector" not in p and p.get("podSelector", {}).get("matchLabels", {}).items()
                   <= test_labels.items() and p["podSelector"]["matchLabels"] for p in peers), name
    tls = one(render("extender.tls.secretName=ext"), "Pod", "-test")
    assert tls["spec"]["containers"][0]["command"][3] == "/etc/statictrain-extender-probe/ca.crt"
    assert tls["spec"]["volumes"] == [{"name": "extender-probe",
                                       "secret": {"secretName": "ext", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]


def test_the_all_options_values_render() -> None:
    docs = render(files=(str(CHART / "ci" / "all-options-values.yaml"),))
    kinds = {d["kind"] for d in docs}
    assert {"ServiceMonitor", "PodMonitor", "PodDisruptionBudget", "CustomResourceDefinition", "Pod"} <= kinds


# ---- dcgm-exporter ---------------------------------------------------------------------------------------------

def test_dcgm_values_reach_the_operator_s_settings_and_the_sidecar_names_are_opt_in() -> None:
    env = env_of(render(), "st-statictrain-operator")
    dcgm = CostSettings.from_env({k: v for k, v in env.items() if k.startswith("STATICTRAIN_DCGM_")}).dcgm
    assert dcgm == DcgmSettings()  # the chart's defaults are the code's: the sidecars' NVML sampling
    assert env["STATICTRAIN_OPERATOR_SIDECAR_DCGM"] == "false"
    env = env_of(render("dcgm.source=dcgm", "dcgm.labels.pod=exported_pod", "dcgm.utilizationUnit=ratio",
                        "dcgm.utilizationMetric=DCGM_FI_PROF_GR_ENGINE_ACTIVE", "workers.sidecar.dcgmNames=true",
                        "dcgm.scrapeJob=dcgm-exporter"),
                 "st-statictrain-operator")  # fmt: skip
    dcgm = CostSettings.from_env({k: v for k, v in env.items() if k.startswith("STATICTRAIN_DCGM_")}).dcgm
    assert (dcgm.source, dcgm.pod_label, dcgm.utilization_unit, dcgm.utilization_metric, dcgm.scrape_job) == (
        "dcgm", "exported_pod", "ratio", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "dcgm-exporter")
    assert operator_settings(env).sidecar_dcgm is True


@pytest.mark.parametrize(("setting", "named"), [
    ("dcgm.source=nvml", "/dcgm/source"),
    ("dcgm.utilizationUnit=%", "/dcgm/utilizationUnit"),
    ("dcgm.labels.pod=", "/dcgm/labels/pod"),
    ("dcgm.labels.podName=x", "podName"),
])
def test_a_bad_dcgm_value_fails_naming_it(setting: str, named: str) -> None:
    err = fails(setting)
    assert "values don't meet the specifications of the schema" in err and named in err, err
