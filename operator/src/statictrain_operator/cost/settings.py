"""Cost accounting settings: one dataclass, filled from ``STATICTRAIN_COST_<FIELD>`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal

from statictrain import envconfig
from statictrain.carbon import GridIntensity, parse_overrides, shipped_table
from statictrain.cost import IDLE_THRESHOLD, ResourcePrices
from statictrain.dcgm import DcgmSettings
from statictrain.money import parse_usd

from statictrain_operator.cost.live_prices import AZURE_URL

__all__ = ["ENV_PREFIX", "CostSettings"]

ENV_PREFIX = "STATICTRAIN_COST_"


@dataclass(frozen=True)
class CostSettings:
    """How the operator prices nodes and accounts job cost."""

    prometheus_url: str = "http://prometheus-server:9090"
    """Base URL of the Prometheus that scrapes the sidecars and the operator (STATICTRAIN_PROMETHEUS_URL)."""
    interval_s: float = 30.0
    """Seconds between accounting runs (each run accounts the time since the previous one)."""
    idle_threshold: float = IDLE_THRESHOLD
    """GPU utilization ratio below which allocated GPU time counts as idle. The sidecars count idle time at
    the default exactly; at another threshold idle comes from the utilization samples Prometheus holds."""
    max_gap_s: float = 60.0
    """A utilization sample stands for at most this many seconds; longer gaps are flagged."""
    max_catchup_s: float = 3600.0
    """Longest accounting window: after an operator outage, the time it was down is caught up in full,
    nodes and jobs alike, in windows of at most this many seconds."""
    usage_grace_s: float = 600.0
    """While Prometheus is unreachable for less than this, accounting waits (and then catches up exactly);
    after it, cost is accounted from the API server alone and the missing usage is flagged (lost)."""
    counter_lookback_s: float = 600.0
    """How far before a window its counters' previous samples are read in the same query (longer gaps
    cost one more query for the pods concerned)."""
    price_split: str = "0.95,0.031611,0.004237"
    """Weights ``gpu,cpu,memory`` (USD per GPU-, core-, GiB-hour) that split a node's price among its
    resources in proportion to capacity x weight; default: OpenCost's default rates."""
    query_step_s: float = 5.0
    """Resolution of the Prometheus range queries of one accounting run."""
    default_gpu_hourly_usd: str = "4.00"
    """Per-GPU hourly price of a node nothing is known about (flagged as fallback), decimal string."""
    state_configmap: str = ""
    """``namespace/name`` of the ConfigMap (key ``state.json``) keeping node cost totals and how far they are
    accounted, so an operator restart resumes there and its counters neither reset nor lose a window;
    empty: kept in memory only."""
    custom_prices_configmap: str = ""
    """``namespace/name`` of a ConfigMap whose key ``prices.csv`` holds custom prices; empty: none."""
    live_providers: str = ""
    """Comma-separated live price providers to use (``azure``); empty: catalog only."""
    live_azure_url: str = AZURE_URL
    """The Azure Retail Prices API endpoint (a mirror or proxy where the cluster has no direct egress)."""
    live_cache_dir: str = "/var/cache/statictrain/prices"
    """Directory keeping the last live quotes, used (flagged stale) when the provider is unreachable."""
    live_refresh_s: float = 21600.0
    """Seconds between live price refreshes."""
    live_max_age_h: float = 24.0
    """Hours after which live quotes are flagged stale."""
    pue: float = 1.0
    """Power usage effectiveness of the data centres: a job's carbon is its GPU energy x this x its nodes' grid
    intensity. 1.0 counts the GPUs' own energy only; set your provider's or data centre's published figure
    (hyperscalers publish fleet averages of about 1.1-1.2)."""
    grid_intensity: str = ""
    """Grid carbon intensity per region, ``region=gCO2e-per-kWh,...`` (e.g. ``us-east-1=380``); wins over the
    shipped table of public annual averages, loses to a node's own annotation or label
    ``statictrain.io/grid-intensity-gco2e-per-kwh``."""
    enabled: bool = True
    """Run the node price annotator and the accounting loop."""
    dcgm: DcgmSettings = field(default_factory=DcgmSettings)
    """Where GPU utilization comes from (the sidecars, dcgm-exporter): ``STATICTRAIN_DCGM_*``."""

    def __post_init__(self) -> None:
        if not isinstance(self.dcgm, DcgmSettings):
            raise ValueError("STATICTRAIN_COST_DCGM is not a setting: use the STATICTRAIN_DCGM_* variables")
        if min(self.interval_s, self.query_step_s, self.max_gap_s, self.max_catchup_s) <= 0:
            raise ValueError(
                "STATICTRAIN_COST_INTERVAL_S, _QUERY_STEP_S, _MAX_GAP_S and _MAX_CATCHUP_S must be positive"
            )
        if not 0 <= self.idle_threshold <= 1:
            raise ValueError(f"STATICTRAIN_COST_IDLE_THRESHOLD must be within 0..1, got {self.idle_threshold}")
        parse_usd(self.default_gpu_hourly_usd, what="STATICTRAIN_COST_DEFAULT_GPU_HOURLY_USD", allow_zero=False)
        _ = self.weights  # validates STATICTRAIN_COST_PRICE_SPLIT
        if self.counter_lookback_s <= 0 or self.usage_grace_s < 0:
            raise ValueError(
                "STATICTRAIN_COST_COUNTER_LOOKBACK_S must be positive and STATICTRAIN_COST_USAGE_GRACE_S not negative"
            )
        if not 1.0 <= self.pue <= 3.0:
            raise ValueError(f"STATICTRAIN_COST_PUE must be within 1.0..3.0, got {self.pue}")
        _ = self.carbon  # validates STATICTRAIN_COST_GRID_INTENSITY
        for var, ref in (
            ("CUSTOM_PRICES_CONFIGMAP", self.custom_prices_configmap),
            ("STATE_CONFIGMAP", self.state_configmap),
        ):
            if ref and ref.count("/") != 1:
                raise ValueError(f"STATICTRAIN_COST_{var} must be written namespace/name")

    @property
    def weights(self) -> ResourcePrices:
        parts = [p.strip() for p in self.price_split.split(",")]
        if len(parts) != 3:
            raise ValueError(f"STATICTRAIN_COST_PRICE_SPLIT {self.price_split!r} must be three decimals gpu,cpu,memory")
        g, c, m = (parse_usd(p, what="STATICTRAIN_COST_PRICE_SPLIT part") for p in parts)
        return ResourcePrices(gpu=g, cpu=c, memory=m)

    @property
    def carbon(self) -> GridIntensity:
        """Where nodes' grid intensities come from: annotation or label, this setting, the shipped table."""
        return GridIntensity(parse_overrides(self.grid_intensity), shipped_table())

    @property
    def default_gpu_price(self) -> Decimal:
        return parse_usd(self.default_gpu_hourly_usd)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CostSettings:
        """Settings from ``STATICTRAIN_COST_*`` (Prometheus URL: STATICTRAIN_PROMETHEUS_URL, else the part's own
        variable); a bad value raises ValueError naming the variable."""
        env = os.environ if env is None else env
        filled = envconfig.fill(cls, ENV_PREFIX, env, {"prometheus_url": envconfig.PROMETHEUS_URL_ENV})
        return replace(filled, dcgm=DcgmSettings.from_env(env))
