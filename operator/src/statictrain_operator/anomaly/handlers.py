"""kopf registration of the anomaly loop. Imported by the operator's main.py.

* ``@kopf.on.startup``: build the Evaluator (settings from main's Runtime, read
  before kopf starts; Prometheus reader; the Kube port; metrics) into kopf's memo and start a
  background task that, every ``STATICTRAIN_ANOMALY_INTERVAL_S`` seconds,
  evaluates each running job kopf's ``trainingjobs_index`` holds (the judging,
  Prophet fits and Prometheus reads, in a worker thread; the writes on kopf's
  loop); stopped on ``@kopf.on.cleanup``.

A task over the index, not a ``@kopf.timer``: kopf puts a finalizer on every
object a timer serves, so deleting a job (or its namespace) while the operator
is down would hang. The handlers only translate; the work is in evaluate.Evaluator.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

import kopf
from prometheus_client import REGISTRY
from statictrain import api

from statictrain_operator import loops, runtime
from statictrain_operator.anomaly.cluster import ClusterJobApi, ClusterNamespaceEvents
from statictrain_operator.anomaly.evaluate import Evaluator
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.namespaces import NamespaceEvaluator
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.prom import HttpPrometheus

__all__ = ["anomaly_cleanup", "anomaly_startup", "evaluate_all", "running_jobs"]

log = logging.getLogger(__name__)


def running_jobs(index: Mapping[Any, Any]) -> list[dict[str, Any]]:
    """Jobs (metadata, spec, status) of the index that have not finished, in a stable order."""
    return [j for j in runtime.job_views(index) if j["status"].get("phase") not in api.FINISHED_PHASES]


async def evaluate_all(evaluator: Evaluator, namespaces: NamespaceEvaluator, index: Mapping[Any, Any]) -> None:
    """One pass: every running job, then the namespace-level checks of their namespaces."""
    for job in running_jobs(index):
        meta = job["metadata"]
        try:
            outcome = await evaluator.evaluate(job)
        except Exception:
            log.exception("anomaly check %s/%s failed; retrying next interval", meta["namespace"], meta["name"])
            continue
        reason = outcome.decision.reason if outcome.decision else "RemediationOff"
        log.info(
            "anomaly check %s/%s: %s; new anomalies %s; actions %s",
            meta["namespace"],
            meta["name"],
            reason,
            outcome.new_anomalies,
            outcome.applied,
        )
        try:
            await namespaces.maybe_evaluate(meta["namespace"] or "")
        except Exception:
            log.exception("namespace anomaly check of %s failed", meta["namespace"])


@kopf.on.startup()
async def anomaly_startup(memo: kopf.Memo, **kwargs: Any) -> None:
    rt = runtime.of(memo)
    settings: AnomalySettings = rt.parts["anomaly"]
    prom = HttpPrometheus(settings.prometheus_url, settings.query_timeout_s)
    metrics = AnomalyMetrics(REGISTRY)
    evaluator = Evaluator(settings, prom, ClusterJobApi(rt.kube, rt.clock), metrics, rt.clock)
    namespaces = NamespaceEvaluator(settings, prom, ClusterNamespaceEvents(rt.kube), metrics, rt.clock)
    memo["anomaly_evaluator"] = evaluator
    memo["anomaly_namespaces"] = namespaces
    stop = asyncio.Event()
    work = partial(evaluate_all, evaluator, namespaces, kwargs["trainingjobs_index"])
    first_delay = settings.interval_s / 4
    loops.start_periodic(memo, "anomaly", loops.periodic(work, settings.interval_s, stop, first_delay), stop)


@kopf.on.cleanup()
async def anomaly_cleanup(memo: kopf.Memo, **_: Any) -> None:
    await loops.stop_periodic(memo, "anomaly")
