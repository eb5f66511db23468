"""kopf registration of the cost part: node price annotator and the accounting timer.

Import this module (the operator's main.py does) to register:

* ``@kopf.on.event`` on Nodes: price a GPU node whenever it appears or its
  labels change; patch only when the annotations differ (idempotent);
* ``@kopf.on.startup``: a background task that re-prices all nodes, refreshes
  every job's status.progress and status.compile from Prometheus, and runs
  one accounting pass every ``STATICTRAIN_COST_INTERVAL_S`` seconds, stopped on
  ``@kopf.on.cleanup``.

Handlers only translate events into calls of the pure modules and the kube/ layer.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import IO, Any, cast

import kopf
from prometheus_client import REGISTRY, CollectorRegistry
from statictrain import labels
from statictrain.pricing import (
    Catalog,
    CustomPrice,
    FallbackPolicy,
    LiveQuotes,
    parse_catalog,
    parse_custom_prices,
    shipped_catalog_text,
)

from statictrain_operator import loops
from statictrain_operator.cost.accounting import Accountant
from statictrain_operator.cost.annotator import node_facts, plan_node_patches
from statictrain_operator.cost.exporter import CostMetrics
from statictrain_operator.cost.live_prices import RefreshSchedule, load, refresh_azure
from statictrain_operator.cost.progress_sync import ProgressSync
from statictrain_operator.cost.prom import HttpPrometheus
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.kube.clients import Clients, build
from statictrain_operator.kube.costs import KubeCostClient, read_configmap_key
from statictrain_operator.kube.nodes import list_nodes, patch_node_annotations

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


def _urlopen(url: str) -> IO[bytes]:
    return cast(IO[bytes], urllib.request.urlopen(url, timeout=30))


class CostRuntime:
    """What the handlers share, built once at startup and kept in kopf's memo."""

    def __init__(
        self, settings: CostSettings, clients: Clients | None = None, registry: CollectorRegistry = REGISTRY
    ) -> None:
        self.settings = settings
        clients = clients or build()
        self.core = clients.core
        self.catalog: Catalog = parse_catalog(shipped_catalog_text())
        self.policy = FallbackPolicy(
            default_gpu_hourly_usd=settings.default_gpu_price,
            live_max_age=timedelta(hours=settings.live_max_age_h),
        )
        self._custom: list[CustomPrice] = []
        self._live: LiveQuotes | None = load("azure", Path(settings.live_cache_dir))  # the last known, at once
        self._live_schedule = RefreshSchedule(every_s=settings.live_refresh_s)
        self.metrics = CostMetrics(registry)
        kube = KubeCostClient(clients, _now, settings.state_configmap)
        prom = HttpPrometheus(settings.prometheus_url)
        # status.progress and status.compile from the sidecars' metrics, just before each accounting pass.
        self.progress = ProgressSync(kube, prom, max(60.0, 2 * settings.interval_s), _now)
        self.accountant = Accountant(
            kube=kube,
            prom=prom,
            catalog=self.catalog,
            settings=settings,
            metrics=self.metrics,
            clock=_now,
        )

    def refresh_prices(self, nodes: list[dict[str, Any]]) -> None:
        """Re-read custom prices and, when due, live quotes; node events reuse what this keeps."""
        ref = self.settings.custom_prices_configmap
        if ref:
            ns, name = ref.split("/")
            text = read_configmap_key(self.core, ns, name, "prices.csv")
            try:
                self._custom = parse_custom_prices(text) if text else []
            except ValueError as e:
                log.warning("custom prices in ConfigMap %s ignored: %s", ref, e)
        now = _now()
        if "azure" in {p.strip() for p in self.settings.live_providers.split(",")}:
            facts = [node_facts(n) for n in nodes]
            skus = sorted(
                {f.instance_type for f in facts if f.instance_type and f.instance_type.startswith("Standard_")}
            )
            regions = sorted({f.region for f in facts if f.region and f.instance_type in skus})
            if skus and self._live_schedule.due(now):
                quotes, fresh = refresh_azure(_urlopen, regions, skus, now, Path(self.settings.live_cache_dir))
                self._live = quotes or self._live
                self._live_schedule = self._live_schedule.after(fresh, now)

    def annotate(self, nodes: list[dict[str, Any]]) -> int:
        now = _now()
        live = [self._live] if self._live is not None else []
        patches = plan_node_patches(nodes, self.catalog, now=now, custom=self._custom, live=live, policy=self.policy)
        for name, patch in patches.items():
            patch_node_annotations(self.core, name, patch)
        for node in nodes:
            facts = node_facts(node)
            ann = (node.get("metadata") or {}).get("annotations") or {}
            merged = {**ann, **{k: v for k, v in patches.get(facts.name, {}).items() if v is not None}}
            hourly = merged.get(labels.HOURLY_COST)
            if hourly:
                source = merged.get(labels.PRICE_SOURCE, "")
                self.metrics.set_node_hourly(
                    facts.name, facts.instance_type or "", facts.capacity_type, source, float(hourly)
                )
        return len(patches)

    def tick(self) -> None:
        nodes = list_nodes(self.core)
        self.refresh_prices(nodes)
        self.annotate(nodes)
        try:
            self.progress.run_once()
        except Exception:
            log.exception("progress refresh failed; retrying next interval")
        try:
            self.accountant.run_once()
        except Exception:
            self.metrics.run_failed()
            raise


async def _tick(rt: CostRuntime) -> None:
    try:
        await asyncio.to_thread(rt.tick)
    except Exception:
        log.exception("cost accounting run failed; retrying next interval")


@kopf.on.startup()
async def cost_startup(memo: kopf.Memo, **_: Any) -> None:
    settings = CostSettings.from_env()
    if not settings.enabled:
        return
    main_runtime = memo.get("runtime")  # main.py's Runtime: reuse its API clients (same cluster, same pool)
    shared: Clients | None = getattr(main_runtime, "clients", None)
    rt = await asyncio.to_thread(CostRuntime, settings, shared)
    memo["cost_runtime"] = rt
    stop = asyncio.Event()
    loops.start_periodic(memo, "cost", loops.periodic(partial(_tick, rt), settings.interval_s, stop), stop)


@kopf.on.cleanup()
async def cost_cleanup(memo: kopf.Memo, **_: Any) -> None:
    await loops.stop_periodic(memo, "cost")


@kopf.on.event("", "v1", "nodes")
async def price_node_event(body: kopf.Body, type: str | None, memo: kopf.Memo, **_: Any) -> None:
    rt = memo.get("cost_runtime")
    if rt is None or type == "DELETED":
        return
    await asyncio.to_thread(rt.annotate, [dict(body)])
