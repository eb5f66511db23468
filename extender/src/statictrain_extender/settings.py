"""Extender settings: one dataclass, filled from environment variables named here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from .scoring import Weights

__all__ = ["ENV", "ExtenderSettings", "SettingsError"]

# Environment variable names (the chart sets them from values.yaml `extender:`).
ENV = {
    "host": "STATICTRAIN_EXTENDER_HOST",
    "port": "STATICTRAIN_EXTENDER_PORT",
    "tls_cert_file": "STATICTRAIN_EXTENDER_TLS_CERT_FILE",
    "tls_key_file": "STATICTRAIN_EXTENDER_TLS_KEY_FILE",
    "tls_client_ca_file": "STATICTRAIN_EXTENDER_TLS_CLIENT_CA_FILE",
    "scheduler_names": "STATICTRAIN_EXTENDER_SCHEDULER_NAMES",
    "weight_cost": "STATICTRAIN_EXTENDER_WEIGHT_COST",
    "weight_pack": "STATICTRAIN_EXTENDER_WEIGHT_PACK",
    "prometheus_url": "STATICTRAIN_PROMETHEUS_URL",
    "refresh_seconds": "STATICTRAIN_EXTENDER_REFRESH_SECONDS",
    "step_window_seconds": "STATICTRAIN_EXTENDER_STEP_WINDOW_SECONDS",
    "prior_samples": "STATICTRAIN_EXTENDER_PRIOR_SAMPLES",
    "kubeconfig": "KUBECONFIG",
    "watch_pods": "STATICTRAIN_EXTENDER_WATCH_PODS",
}


class SettingsError(ValueError):
    """An environment variable with a value that cannot be used; the message names it."""


@dataclass(frozen=True)
class ExtenderSettings:
    """How the extender listens, whom it judges, and where its inputs come from."""

    host: str = "0.0.0.0"
    """Address to listen on."""
    port: int = 8888
    """TCP port; kube-scheduler posts to http(s)://host:port/scheduler/{filter,prioritize}."""
    tls_cert_file: str = ""
    """PEM certificate; with tls_key_file, serve HTTPS instead of HTTP."""
    tls_key_file: str = ""
    """PEM private key for tls_cert_file."""
    tls_client_ca_file: str = ""
    """PEM CA bundle; set (with HTTPS): mutual TLS, only clients with a certificate it signed connect."""
    scheduler_names: frozenset[str] = field(default_factory=lambda: frozenset({"statictrain-scheduler"}))
    """Pods whose spec.schedulerName is one of these are judged; all others get a neutral answer."""
    weights: Weights = field(default_factory=Weights)
    """Weights of the cost and packing terms of the score."""
    prometheus_url: str = ""
    """Prometheus base URL for measured step times; empty disables it (default throughput table only)."""
    refresh_seconds: float = 30.0
    """How often the background task re-reads step times from Prometheus."""
    step_window_seconds: float = 600.0
    """Range over which mean step seconds are computed."""
    prior_samples: float = 1.0
    """Weight of the throughput table against a class's step-time samples (refreshes that saw a job;
    see speeds.py): 0 trusts the first measurement, larger values need more samples to move."""
    kubeconfig: str = ""
    """Kubeconfig path; empty means in-cluster configuration."""
    watch_pods: bool = True
    """Watch pods to know how many GPUs each node has allocated (the packing term)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ExtenderSettings:
        """Read every field from its environment variable, keeping defaults for unset ones."""
        src = os.environ if env is None else env
        default = cls()

        def text(key: str, fallback: str) -> str:
            return src.get(ENV[key], fallback).strip()

        def number(key: str, fallback: float, minimum: float) -> float:
            raw = text(key, "")
            if not raw:
                return fallback
            try:
                value = float(raw)
            except ValueError:
                raise SettingsError(f"{ENV[key]}={raw!r} is not a number") from None
            if not value >= minimum:
                raise SettingsError(f"{ENV[key]}={raw!r} must be >= {minimum}")
            return value

        port = number("port", default.port, 1)
        if port != int(port) or port > 65535:
            raise SettingsError(f"{ENV['port']} must be an integer port 1..65535")
        cert, key = text("tls_cert_file", ""), text("tls_key_file", "")
        if bool(cert) != bool(key):
            raise SettingsError(f"set both {ENV['tls_cert_file']} and {ENV['tls_key_file']} for HTTPS, or neither")
        client_ca = text("tls_client_ca_file", "")
        if client_ca and not cert:
            raise SettingsError(
                f"{ENV['tls_client_ca_file']} needs HTTPS: set {ENV['tls_cert_file']} and {ENV['tls_key_file']} too"
            )
        names_raw = text("scheduler_names", "")
        names = frozenset(n.strip() for n in names_raw.split(",") if n.strip()) or default.scheduler_names
        try:
            weights = Weights(
                cost=number("weight_cost", default.weights.cost, 0),
                pack=number("weight_pack", default.weights.pack, 0),
            )
        except ValueError as err:
            raise SettingsError(f"{ENV['weight_cost']}/{ENV['weight_pack']}: {err}") from None
        watch_raw = text("watch_pods", "true").lower()
        if watch_raw not in ("true", "false"):
            raise SettingsError(f"{ENV['watch_pods']}={watch_raw!r} must be true or false")
        return cls(
            host=text("host", default.host),
            port=int(port),
            tls_cert_file=cert,
            tls_key_file=key,
            tls_client_ca_file=client_ca,
            scheduler_names=names,
            weights=weights,
            prometheus_url=text("prometheus_url", "").rstrip("/"),
            refresh_seconds=number("refresh_seconds", default.refresh_seconds, 1),
            step_window_seconds=number("step_window_seconds", default.step_window_seconds, 1),
            prior_samples=number("prior_samples", default.prior_samples, 0),
            kubeconfig=text("kubeconfig", ""),
            watch_pods=watch_raw == "true",
        )
