"""make lint's chart checkers: kubeconform's schemas made from the Kubernetes OpenAPI document, and checkov's
findings triaged where a reader finds them."""

from __future__ import annotations

from pathlib import Path

from statictrain_localcluster import chartlint

# A slice of the Kubernetes OpenAPI (swagger 2.0) document, in its shape.
INT_OR_STRING = "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"
SWAGGER = {"definitions": {
    "io.k8s.api.apps.v1.Deployment": {
        "type": "object", "x-kubernetes-group-version-kind": [{"group": "apps", "kind": "Deployment", "version": "v1"}],
        "properties": {"spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"}}},
    "io.k8s.api.apps.v1.DeploymentSpec": {
        "type": "object", "properties": {"replicas": {"type": "integer", "format": "int32"},
                                         "port": {"$ref": INT_OR_STRING},
                                         "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
    "io.k8s.api.core.v1.Service": {
        "type": "object", "x-kubernetes-group-version-kind": [{"group": "", "kind": "Service", "version": "v1"}],
        "properties": {"kind": {"type": "string"}}},
    "io.k8s.api.rbac.v1.ClusterRole": {
        "type": "object", "properties": {},
        "x-kubernetes-group-version-kind": [{"group": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                             "version": "v1"}]},
    "io.k8s.api.core.v1.Unrelated": {"type": "object", "properties": {"x": {"type": "string"}}},
}}


def test_schemas_are_named_as_kubeconform_looks_them_up() -> None:
    assert set(chartlint.kind_schemas(SWAGGER)) == {"deployment-apps-v1.json", "service-v1.json",
                                                    "clusterrole-rbac-v1.json"}


def test_each_schema_is_standalone_and_closed() -> None:
    deployment = chartlint.kind_schemas(SWAGGER)["deployment-apps-v1.json"]
    assert set(deployment["definitions"]) == {"io.k8s.api.apps.v1.Deployment", "io.k8s.api.apps.v1.DeploymentSpec",
                                              "io.k8s.apimachinery.pkg.util.intstr.IntOrString"}
    spec = deployment["definitions"]["io.k8s.api.apps.v1.DeploymentSpec"]
    assert deployment["additionalProperties"] is False and spec["additionalProperties"] is False  # strict
    assert spec["properties"]["labels"]["additionalProperties"] == {"type": "string"}  # maps stay maps
    assert "format" not in spec["properties"]["replicas"]
    assert deployment["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] == {
        "oneOf": [{"type": "string"}, {"type": "integer"}]}


def test_crd_schemas_close_objects_unless_they_preserve_unknown_fields() -> None:
    crd = {"spec": {"group": "monitoring.coreos.com", "names": {"kind": "PodMonitor"}, "versions": [{
        "name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"x-kubernetes-int-or-string": True}}},
            "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {}}}}}}]}}
    (name, schema), = chartlint.crd_schemas([crd]).items()
    assert name == "podmonitor-monitoring-v1.json"
    assert schema["properties"]["spec"]["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["open"]
    assert schema["properties"]["spec"]["properties"]["a"] == {"oneOf": [{"type": "string"}, {"type": "integer"}]}


def test_every_triaged_checkov_finding_is_explained_in_the_readme() -> None:
    readme = (Path(chartlint.REPO_FILES) / "README.md").read_text()
    for check in chartlint.CHECKOV_TRIAGE:
        assert f"| {check} |" in readme, check
