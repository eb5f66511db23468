"""kopf registration of the anomaly loop. Imported by the operator's main.py.

* ``@kopf.on.startup``: build the Evaluator (settings from STATICTRAIN_ANOMALY_*,
  Prometheus reader, API clients, metrics) into kopf's memo;
* ``@kopf.timer`` on StaticTrainingJobs: every ``STATICTRAIN_ANOMALY_INTERVAL_S``
  seconds, evaluate the job in a worker thread (Prophet fits are CPU-bound).

The handlers only translate; the work is in evaluate.Evaluator.
"""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import UTC, datetime
from typing import Any

import kopf
from prometheus_client import REGISTRY
from statictrain import labels

from statictrain_operator.anomaly.evaluate import Evaluator
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.namespaces import NamespaceEvaluator
from statictrain_operator.anomaly.settings import ENV_PREFIX, AnomalySettings
from statictrain_operator.cost.prom import HttpPrometheus
from statictrain_operator.kube.clients import build
from statictrain_operator.kube.remediate import KubeJobApi, KubeNamespaceEvents

log = logging.getLogger(__name__)


def _now() -> datetime:
    return datetime.now(UTC)


def _interval() -> float:
    # kopf fixes a timer's interval at registration; the settings object validates the same variable.
    return AnomalySettings.from_env({k: v for k, v in os.environ.items() if k == ENV_PREFIX + "INTERVAL_S"}).interval_s


@kopf.on.startup()
async def anomaly_startup(memo: kopf.Memo, **_: Any) -> None:
    settings = AnomalySettings.from_env()
    if not settings.enabled:
        return
    clients = await asyncio.to_thread(build, os.environ.get("KUBECONFIG"))
    prom = HttpPrometheus(settings.prometheus_url, settings.query_timeout_s)
    metrics = AnomalyMetrics(REGISTRY)
    memo["anomaly_evaluator"] = Evaluator(settings, prom, KubeJobApi(clients.custom, clients.core), metrics, _now)
    memo["anomaly_namespaces"] = NamespaceEvaluator(settings, prom, KubeNamespaceEvents(clients.core), metrics, _now)


@kopf.timer(
    labels.GROUP,
    labels.VERSION,
    labels.PLURAL,
    interval=_interval(),
    initial_delay=_interval() / 4,
    id="anomaly",
)
async def anomaly_timer(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    evaluator: Evaluator | None = memo.get("anomaly_evaluator")
    if evaluator is None:
        return
    phase = (body.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return
    job = {"metadata": dict(body.metadata), "spec": dict(body.spec), "status": dict(body.status)}
    outcome = await asyncio.to_thread(evaluator.evaluate, job)
    namespaces: NamespaceEvaluator | None = memo.get("anomaly_namespaces")
    if namespaces is not None:
        await asyncio.to_thread(namespaces.maybe_evaluate, body.metadata.namespace or "")
    reason = outcome.decision.reason if outcome.decision else "RemediationOff"
    log.info(
        "anomaly check %s/%s: %s; new anomalies %s; actions %s",
        body.metadata.namespace,
        body.metadata.name,
        reason,
        outcome.new_anomalies,
        outcome.applied,
    )
