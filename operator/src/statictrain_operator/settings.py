"""Operator settings: one dataclass, filled from environment variables named here.

The Helm chart sets these variables on the operator Deployment (values.yaml
documents each); tests build ``Settings(...)`` directly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from statictrain import envconfig

__all__ = ["ENV_PREFIX", "Settings", "SettingsError", "from_env", "from_os_environ"]

ENV_PREFIX = "STATICTRAIN_OPERATOR_"


SettingsError = envconfig.EnvConfigError
"""An environment variable holds a value the operator cannot use."""


def _default_tolerations() -> list[dict[str, Any]]:
    return [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@dataclass(frozen=True)
class Settings:
    """How the operator builds workers and talks to the cluster.

    Each field is read from ``STATICTRAIN_OPERATOR_<FIELD NAME IN UPPER CASE>``;
    lists and maps are JSON.
    """

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty watches the whole cluster (comma-separated)."""
    scheduler_name: str = "statictrain-scheduler"
    """schedulerName of worker pods (the kube-scheduler profile with the cost-aware extender)."""
    sidecar_image: str = "ghcr.io/statictrain/sidecar:0.1.0"
    """Image of the profiling sidecar container in every worker pod."""
    image_pull_policy: str = "IfNotPresent"
    """imagePullPolicy of the trainer and sidecar containers."""
    sidecar_metrics_port: int = 9400
    """Port of the sidecar's /metrics endpoint in every worker pod (scraped by Prometheus)."""
    own_metrics_port: int = 9401
    """Port of the operator's own /metrics endpoint (job cost and anomaly metrics); 0 disables it."""
    sample_interval_s: int = 1
    """Seconds between the sidecar's NVML samples."""
    sidecar_dcgm: bool = False
    """The sidecars also export their NVML figures under dcgm-exporter's names (STATICTRAIN_SIDECAR_DCGM)."""
    stats_dir: str = "/var/run/statictrain"
    """Mount path of the trainer -> sidecar emptyDir (the channel directory)."""
    compile_cache_dir: str = "/var/cache/statictrain/compile"
    """Mount path of the compile-cache volume in the trainer container."""
    compile_cache_claim: str = ""
    """PersistentVolumeClaim (in the job's namespace) shared as compile cache; empty uses an emptyDir."""
    compile_cache_per_job: bool = False
    """With a compile-cache claim: each job's trainers write only the folder ``jobs/<job name>`` of it (a
    subPath) and read that and, read-only, ``shared/`` (filled by whoever may write the whole claim, e.g. an
    admin copying a vetted job's artifacts), so no job loads artifacts another job wrote; a job re-submitted
    under the same name in the same namespace finds its own. Off: every job of a namespace reads and writes
    the whole claim."""
    checkpoint_volume_size: str = "10Gi"
    """Size of the checkpoint claim made per job whose spec names none; empty makes none (an
    emptyDir: checkpoints are lost with the pod, and replaced pods start from step 0)."""
    profile_token: bool = False
    """Mint a per-job Secret <job>-profile-token with a random token and mount it in the sidecar: its
    /profile endpoints answer requests bearing that token (off: they refuse every request). Needs the
    right to create Secrets in the watched namespaces."""
    checkpoint_storage_class: str = ""
    """StorageClass of the per-job checkpoint claims; empty uses the cluster's default class. Jobs
    with more than one pod need a class that offers ReadWriteMany (NFS, EFS, Filestore, CephFS)."""
    tolerations: list[dict[str, Any]] = field(default_factory=_default_tolerations)
    """Tolerations added to every worker pod (JSON list), e.g. for kwok's fake-node taint."""
    node_selector: dict[str, str] = field(default_factory=dict)
    """Node labels every worker pod requires (JSON object), merged with spec.placement.nodeSelector; on a
    key both set, this value wins."""
    pod_annotations: dict[str, str] = field(default_factory=dict)
    """Extra annotations on worker pods (JSON object), e.g. kwok stage controls in tests."""
    sidecar_cpu: str = "100m"
    """CPU request of the sidecar container."""
    sidecar_memory: str = "128Mi"
    """Memory request and limit of the sidecar container."""
    requeue_s: float = 2.0
    """Seconds before a reconcile that waits (e.g. for old workers to go) runs again; also the first wait
    after an API error."""
    backoff_max_s: float = 30.0
    """Longest wait before retrying after API errors in a row (each error doubles the wait, with jitter,
    from requeue_s for a job, from 1 s for kopf's watches); retries never stop."""
    heartbeat_s: float = 10.0
    """Seconds between heartbeats through the watch; the liveness probe fails after 6 missed ones."""
    heartbeat_namespace: str = ""
    """Namespace of the heartbeat Lease (the operator's own); empty disables the heartbeat."""
    resync_s: float = 30.0
    """Seconds between full re-convergences of every job (catches anything an event missed)."""
    ttl_sweep_s: float = 1.0
    """Seconds between sweeps for finished jobs whose ttlSecondsAfterFinished has passed."""
    parts: tuple[str, ...] = ("progress", "cost", "anomaly")
    """Optional parts switched on (progress, cost, anomaly), comma-separated; each reads its own settings."""
    leader_election: bool = False
    """Run as one of several replicas: only the holder of the Lease statictrain-operator-leader in
    heartbeat_namespace acts, the others wait (leader.py)."""
    leader_lease_s: float = 15.0
    """Seconds a leader Lease lasts without renewal before a standby takes over (renewed every third)."""
    max_workers: int = 32
    """Pooled connections to the API server (and kopf's threads for synchronous handlers)."""
    extender_health_url: str = ""
    """The scheduler extender's health endpoint (e.g. http://statictrain-extender.statictrain:8888/healthz), probed
    every extender_probe_s: statictrain_extender_up on /metrics, one log line and one Event per change (the Event
    on the heartbeat Lease, in heartbeat_namespace). Empty: no probe."""
    extender_probe_s: float = 10.0
    """Seconds between two probes of extender_health_url."""
    extender_probe_timeout_s: float = 2.0
    """Seconds one probe may take (at most extender_probe_s); slower counts as a failed probe."""
    extender_probe_failures: int = 2
    """Failed probes in a row before the extender counts as down (one good answer brings it back)."""
    extender_tls_dir: str = ""
    """For an https extender_health_url: folder with ca.crt, the CA the extender's certificate is checked against
    (no client certificate: under mutual TLS the extender answers /healthz without one). Empty: the system CAs."""


