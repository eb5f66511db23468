"""Anomaly loop settings: one dataclass, filled from ``STATICTRAIN_ANOMALY_<FIELD>`` variables."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

from statictrain import envconfig
from statictrain.dcgm import DcgmSettings

from statictrain_operator.anomaly.detector import DetectorSettings
from statictrain_operator.anomaly.faults import FaultSettings
from statictrain_operator.anomaly.findings import FindingSettings
from statictrain_operator.anomaly.remediation import PolicySettings

__all__ = ["ENV_PREFIX", "WINDOW_STEPS", "AnomalySettings"]

ENV_PREFIX = "STATICTRAIN_ANOMALY_"
WINDOW_STEPS = 5
"""Query steps a training-fault window spans at least (the memory-leak detector needs five points)."""


@dataclass(frozen=True)
class AnomalySettings:
    """How often and over what history jobs are judged, and how remediation is paced."""

    enabled: bool = True
    """Run the anomaly timer at all."""
    prometheus_url: str = "http://prometheus-server:9090"
    """Base URL of the Prometheus that scrapes the sidecars and the operator (STATICTRAIN_PROMETHEUS_URL)."""
    interval_s: float = 60.0
    """Seconds between two evaluations of a job (the refit schedule of its models)."""
    lookback_s: float = 2 * 86400.0
    """History fetched per evaluation (Prophet's rolling window; two days enable daily seasonality)."""
    step_s: float = 60.0
    """Resolution of the range queries: ``lookback_s / step_s`` points per series (2880 by default;
    keep it <= 4000 so a Prophet fit stays under a second)."""
    rate_window_s: float = 120.0
    """Range of rate() in the step-time and cost-rate queries."""
    query_timeout_s: float = 10.0
    """Seconds per Prometheus query before the data count as missing."""
    recent_points: int = 5
    """Records judged at each evaluation (the rest is history)."""
    prophet_min_points: int = 96
    """History records from which Prophet is used instead of the median/MAD baseline."""
    stabilization_s: float = 300.0
    """At most one action per window of this many seconds."""
    cooldown_s: float = 900.0
    """No second action of the same kind within this many seconds."""
    good_settle_s: float = 600.0
    """Settings count as 'last good' after this many seconds without a regression."""
    idle_utilization: float = 0.05
    """GPU utilisation below which GPUs count as idle."""
    stall_min_s: float = 300.0
    """Shortest time without a step that counts as a stall."""
    dcgm: DcgmSettings = field(default_factory=DcgmSettings)
    """Where the GPU series come from (the sidecars, dcgm-exporter): ``STATICTRAIN_DCGM_*``, the setting cost
    accounting reads."""

    def __post_init__(self) -> None:
        if not isinstance(self.dcgm, DcgmSettings):
            raise ValueError("STATICTRAIN_ANOMALY_DCGM is not a setting: use the STATICTRAIN_DCGM_* variables")
        positive = ("interval_s", "lookback_s", "step_s", "rate_window_s", "query_timeout_s")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{ENV_PREFIX}{name.upper()} must be positive, got {getattr(self, name)}")
        if self.lookback_s / self.step_s > 11000:
            raise ValueError(
                f"{ENV_PREFIX}LOOKBACK_S / STEP_S is over Prometheus' 11000-point limit: "
                "raise STEP_S or lower LOOKBACK_S"
            )
        if not 0 <= self.idle_utilization <= 1:
            raise ValueError(f"{ENV_PREFIX}IDLE_UTILIZATION must lie in 0..1, got {self.idle_utilization}")

    def detector(self) -> DetectorSettings:
        """Settings of the per-series detector."""
        return DetectorSettings(recent_points=self.recent_points, prophet_min_points=self.prophet_min_points)

    def policy(self) -> PolicySettings:
        """Settings of the remediation policy."""
        return PolicySettings(stabilization_s=self.stabilization_s, cooldown_s=self.cooldown_s)

    def findings(self) -> FindingSettings:
        """Thresholds of the findings."""
        return FindingSettings(stall_min_s=self.stall_min_s)

    def faults(self) -> FaultSettings:
        """Thresholds of the training-fault detectors; their averaging windows span at least
        ``WINDOW_STEPS`` query steps (at the default 60 s resolution a 30 s window holds one point, and the idle
        and memory-leak detectors need three and five: they would never fire)."""
        base, span = FaultSettings(), WINDOW_STEPS * self.step_s
        return FaultSettings(
            idle_utilization=self.idle_utilization,
            idle_window_s=max(base.idle_window_s, span),
            leak_window_s=max(base.leak_window_s, span),
        )

    def query_window(self, end: float) -> tuple[float, float]:
        """(start, end) of a range query over the lookback ending at ``end`` (Unix seconds), its start
        rounded up to a multiple of ``step_s``: Prometheus returns points at start + k * step, so every
        evaluation reads the same instants (as Grafana aligns its queries). An episode's start
        (Finding.since), and the action id derived from it, then stay put while the episode lasts;
        anchored at ``end`` they moved with every evaluation. The newest point is at most one step old."""
        return math.ceil((end - self.lookback_s) / self.step_s) * self.step_s, end

    @property
    def good_settle(self) -> timedelta:
        """good_settle_s as a timedelta."""
        return timedelta(seconds=self.good_settle_s)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AnomalySettings:
        """Settings from ``STATICTRAIN_ANOMALY_*`` (Prometheus URL: STATICTRAIN_PROMETHEUS_URL, else the part's own
        variable; the GPU source: ``STATICTRAIN_DCGM_*``); a bad value raises ValueError naming the variable."""
        env = os.environ if env is None else env
        filled = envconfig.fill(cls, ENV_PREFIX, env, {"prometheus_url": envconfig.PROMETHEUS_URL_ENV})
        return replace(filled, dcgm=DcgmSettings.from_env(env))
