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

import dataclasses
import json
import logging
import os
import sys
from collections.abc import Mapping

import uvloop
from aiohttp import web
from statictrain import redact
from statictrain.throughput import MEASURED, JobThroughput

from ..main import make_app
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
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{TRUTH_ENV}: not JSON ({e}); give {{class: {{family: throughput}}}}") from None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ValueError(f"{TRUTH_ENV}: expected a JSON object {{class: {{family: throughput}}}}")
    return {str(c): {str(f): float(v) for f, v in fams.items()} for c, fams in raw.items()}


def make_oracle_app(settings: ExtenderSettings, truth: Mapping[str, Mapping[str, float]]) -> web.Application:
    """main.make_app with its state seeded with the truth, and no step-time refresher."""
    return make_app(dataclasses.replace(settings, prometheus_url=""), oracle_state(truth))


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
