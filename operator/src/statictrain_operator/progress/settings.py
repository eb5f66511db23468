"""Settings of the progress part: one dataclass, filled from ``STATICTRAIN_PROGRESS_<FIELD>`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from statictrain import envconfig

__all__ = ["ENV_PREFIX", "ProgressSettings"]

ENV_PREFIX = "STATICTRAIN_PROGRESS_"


@dataclass(frozen=True)
class ProgressSettings:
    """How often status.progress and status.compile are refreshed from the sidecars' metrics."""

    prometheus_url: str = "http://prometheus-server:9090"
    """Base URL of the Prometheus that scrapes the sidecars (STATICTRAIN_PROMETHEUS_URL)."""
    interval_s: float = 15.0
    """Seconds between two refreshes of every running job."""
    rate_window_s: float = 60.0
    """Range of rate() for the step time (at least two scrapes)."""
    query_timeout_s: float = 10.0
    """Seconds per Prometheus query."""
    enabled: bool = True
    """Run the progress loop."""

    def __post_init__(self) -> None:
        for name in ("interval_s", "rate_window_s", "query_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{ENV_PREFIX}{name.upper()} must be positive, got {getattr(self, name)}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProgressSettings:
        """Settings from ``STATICTRAIN_PROGRESS_*`` (Prometheus URL: STATICTRAIN_PROMETHEUS_URL, else the part's
        own variable); a bad value raises ValueError naming the variable."""
        env = os.environ if env is None else env
        return envconfig.fill(cls, ENV_PREFIX, env, {"prometheus_url": envconfig.PROMETHEUS_URL_ENV})
