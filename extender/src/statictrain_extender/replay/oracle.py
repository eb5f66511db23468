"""The replay's oracle arm: the extender of arm e, its table replaced by the scenario's truth.

Arm o scores exactly as arm e does (same weights, same cost term), except that each
workload class's relative throughput per GPU family is what the scenario really runs
the class's pods at (replay/truth.py), not ``core/.../throughput.csv``: the best a
speed-learning extender could do once it knew everything. Learned minus oracle, in
the same run, is the learning arm's regret.

``oracle_throughput`` is the pure part (what the oracle's state is seeded with);
``python -m statictrain_extender.replay.oracle`` runs the extender with it, the truth
given as JSON ``{class: {family: relative throughput}}`` in ``STATICTRAIN_REPLAY_ORACLE_TRUTH``
(every other setting as for ``statictrain-extender``). It never reads step times.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping

import uvloop
from aiohttp import web
from prometheus_client import CollectorRegistry
from statictrain import redact
from statictrain.throughput import MEASURED, JobThroughput

from ..kubewatch import api_client, start_event_writer, start_watches
from ..server import build_app
from ..settings import ExtenderSettings, SettingsError
from ..speeds import ClassKey, class_key
from ..state import ClusterState

__all__ = ["TRUTH_ENV", "main", "make_oracle_app", "oracle_state", "oracle_throughput", "parse_truth"]

TRUTH_ENV = "STATICTRAIN_REPLAY_ORACLE_TRUTH"
log = logging.getLogger("statictrain_extender.replay.oracle")


def oracle_throughput(truth: Mapping[str, Mapping[str, float]]) -> dict[ClassKey, JobThroughput]:
    """Class key -> the class's true throughput per family, as if measured everywhere."""
    out: dict[ClassKey, JobThroughput] = {}
    for workload_class, families in truth.items():
        relative = {f: float(v) for f, v in families.items()}
        bad = sorted(f for f, v in relative.items() if not v > 0)
        if bad:
            raise ValueError(f"oracle truth of class {workload_class!r}: throughput must be > 0 for {bad}")
        out[class_key("", "", workload_class)] = JobThroughput(relative, dict.fromkeys(relative, MEASURED))
    return out


def oracle_state(truth: Mapping[str, Mapping[str, float]], unknown_throughput: float = 0.1) -> ClusterState:
    """A cluster state whose every workload class of ``truth`` is scored with its true speeds."""
    state = ClusterState(unknown_throughput=unknown_throughput)
    state._throughput.update(oracle_throughput(truth))  # what set_step_seconds would leave there, once known
    return state


def parse_truth(text: str) -> dict[str, dict[str, float]]:
    raw = json.loads(text)
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ValueError(f"{TRUTH_ENV}: expected a JSON object {{class: {{family: throughput}}}}")
    return {str(c): {str(f): float(v) for f, v in fams.items()} for c, fams in raw.items()}


def make_oracle_app(settings: ExtenderSettings, truth: Mapping[str, Mapping[str, float]]) -> web.Application:
    """main.make_app without the step-time refresher, its state seeded with the truth."""
    state = oracle_state(truth)
    app = build_app(
        state,
        settings.scheduler_names,
        settings.weights,
        CollectorRegistry(),
        client_certificate_required=bool(settings.tls_client_ca_file),
    )

    async def background(app: web.Application) -> AsyncIterator[None]:
        api = api_client(settings.kubeconfig)
        stop = start_watches(api, state, asyncio.get_running_loop(), settings.watch_pods)
        start_event_writer(api, state, stop)
        yield
        stop.set()

    app.cleanup_ctx.append(background)
    return app


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    redact.install()
    try:
        settings = ExtenderSettings.from_env()
        truth = parse_truth(os.environ.get(TRUTH_ENV, ""))
        oracle_throughput(truth)  # fail here, not on the first request
    except (SettingsError, ValueError) as err:
        print(f"statictrain oracle extender: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    log.info(
        "oracle extender on %s:%d for %s, classes %s",
        settings.host,
        settings.port,
        sorted(settings.scheduler_names),
        sorted(truth),
    )
    web.run_app(
        make_oracle_app(settings, truth),
        host=settings.host,
        port=settings.port,
        access_log=None,
        print=None,
        loop=uvloop.new_event_loop(),
    )


if __name__ == "__main__":
    main()
