"""Sidecar settings: one dataclass filled from the worker pod's environment.

The operator sets the variables (names in ``statictrain.envvars``); command-line
flags of ``statictrain-sidecar`` override them. Bad values raise SettingsError
with the variable's name and what to put there instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from statictrain import envvars

from .files import read_regular

__all__ = ["Identity", "Settings", "SettingsError", "read_token"]

_N = TypeVar("_N", int, float)

MAX_LABEL_VALUE_CHARS = 253
"""Longest identity label value kept (a Kubernetes object name's limit); longer ones are cut."""


class SettingsError(ValueError):
    """A setting has a value the sidecar cannot use; the message says what to fix."""


@dataclass(frozen=True)
class Identity:
    """Who this sidecar reports for: the labels on every metric it exports."""

    job_name: str = ""
    """StaticTrainingJob name (``STATICTRAIN_JOB``)."""
    namespace: str = ""
    """Namespace of the job (``STATICTRAIN_NAMESPACE``)."""
    commit: str = ""
    """Git commit of the training code (``STATICTRAIN_COMMIT``)."""
    team: str = ""
    """Team that owns the job (``STATICTRAIN_TEAM``)."""
    pod: str = ""
    """Worker pod name, from the downward API (``STATICTRAIN_POD``)."""
    pod_uid: str = ""
    """Worker pod UID, from the downward API (``STATICTRAIN_POD_UID``); cost is keyed by it."""

    LABEL_NAMES = ("job_name", "namespace", "commit", "team", "pod", "pod_uid")

    def label_values(self) -> list[str]:
        """Values in the order of LABEL_NAMES."""
        return [self.job_name, self.namespace, self.commit, self.team, self.pod, self.pod_uid]


@dataclass(frozen=True)
class Settings:
    """Everything the sidecar needs to run."""

    identity: Identity = field(default_factory=Identity)
    """Labels of every exported metric."""
    stats_dir: Path | None = None
    """Shared directory of the trainer channel (``STATICTRAIN_STATS_DIR``); None: no training
    metrics and no profile requests, GPU metrics only."""
    port: int = 9400
    """TCP port of /metrics, /healthz and /profile (``STATICTRAIN_METRICS_PORT``); 0 picks a free one."""
    bind: str = "0.0.0.0"
    """Address the HTTP server listens on (``STATICTRAIN_METRICS_BIND``)."""
    sample_interval_s: float = 1.0
    """Seconds between background samples: channel tail, GPU busy-time integral, XID events
    (``STATICTRAIN_SAMPLE_INTERVAL_S``); 0.01 to 60."""
    gpus: tuple[str, ...] = ()
    """GPUs to report, as NVML indices or UUIDs (``STATICTRAIN_SIDECAR_GPUS``, comma-separated);
    empty: the GPUs the trainer publishes on the channel (``<stats_dir>/gpus/``), or, without a
    channel, every GPU NVML sees in this container."""
    nvml: bool = True
    """False: do not load NVML at all (``STATICTRAIN_SIDECAR_NVML=false``); the sidecar reports
    reason "disabled"."""
    dcgm: bool = False
    """Also export DCGM-exporter-compatible series (``STATICTRAIN_SIDECAR_DCGM=true``)."""
    profile_max_steps: int = 50
    """Largest N accepted by POST /profile?steps=N (``STATICTRAIN_PROFILE_MAX_STEPS``)."""
    profile_timeout_s: float = 600.0
    """A profile request the trainer has not taken within this many seconds is withdrawn
    (``STATICTRAIN_PROFILE_TIMEOUT_S``)."""
    profile_max_bytes: int = 1 << 30
    """Bytes of captured profiles kept under ``profiles/``; the oldest are deleted beyond it
    (``STATICTRAIN_PROFILE_MAX_BYTES``)."""
    profile_token_file: Path | None = None
    """File holding the bearer token that POST /profile and GET /profiles* require
    (``STATICTRAIN_PROFILE_TOKEN_FILE``, a mounted Secret); None: profiling over HTTP is off."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"{envvars.METRICS_PORT}={self.port}: use a TCP port from 0 to 65535")
        if not (math.isfinite(self.sample_interval_s) and 0.01 <= self.sample_interval_s <= 60):
            raise SettingsError(
                f"{envvars.SAMPLE_INTERVAL_S}={self.sample_interval_s}: use seconds from 0.01 to 60"
            )
        if not 1 <= self.profile_max_steps <= 10_000:
            raise SettingsError(f"{envvars.PROFILE_MAX_STEPS}={self.profile_max_steps}: use 1 to 10000")
        if not (math.isfinite(self.profile_timeout_s) and self.profile_timeout_s > 0):
            raise SettingsError(f"{envvars.PROFILE_TIMEOUT_S}={self.profile_timeout_s}: use seconds > 0")
        if self.profile_max_bytes < 0:
            raise SettingsError(f"{envvars.PROFILE_MAX_BYTES}={self.profile_max_bytes}: use bytes >= 0")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Read every setting from ``env`` (pass ``os.environ``); unset or empty keeps the default."""
        d = cls()
        identity = Identity(
            job_name=_label(env, envvars.JOB_NAME),
            namespace=_label(env, envvars.JOB_NAMESPACE),
            commit=_label(env, envvars.COMMIT),
            team=_label(env, envvars.TEAM),
            pod=_label(env, envvars.POD_NAME),
            pod_uid=_label(env, envvars.POD_UID),
        )
        stats = env.get(envvars.STATS_DIR, "").strip()
        gpus = tuple(g.strip() for g in env.get(envvars.SIDECAR_GPUS, "").split(",") if g.strip())
        token_file = env.get(envvars.PROFILE_TOKEN_FILE, "").strip()
        return cls(
            identity=identity,
            stats_dir=Path(stats) if stats else None,
            port=_number(env, envvars.METRICS_PORT, d.port),
            bind=env.get(envvars.METRICS_BIND, "").strip() or d.bind,
            sample_interval_s=_number(env, envvars.SAMPLE_INTERVAL_S, d.sample_interval_s),
            gpus=gpus,
            nvml=_bool(env, envvars.SIDECAR_NVML, d.nvml),
            dcgm=_bool(env, envvars.SIDECAR_DCGM, d.dcgm),
            profile_max_steps=_number(env, envvars.PROFILE_MAX_STEPS, d.profile_max_steps),
            profile_timeout_s=_number(env, envvars.PROFILE_TIMEOUT_S, d.profile_timeout_s),
            profile_max_bytes=_number(env, envvars.PROFILE_MAX_BYTES, d.profile_max_bytes),
            profile_token_file=Path(token_file) if token_file else None,
        )


def _label(env: Mapping[str, str], name: str) -> str:
    return env.get(name, "").strip()[:MAX_LABEL_VALUE_CHARS]


_INTEGER = re.compile(r"-?[0-9]{1,18}")
_DECIMAL = re.compile(r"-?([0-9]{1,18}(\.[0-9]{0,18})?|\.[0-9]{1,18})([eE][-+]?[0-9]{1,3})?")
"""ASCII digits only: int() and float() also take other scripts' digits, "1_0" and "+5"."""


def _number(env: Mapping[str, str], name: str, default: _N) -> _N:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    kind = type(default)
    if not (_INTEGER if kind is int else _DECIMAL).fullmatch(raw):
        what = "a whole number" if kind is int else "a number"
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise SettingsError(f"{name}={shown!r} is not {what} in ASCII digits: for example {default}")
    return kind(raw)


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("true", "1", "yes", "on"):
        return True
    if raw in ("false", "0", "no", "off"):
        return False
    raise SettingsError(f"{name}={raw!r}: use true or false")


MIN_TOKEN_CHARS = 16
"""Shortest profile token accepted (the operator mints 32 random bytes, hex)."""
MAX_TOKEN_FILE_BYTES = 4096
"""Largest token file read."""


def read_token(path: Path) -> str:
    """The profile token in ``path`` (surrounding whitespace dropped); SettingsError says what to fix.

    Only a regular file of at most MAX_TOKEN_FILE_BYTES is read (a FIFO is never waited on); symlinks
    are followed, as a Secret volume's keys are links."""
    try:
        token = read_regular(path, MAX_TOKEN_FILE_BYTES, follow=True).decode().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsError(f"{envvars.PROFILE_TOKEN_FILE}={path}: cannot read the token: {e}") from None
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise SettingsError(
            f"{envvars.PROFILE_TOKEN_FILE}={path}: put one token of at least {MIN_TOKEN_CHARS} characters "
            "without spaces in it (for example 32 random bytes in hex)"
        )
    return token