def from_env(environ: Mapping[str, str]) -> Settings:
    """Settings from ``environ``; unset variables keep the defaults.

    Raises SettingsError naming the variable when a value does not parse.
    """
    settings = envconfig.fill(Settings, ENV_PREFIX, environ)
    if not 0 < settings.sidecar_metrics_port <= 65535:
        raise SettingsError(
            f"{ENV_PREFIX}SIDECAR_METRICS_PORT must be a port number (1-65535), got {settings.sidecar_metrics_port}"
        )
    if not settings.backoff_max_s >= max(settings.requeue_s, 1.0) or not settings.requeue_s > 0:
        raise SettingsError(
            f"{ENV_PREFIX}REQUEUE_S must be > 0 and {ENV_PREFIX}BACKOFF_MAX_S at least 1 and at least REQUEUE_S, "
            f"got {settings.requeue_s} and {settings.backoff_max_s}"
        )
    if settings.leader_election and not settings.heartbeat_namespace:
        raise SettingsError(f"{ENV_PREFIX}LEADER_ELECTION needs {ENV_PREFIX}HEARTBEAT_NAMESPACE (the operator's own "
                            "namespace, where the leader Lease lives)")
    if not settings.leader_lease_s >= 3:
        raise SettingsError(f"{ENV_PREFIX}LEADER_LEASE_S must be at least 3, got {settings.leader_lease_s}")
    if not 0 <= settings.own_metrics_port <= 65535:
        raise SettingsError(
            f"{ENV_PREFIX}OWN_METRICS_PORT must be a port number (1-65535) or 0, got {settings.own_metrics_port}"
        )
    _check_extender_probe(settings)
    return settings


def _check_extender_probe(settings: Settings) -> None:
    url = urlsplit(settings.extender_health_url)
    if settings.extender_health_url and (url.scheme not in ("http", "https") or not url.hostname):
        raise SettingsError(
            f"{ENV_PREFIX}EXTENDER_HEALTH_URL must be an http(s) URL with a host, e.g. "
            f"http://statictrain-extender.statictrain:8888/healthz; got {url.scheme or 'no'} scheme"
        )
    if not 0 < settings.extender_probe_timeout_s <= settings.extender_probe_s:
        raise SettingsError(
            f"{ENV_PREFIX}EXTENDER_PROBE_TIMEOUT_S must be > 0 and at most {ENV_PREFIX}EXTENDER_PROBE_S, "
            f"got {settings.extender_probe_timeout_s} and {settings.extender_probe_s}"
        )
    if settings.extender_probe_failures < 1:
        raise SettingsError(
            f"{ENV_PREFIX}EXTENDER_PROBE_FAILURES must be at least 1, got {settings.extender_probe_failures}"
        )


def from_os_environ() -> Settings:
    """Settings from this process's environment."""
    return from_env(os.environ)
