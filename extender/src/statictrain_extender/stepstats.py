"""Jobs' measured step times per GPU model, read from Prometheus in the background.

The query is built here and nowhere else, from :mod:`statictrain.promql`
selectors. Request handlers never wait for Prometheus: they read the table
the last refresh left in the :class:`~statictrain_extender.state.ClusterState`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp
import orjson
from statictrain import metrics, promql
from statictrain.redact import redact, safe_url

from .gpus import gpu_family
from .speeds import REJECT_NOT_A_NUMBER, REJECT_NOT_POSITIVE, REJECT_UNLABELLED
from .state import ClusterState, JobKey

__all__ = ["parse_step_samples", "parse_step_seconds", "refresh_forever", "refresh_once", "step_seconds_query"]

log = logging.getLogger(__name__)


def step_seconds_query(window_seconds: float) -> str:
    """Mean step seconds per (namespace, job_name, gpu_model) over the window.

    Train metrics carry the pod but not the GPU model; GPU metrics carry both,
    so the model is joined in on ``pod_uid``.
    """
    window = promql.range_duration(window_seconds)
    step_sum = promql.selector(f"{metrics.TRAIN_STEP_SECONDS}_sum")
    step_count = promql.selector(f"{metrics.TRAIN_STEP_SECONDS}_count")
    gpu = promql.selector(metrics.GPU_UTILIZATION_RATIO)
    return (
        "avg by (namespace, job_name, gpu_model) ("
        f"(rate({step_sum}[{window}]) / rate({step_count}[{window}]))"
        " * on (pod_uid) group_left (gpu_model)"
        f" group by (pod_uid, gpu_model) ({gpu})"
        ")"
    )


def parse_step_samples(
    result: Sequence[Mapping[str, Any]],
) -> tuple[dict[JobKey, dict[str, float]], dict[str, int]]:
    """An instant-vector result as {(namespace, job): {gpu family: seconds}}, and the samples skipped by reason:
    ``unlabelled`` (no job, namespace or GPU model: a pod without a GPU has none), ``not_a_number`` (not a
    finite number), ``not_positive`` (zero or negative seconds) (pure)."""
    table: dict[JobKey, dict[str, float]] = {}
    skipped: dict[str, int] = {}
    for sample in result:
        labels = sample.get("metric") if isinstance(sample, Mapping) else None
        labels = labels if isinstance(labels, Mapping) else {}
        value = sample.get("value") if isinstance(sample, Mapping) else None
        job, namespace, model = labels.get("job_name"), labels.get("namespace"), labels.get("gpu_model")
        reason = None
        if not (job and namespace and model):
            reason = REJECT_UNLABELLED
        else:
            try:
                seconds = float(value[1]) if isinstance(value, list) and len(value) == 2 else math.nan
            except (TypeError, ValueError):
                seconds = math.nan
            if not math.isfinite(seconds):
                reason = REJECT_NOT_A_NUMBER
            elif seconds <= 0:
                reason = REJECT_NOT_POSITIVE
            else:
                table.setdefault((namespace, job), {})[gpu_family(model)] = seconds
        if reason is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
    return table, skipped


def parse_step_seconds(result: Sequence[Mapping[str, Any]]) -> dict[JobKey, dict[str, float]]:
    """parse_step_samples's table alone (pure)."""
    return parse_step_samples(result)[0]


async def refresh_once(
    session: aiohttp.ClientSession, prometheus_url: str, window_seconds: float, state: ClusterState
) -> bool:
    """One refresh; on any failure keep the previous table and return False."""
    url = f"{prometheus_url}/api/v1/query"
    try:
        async with session.get(url, params={"query": step_seconds_query(window_seconds)}) as resp:
            body = orjson.loads(await resp.read())
        if resp.status != 200 or body.get("status") != "success":
            raise ValueError(f"HTTP {resp.status}: {body.get('error', body)!r}"[:300])
        table, skipped = parse_step_samples(body["data"]["result"])
        state.set_step_seconds(table, skipped)
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, orjson.JSONDecodeError) as err:
        log.warning(
            "step-time refresh from %s failed, keeping the last table: %s", safe_url(prometheus_url), redact(str(err))
        )
        state.prometheus_ok = False
        return False
    state.prometheus_ok = True
    return True


async def refresh_forever(
    session: aiohttp.ClientSession,
    *,
    prometheus_url: str,
    window_seconds: float,
    interval_seconds: float,
    state: ClusterState,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Refresh every ``interval_seconds`` until cancelled."""
    while True:
        await refresh_once(session, prometheus_url, window_seconds, state)
        await sleep(interval_seconds)
