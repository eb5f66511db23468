"""Kueue in the local cluster: its CRDs, its real webhooks and its manager as a local process.

The manager (built by build-kueue.sh from sigs.k8s.io/kueue) runs against the local
API server with the cluster's admin kubeconfig, only the batch/Job integration on,
leader election, metrics and the visibility server off. Its webhooks are real: the
API server calls them at https://127.0.0.1:<port>. Kueue's own certificate manager
(cert-controller) keeps the serving certificate in a Secret and injects the CA into
the webhook configurations and the CRDs' conversion webhooks; we seed that Secret
with a CA and a server certificate made here (openssl) whose names include
127.0.0.1 as well as the in-cluster service name, so the API server can verify it.
Only the webhooks of the enabled integration and of Kueue's own kinds are
registered (the others, for pods, deployments, ..., would have no handler), and
the Job webhooks only for Jobs labelled with a queue: the cluster's other Jobs
(every other test's) never depend on Kueue being up.

Then the queues of deploy/local-cluster/kueue-queues.yaml: spot and on-demand
ResourceFlavors over the kwok GPU nodes, one ClusterQueue and a LocalQueue per
team namespace.
"""

from __future__ import annotations

import base64
import copy
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from statictrain_localcluster.waiting import crds_established

__all__ = [
    "NAMESPACE", "KueueError", "crds", "manager_config", "seed_secret", "start", "wait_ready",
    "webhook_configurations",
]

NAMESPACE = "kueue-system"
SERVICE = "kueue-webhook-service"
SECRET = "kueue-webhook-server-cert"
WEBHOOK_PREFIX = "kueue"  # kueue-{validating,mutating}-webhook-configuration: the names cert-controller patches
# The CRDs whose conversion webhook cert-controller injects (it fails unless each has one).
CONVERTED = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
# Webhook paths served with only the batch/Job integration on.
SERVED = ("-kueue-x-k8s-io-", "-batch-v1-job")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class KueueError(RuntimeError):
    """Kueue could not be installed or started; the message says what to do."""


def manager_config(cert_dir: Path, webhook_port: int, health_port: int) -> dict[str, Any]:
    """Kueue's Configuration for a local manager (pure)."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": True, "webhookServiceName": SERVICE, "webhookSecretName": SECRET},
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {"VisibilityOnDemand": False},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def crds(crd_dir: Path, webhook_port: int) -> list[dict[str, Any]]:
    """The module's CRDs, the converted ones with a conversion webhook at 127.0.0.1."""
    out = []
    for path in sorted(crd_dir.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["plural"] in CONVERTED:
            crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": f"https://127.0.0.1:{webhook_port}/convert"}}}
        out.append(crd)
    return out


def webhook_configurations(manifest: str, webhook_port: int) -> list[dict[str, Any]]:
    """The module's webhook configurations, renamed for cert-controller, pointed at 127.0.0.1 and
    limited to the webhooks this manager serves (pure)."""
    out = []
    for doc in yaml.safe_load_all(manifest):
        if not doc:
            continue
        conf = copy.deepcopy(doc)
        kind = "mutating" if conf["kind"] == "MutatingWebhookConfiguration" else "validating"
        conf["metadata"] = {"name": f"{WEBHOOK_PREFIX}-{kind}-webhook-configuration"}
        hooks = []
        for hook in conf.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            if any(part in path for part in SERVED):
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{webhook_port}{path}"}
                if "-batch-v1-job" in path:  # only Jobs in a queue: the cluster's other Jobs never wait on Kueue
                    hook["objectSelector"] = {"matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]}
                hooks.append(hook)
        conf["webhooks"] = hooks
        out.append(conf)
    return out


def make_certs(folder: Path) -> dict[str, bytes]:
    """A CA ("kueue-ca", the name cert-controller checks) and a server certificate for the webhook
    service's name and 127.0.0.1, valid ten years; keys as the Secret holds them."""
    folder.mkdir(parents=True, exist_ok=True)
    dns = f"{SERVICE}.{NAMESPACE}.svc"

    def openssl(*args: str) -> None:
        proc = subprocess.run(["openssl", *args], cwd=folder, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise KueueError(f"openssl {args[0]} failed: {proc.stderr.strip()}")

    try:
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-keyout", "ca.key",
                "-out", "ca.crt", "-subj", "/O=kueue/CN=kueue-ca", "-addext", "subjectAltName=DNS:kueue-ca",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr",
                "-subj", f"/CN={dns}")
        (folder / "ext.cnf").write_text(f"subjectAltName=DNS:{dns},IP:127.0.0.1\n"
                                        "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
        openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "3650", "-out", "tls.crt", "-extfile", "ext.cnf")
        for key in ("ca.key", "tls.key"):  # cert-controller reads PKCS#1 ("RSA PRIVATE KEY") keys only
            openssl("rsa", "-in", key, "-out", key, "-traditional")
    except FileNotFoundError:
        raise KueueError("openssl is needed for Kueue's webhook certificate: apt-get install -y openssl") from None
    return {name: (folder / name).read_bytes() for name in ("ca.crt", "ca.key", "tls.crt", "tls.key")}


def seed_secret(certs: dict[str, bytes]) -> dict[str, Any]:
    """The Secret cert-controller reads; valid contents are kept, not regenerated (pure)."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET, "namespace": NAMESPACE},
            "type": "Opaque", "data": {k: base64.b64encode(v).decode() for k, v in certs.items()}}


def install(kubectl: Callable[..., Any], config_dir: Path, root: Path, webhook_port: int) -> None:
    """Namespace, seeded Secret, CRDs (Established) and webhook configurations; the serving certificate
    in ``root/certs`` too (in a cluster the Secret is mounted there; cert-controller waits for the files)."""
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    certs = make_certs(root / "pki")
    (root / "certs").mkdir(parents=True, exist_ok=True)
    for name, data in certs.items():
        (root / "certs" / name).write_bytes(data)
    objs = [ns, seed_secret(certs), *crds(config_dir / "crd", webhook_port),
            *webhook_configurations((config_dir / "webhook" / "manifests.yaml").read_text(), webhook_port)]
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(objs))
    crds_established(kubectl, [c["metadata"]["name"] for c in objs if c["kind"] == "CustomResourceDefinition"])


def start(bin_dir: Path, root: Path, kubeconfig: Path, *, webhook_port: int, health_port: int,
          log: Path) -> subprocess.Popen[bytes]:
    """Start the manager; its command line names ``root`` (the cluster's stop() finds it by that)."""
    cert_dir = root / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    config = root / "kueue-config.yaml"
    config.write_text(yaml.safe_dump(manager_config(cert_dir, webhook_port, health_port)))
    with log.open("ab") as out:
        return subprocess.Popen([str(bin_dir / "kueue"), f"--config={config}", "--zap-log-level=2",
                                 f"--kubeconfig={kubeconfig}"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def ready(health_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(proc: subprocess.Popen[bytes], health_port: int, webhook_port: int, timeout_s: float,
               log: Path) -> None:
    """Until the manager is ready and its webhook answers TLS; KueueError if it exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise KueueError(f"the Kueue manager exited ({proc.returncode}); log: {log}")
        if ready(health_port) and _webhook_up(webhook_port):
            return
        time.sleep(0.5)
    raise KueueError(f"timed out after {timeout_s:.0f}s waiting for the Kueue manager; log: {log}")


def _webhook_up(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0
