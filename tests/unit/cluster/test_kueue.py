"""Kueue's install for the local cluster (pure parts): webhooks kept and pointed at 127.0.0.1,
conversion webhooks on the CRDs cert-controller patches, the manager's configuration."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from statictrain_localcluster import kueue

MANIFEST = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- {name: mjob.kb.io, clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}}}
- {name: mpod.kb.io, clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}}
- name: mclusterqueue.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-kueue-x-k8s-io-v1beta2-clusterqueue}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: vdeployment.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-apps-v1-deployment}}
"""


def test_only_served_webhooks_are_kept_and_point_at_the_local_manager() -> None:
    mutating, validating = kueue.webhook_configurations(MANIFEST, 9555)
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "kueue-validating-webhook-configuration"
    assert validating["webhooks"] == []
    urls = [h["clientConfig"] for h in mutating["webhooks"]]
    assert urls == [{"url": "https://127.0.0.1:9555/mutate-batch-v1-job"},
                    {"url": "https://127.0.0.1:9555/mutate-kueue-x-k8s-io-v1beta2-clusterqueue"}]
    job_hook, cq_hook = mutating["webhooks"]
    assert job_hook["objectSelector"] == {"matchExpressions": [{"key": kueue.QUEUE_LABEL, "operator": "Exists"}]}
    assert "objectSelector" not in cq_hook


def test_converted_crds_get_a_local_conversion_webhook(tmp_path: Path) -> None:
    for plural in ("workloads", "resourceflavors"):
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"{plural}.kueue.x-k8s.io"}, "spec": {"names": {"plural": plural}}}
        (tmp_path / f"{plural}.yaml").write_text(yaml.safe_dump(crd))
    by_name = {c["spec"]["names"]["plural"]: c for c in kueue.crds(tmp_path, 9555)}
    assert by_name["workloads"]["spec"]["conversion"]["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:9555/convert"}
    assert "conversion" not in by_name["resourceflavors"]["spec"]


def test_manager_config_keeps_the_manager_local(tmp_path: Path) -> None:
    cfg = kueue.manager_config(tmp_path, 9555, 9556)
    assert cfg["webhook"] == {"host": "127.0.0.1", "port": 9555, "certDir": str(tmp_path)}
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:9556"
    assert cfg["leaderElection"]["leaderElect"] is False
    assert cfg["integrations"]["frameworks"] == ["batch/job"]
    assert cfg["internalCertManagement"]["webhookSecretName"] == kueue.SECRET


def test_certificates_name_the_local_address(tmp_path: Path) -> None:
    certs = kueue.make_certs(tmp_path)
    text = subprocess.run(["openssl", "x509", "-noout", "-text"], input=certs["tls.crt"], capture_output=True,
                          check=True).stdout.decode()
    assert "IP Address:127.0.0.1" in text and f"DNS:{kueue.SERVICE}.{kueue.NAMESPACE}.svc" in text
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt")],
                            capture_output=True, check=False)
    assert verify.returncode == 0, verify.stderr
