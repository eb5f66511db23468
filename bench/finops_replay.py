"""Work-conserving trace replay: $ per unit of work of five scheduling arms side by side, at 50/70/90 % GPU allocation.

    .venv/bin/python bench/finops_replay.py --trace ../shared/data/traces/alibaba-gpu-v2023

One local cluster (STATICTRAIN_TEST_CLUSTER=<name> to attach, else one is started
without a real node), one kube-scheduler with one profile per arm, each arm on its
own copy of a stratified sample of the trace's GPU nodes:

  a  stock profile                      b  tuned profile (MostAllocated, score all nodes)
  c  b + extender, packing only         d  b + extender cost term, uniform speed
  e  b + extender cost term with per-model speed (core/src/statictrain/data/throughput.csv)

Every pod carries work (its trace run time on an A100-class GPU) and is deleted
when that work is done on the GPU it landed on; services (LS) keep their lifetimes,
say so to the extender (annotation gpu-throughput: uniform, in every arm) and are
reported apart. Arrivals are compressed so that the demand is 50/70/90 %
of the GPU capacity. Each load runs in ``--reps`` held-out time windows; the
extender's weights for d and e are chosen first by cross-validation on earlier,
disjoint windows (arms b and one candidate per weight setting, at 70 %).

Writes bench/results/finops_replay.json (see the issue #14 keys).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from extender_throughput import start_extender, wait  # bench/ sibling module
from kubernetes import client
from statictrain import labels
from statictrain.pricing import parse_catalog, shipped_catalog_text
from statictrain.throughput import DEFAULT_RELATIVE_THROUGHPUT
from statictrain_extender.gpus import gpu_family
from statictrain_extender.kubewatch import api_client
from statictrain_extender.replay.arms import Arm, learning_arms, scheduler_config, standard_arms
from statictrain_extender.replay.curve import batch_cost_per_work_by_slice, source_counts_by_slice
from statictrain_extender.replay.manifests import REPLAY_LABEL, node_manifest, node_name, pod_manifest
from statictrain_extender.replay.oracle import TRUTH_ENV
from statictrain_extender.replay.prices import CATALOG_MODEL, gpu_product, price_nodes
from statictrain_extender.replay.runner import delete_nodes, ensure_nodes
from statictrain_extender.replay.sidebyside import SEGMENT_LABEL, ArmRun, run_segment
from statictrain_extender.replay.steptimes import STEP_REFERENCE_S, StepExporter
from statictrain_extender.replay.trace import TracePod, parse_nodes, parse_pods
from statictrain_extender.replay.truth import CLASSES, SCENARIOS, truth, workload_class_of
from statictrain_extender.replay.workload import (
    REFERENCE_FAMILY,
    compression_for,
    eligible_pods,
    stratified_nodes,
    tasks_for,
)
from statictrain_extender.replay.workreport import NodeFacts, Placement, arm_figures, quantile, reprice
from statictrain_extender.scoring import Weights
from statictrain_localcluster.cluster import LocalCluster, build_binaries

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "finops_replay.json"
NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"
PRICE_VARIANTS: dict[str, dict[str, str]] = {
    "g2_g3_as_v100_32gb": {**CATALOG_MODEL, "G2": "V100-32GB", "G3": "V100-32GB"},
    "g2_a100_80gb_g3_h100_80gb": {**CATALOG_MODEL, "G2": "A100-80GB", "G3": "H100-80GB"},
}
EQUAL_GPU_HOUR_USD = 2.0  # any constant: ratios do not depend on it
log = logging.getLogger("finops_replay")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def windows(pods: Sequence[TracePod], count: int) -> list[int]:
    """``count`` equal, disjoint slots from the 10th percentile of creation times to the last; their starts."""
    created = sorted(p.creation_s for p in pods)
    lo, hi = created[len(created) // 10], created[-1]
    slot = (hi - lo) / count
    return [int(lo + i * slot) for i in range(count)]


class Replay:
    """The cluster-side pieces shared by every phase: node copies ("slots") and their facts."""

    def __init__(self, args: argparse.Namespace, core: client.CoreV1Api, cluster: LocalCluster, workdir: Path):
        self.args, self.core, self.cluster, self.workdir = args, core, cluster, workdir
        self.run_id = f"fr{os.getpid()}"
        nodes_file = args.nodes or args.trace / NODE_FILE
        pods_file = args.pods or args.trace / POD_FILE
        self.skipped: dict[str, int] = {}
        pods = parse_pods(pods_file.read_text(), str(pods_file), skipped=self.skipped)
        self.pods = eligible_pods(pods, self.skipped)
        self.inventory = stratified_nodes(parse_nodes(nodes_file.read_text(), str(nodes_file)), args.fraction)
        catalog = parse_catalog(args.catalog.read_text() if args.catalog else shipped_catalog_text())
        self.prices = price_nodes(self.inventory, catalog)  # an unmapped GPU model stops here, named
        self.variant_prices = {k: price_nodes(self.inventory, catalog, m) for k, m in PRICE_VARIANTS.items()}
        table = dict(DEFAULT_RELATIVE_THROUGHPUT)
        if args.throughput_scale_old != 1.0:  # sensitivity: the world is not what the table says
            table = {f: v * args.throughput_scale_old if v < 0.5 else v for f, v in table.items()}
        self.truth = truth(args.scenario, table)
        self.table = self.truth["compute"]
        self.families = {n.name: gpu_family(gpu_product(n.model)) for n in self.inventory}
        self.unknown_families = sorted({f for f in self.families.values() if f not in table})
        self.exporter: StepExporter | None = None
        self.capacity_milli = sum(n.gpus * 1000 for n in self.inventory)
        eval_slots = 5  # learning: a, b, e, l, o; standard: a..e
        self.slots = eval_slots if args.weights else max(eval_slots, 1 + len(args.cv_weights))
        self.files = (nodes_file, pods_file)

    def slot_prefix(self, slot: int) -> str:
        return f"{self.run_id}-s{slot}"

    def facts(self, slot: int, prices: dict[str, Any] | None = None) -> dict[str, NodeFacts]:
        prices = prices or self.prices
        out = {}
        for n in self.inventory:
            family = self.families[n.name]
            unknown = Weights().unknown_throughput
            out[node_name(self.slot_prefix(slot), n)] = NodeFacts(
                family,
                n.gpus,
                float(prices[n.name].hourly_usd),
                self.table.get(family, unknown),
                {c: self.truth[c].get(family, unknown) for c in CLASSES},
            )
        return out

    def create_nodes(self) -> None:
        for slot in range(self.slots):
            prefix = self.slot_prefix(slot)
            manifests = [node_manifest(prefix, n, self.prices[n.name], prefix) for n in self.inventory]
            ensure_nodes(self.core, manifests, label_selector=f"{REPLAY_LABEL}={prefix}", timeout_s=600)

    def delete_nodes(self) -> None:
        for slot in range(self.slots):
            delete_nodes(self.core, f"{REPLAY_LABEL}={self.slot_prefix(slot)}")

    # --- one phase: a set of arms served by one kube-scheduler and their extenders
    def phase(self, name: str, arms: Sequence[Arm], segments: Sequence[tuple[str, int, float]]) -> list[dict[str, Any]]:
        procs: list[subprocess.Popen[bytes]] = []
        logs = []
        urls: dict[str, str] = {}
        self.learn_bases: dict[str, str] = {}
        target = f"{self.run_id}-{name}-steps"
        if any(a.learn for a in arms):
            gpu_models = {
                node_name(self.slot_prefix(slot), n): gpu_product(n.model)
                for slot in range(self.slots)
                for n in self.inventory
            }
            self.exporter = StepExporter(gpu_models, self.args.speedup)
            self.cluster.add_scrape_target(target, self.exporter.address)
        try:
            for key in sorted({a.extender_key for a in arms if a.extender_key}):
                arm0 = next(a for a in arms if a.extender_key == key)
                weights = arm0.weights
                assert weights is not None
                names = ",".join(a.scheduler_name for a in arms if a.extender_key == key)
                env = {
                    "STATICTRAIN_EXTENDER_WEIGHT_COST": str(weights.cost),
                    "STATICTRAIN_EXTENDER_WEIGHT_PACK": str(weights.pack),
                    "STATICTRAIN_PROMETHEUS_URL": "",
                }
                if arm0.learn:  # the production feedback path: step times through the cluster's Prometheus
                    env.update(
                        {
                            "STATICTRAIN_PROMETHEUS_URL": self.cluster.prometheus_url,
                            "STATICTRAIN_EXTENDER_REFRESH_SECONDS": str(self.args.refresh_s),
                            "STATICTRAIN_EXTENDER_STEP_WINDOW_SECONDS": str(self.args.step_window_s),
                            "STATICTRAIN_EXTENDER_PRIOR_SAMPLES": str(self.args.prior_samples),
                        }
                    )
                log_path = self.workdir / f"extender-{name}-{key}.log"
                if arm0.oracle:  # e's extender, scoring with the truth the pods run at
                    env[TRUTH_ENV] = json.dumps(self.truth)
                    oracle = [sys.executable, "-m", "statictrain_extender.replay.oracle"]
                    proc, base = start_extender(self.cluster.kubeconfig, names, log_path, env, oracle)
                else:
                    proc, base = start_extender(self.cluster.kubeconfig, names, log_path, env)
                procs.append(proc)
                urls[key] = f"{base}/scheduler"
                if arm0.learn:
                    self.learn_bases[arm0.key] = base
                wait(_healthy(base), 120, f"extender {key}")
            repo_cfg = yaml.safe_load((REPO / "deploy/scheduler/kube-scheduler-config.yaml").read_text())
            tuned = next(p for p in repo_cfg["profiles"] if p["schedulerName"] == "statictrain-scheduler")
            cfg_path = self.workdir / f"scheduler-{name}.yaml"
            cfg_path.write_text(yaml.safe_dump(scheduler_config(arms, tuned, urls, str(self.cluster.kubeconfig))))
            sched_log = (self.workdir / f"scheduler-{name}.log").open("wb")
            logs.append(sched_log)
            procs.append(
                subprocess.Popen(
                    [str(self.cluster.bin_dir / "kube-scheduler"), f"--config={cfg_path}", "--secure-port=0", "--v=1"],
                    stdout=sched_log,
                    stderr=sched_log,
                )
            )
            time.sleep(3)
            if procs[-1].poll() is not None:
                tail = (self.workdir / f"scheduler-{name}.log").read_text()[-2000:]
                raise RuntimeError(f"kube-scheduler exited ({procs[-1].returncode}): {tail}")
            done = []
            for label, start, load in segments:
                done.append(self.segment(name, arms, label, start, load))
                partial = self.args.out.with_name(self.args.out.stem + f".partial-{name}.json")
                partial.write_text(json.dumps(done, default=str) + "\n")  # survives an interrupted run
            return done
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(30)
            for f in logs:
                f.close()
            if self.exporter is not None:
                self.cluster.remove_scrape_target(target)
                self.exporter.close()
                self.exporter = None

    def segment(self, phase: str, arms: Sequence[Arm], label: str, start: int, load: float) -> dict[str, Any]:
        args = self.args
        k = compression_for(self.pods, start, args.length, self.capacity_milli, load)
        tasks = [
            t if t.service else replace(t, workload_class=workload_class_of(t.name))
            for t in tasks_for(self.pods, start, args.length, k)
        ]
        segment = f"{self.run_id}-{phase}-{label}".lower()
        runs = []
        for slot, arm in enumerate(arms):
            prefix = self.slot_prefix(slot)
            namespace = f"{segment}-{arm.key}"
            manifests = {}
            for t in tasks:
                m = pod_manifest(
                    t,
                    namespace=namespace,
                    scheduler_name=arm.scheduler_name,
                    replay_id=prefix,
                    uniform_throughput=arm.uniform or t.service,
                )
                m["metadata"]["labels"][SEGMENT_LABEL] = segment
                if arm.weights is not None and not (arm.uniform or t.service):  # a training job of its class
                    m["metadata"]["labels"][labels.JOB] = m["metadata"]["name"]
                    # --fresh-classes: arm l meets each window's classes for the first time (a cold start)
                    fresh = arm.learn and args.fresh_classes
                    m["metadata"]["labels"][labels.WORKLOAD_CLASS] = (
                        f"{t.workload_class}-{label}" if fresh else t.workload_class
                    )
                manifests[t.name] = m
            facts = self.facts(slot)
            throughput = {n: f.throughput for n, f in facts.items()}
            by_class = {c: {n: f.class_throughput[c] for n, f in facts.items()} for c in CLASSES}
            reporter = self.exporter if arm.learn else None
            runs.append(ArmRun(arm.key, namespace, manifests, throughput, by_class, reporter))
        log.info(
            "%s: %d tasks (%d prefilled), compression %.1f, load %.0f%%",
            segment,
            len(tasks),
            sum(t.prefilled for t in tasks),
            k,
            load * 100,
        )
        t0 = time.monotonic()
        samplers = {key: _CounterSampler(base) for key, base in self.learn_bases.items()}
        try:
            result = run_segment(
                self.core, segment=segment, arms=runs, tasks=tasks, speedup=args.speedup, length_s=args.length
            )
        finally:
            for sampler in samplers.values():
                sampler.stop()
        sources = {
            key: source_counts_by_slice(
                [((at - result.started_at) * args.speedup, counts) for at, counts in sampler.samples],
                length_s=args.length,
                slices=args.curve_slices,
            )
            for key, sampler in samplers.items()
        }
        if self.exporter is not None:
            self.exporter.clear()  # the segment's pods are gone
        learned = {key: _learned_figures(base) for key, base in self.learn_bases.items()}
        figures: dict[str, Any] = {}
        for slot, arm in enumerate(arms):
            placements = {
                name: Placement(b.node, max(b.at_s, 0.0), b.scheduled_delay_s)
                for name, b in result.bound[arm.key].items()
            }
            facts = self.facts(slot)
            fig = arm_figures(tasks, placements, facts, args.speedup, args.length)
            prices = {k2: self._variant(slot, v) for k2, v in self.variant_prices.items()}
            prices["equal_gpu_hour"] = {n: f.gpus * EQUAL_GPU_HOUR_USD for n, f in facts.items()}
            fig["cost_per_work_repriced"] = {
                k2: reprice(tasks, placements, facts, prices=p, speedup=args.speedup, length_s=args.length)
                for k2, p in prices.items()
            }
            fig["batch_cost_per_work_repriced"] = {
                k2: _batch_reprice(tasks, placements, facts, p, args) for k2, p in prices.items()
            }
            fig["batch_cost_per_work_by_slice"] = batch_cost_per_work_by_slice(
                tasks, placements, facts, speedup=args.speedup, length_s=args.length, slices=args.curve_slices
            )
            figures[arm.key] = fig
        return {
            "segment": segment,
            "label": label,
            "start_s": start,
            "load": load,
            "compression": k,
            "tasks": len(tasks),
            "wall_s": time.monotonic() - t0,
            "prefill_s": result.prefill_s,
            "max_lateness_s": result.max_lateness_s,
            "creation_lag_wall_s": _lags(result.created, tasks, args.speedup),
            "errors": len(result.errors),
            "error_samples": result.errors[:5],
            "arms": figures,
            "learned": learned,
            "sources_by_slice": sources,
        }

    def _variant(self, slot: int, prices: dict[str, Any]) -> dict[str, float]:
        return {node_name(self.slot_prefix(slot), n): float(prices[n.name].hourly_usd) for n in self.inventory}


def _batch_reprice(
    tasks: Any, placements: Any, facts: dict[str, NodeFacts], prices: dict[str, float], args: Any
) -> Any:
    repriced = {n: replace(f, hourly_usd=prices[n]) for n, f in facts.items()}
    return arm_figures(tasks, placements, repriced, args.speedup, args.length)["batch_cost_per_work"]


def _lags(created: dict[str, dict[str, float]], tasks: Any, speedup: float) -> dict[str, float | None]:
    """Actual - planned creation time (wall seconds) of the arriving pods, all arms together."""
    planned = {t.name: t.arrive_s / speedup for t in tasks if not t.prefilled}
    lags = [at - planned[n] for arm in created.values() for n, at in arm.items() if n in planned]
    return {"p50": quantile(lags, 0.5), "p99": quantile(lags, 0.99), "max": max(lags, default=None)}


def _learned_figures(base: str) -> dict[str, Any]:
    """What the learning extender shows on /metrics: learned and table throughput, samples, rejections."""
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError as err:
        return {"error": str(err)}
    out: dict[str, Any] = {}
    for line in text.splitlines():
        for metric in ("learned_throughput", "table_throughput", "learned_samples", "step_samples_rejected_total"):
            prefix = f"statictrain_extender_{metric}"
            if line.startswith(prefix + "{"):
                labels_part, value = line[len(prefix) :].rsplit(" ", 1)
                out.setdefault(metric, {})[labels_part] = float(value)
    return out


ESTIMATES_COUNTER = "statictrain_extender_throughput_estimates_total{source="


class _CounterSampler(threading.Thread):
    """Reads an extender's scorings per source from its /metrics every ``interval_s`` (monotonic time, counts)."""

    def __init__(self, base: str, interval_s: float = 0.25) -> None:
        super().__init__(name=f"estimates-{base}", daemon=True)
        self.base, self.interval_s = base, interval_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop_event = threading.Event()
        self._sample()  # the baseline, before the segment's first pod
        self.start()

    def _sample(self) -> None:
        try:
            with urllib.request.urlopen(f"{self.base}/metrics", timeout=5) as resp:
                text = resp.read().decode()
        except OSError as err:
            log.warning("estimates sample from %s failed: %s", self.base, err)
            return
        at = time.monotonic()
        counts = {}
        for line in text.splitlines():
            if line.startswith(ESTIMATES_COUNTER):
                labels_part, value = line[len(ESTIMATES_COUNTER) :].rsplit(" ", 1)
                counts[labels_part.strip('"}')] = float(value)
        self.samples.append((at, counts))

    def run(self) -> None:
        while not self._stop_event.wait(self.interval_s):
            self._sample()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)
        self._sample()


def _healthy(base: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    return check


def _differences(xs: Sequence[float | None], ys: Sequence[float | None]) -> list[float | None]:
    """x - y window by window (None where either is unknown)."""
    return [None if x is None or y is None else x - y for x, y in zip(xs, ys, strict=True)]


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _sd(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.stdev(known) if len(known) > 1 else None


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None:
        return None
    if den == 0:
        return 1.0 if num == 0 else None
    return num / den


def choose_weights(results: list[dict[str, Any]], candidates: dict[str, Weights]) -> tuple[str, dict[str, Any]]:
    """Lowest mean batch $/work over the training windows among candidates whose pending p99 stays within
    1.1x of b's and whose unscheduled count is not above b's (mean over windows); else the lowest $/work."""
    table: dict[str, Any] = {}
    for key, weights in candidates.items():
        cost = _mean([r["arms"][key]["batch_cost_per_work"] for r in results])
        p99 = _mean([_ratio(r["arms"][key]["pending_p99_s"], r["arms"]["b"]["pending_p99_s"]) for r in results])
        unsched = _mean([r["arms"][key]["unscheduled"] - r["arms"]["b"]["unscheduled"] for r in results])
        ok = p99 is not None and p99 <= 1.1 and unsched is not None and unsched <= 0
        table[key] = {
            "weights": [weights.cost, weights.pack],
            "batch_cost_per_work": cost,
            "pending_p99_ratio_vs_b": p99,
            "unscheduled_delta_vs_b": unsched,
            "within_limits": ok,
        }
    feasible = [k for k in candidates if table[k]["within_limits"] and table[k]["batch_cost_per_work"] is not None]
    pool = feasible or [k for k in candidates if table[k]["batch_cost_per_work"] is not None]
    if not pool:
        raise RuntimeError(f"no candidate delivered any work in the training windows: {table}")
    best = min(pool, key=lambda k: table[k]["batch_cost_per_work"])
    return best, table


def summarize(segments: list[dict[str, Any]], loads: Sequence[float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    per_load: dict[str, Any] = {}
    for load in loads:
        tag = f"{round(load * 100)}"
        runs = [s for s in segments if s["load"] == load]
        arms = sorted(runs[0]["arms"]) if runs else []
        ratios = [
            _ratio(
                r["arms"]["e"]["batch_cost_per_work"],
                min(r["arms"]["a"]["batch_cost_per_work"], r["arms"]["b"]["batch_cost_per_work"]),
            )
            for r in runs
        ]
        p99 = [_ratio(r["arms"]["e"]["pending_p99_s"], r["arms"]["b"]["pending_p99_s"]) for r in runs]
        unsched = [r["arms"]["e"]["unscheduled"] - r["arms"]["b"]["unscheduled"] for r in runs]
        out[f"cost_per_work_ratio_{tag}"] = _mean(ratios)
        out[f"pending_p99_ratio_{tag}"] = _mean(p99)
        out[f"unscheduled_delta_{tag}"] = _mean(unsched)
        variants = sorted(runs[0]["arms"]["e"]["batch_cost_per_work_repriced"]) if runs else []
        sensitivity = {
            v: _mean(
                [
                    _ratio(
                        r["arms"]["e"]["batch_cost_per_work_repriced"][v],
                        min(
                            r["arms"]["a"]["batch_cost_per_work_repriced"][v],
                            r["arms"]["b"]["batch_cost_per_work_repriced"][v],
                        ),
                    )
                    for r in runs
                ]
            )
            for v in variants
        }
        summary = {}
        for arm in arms:
            figs = [r["arms"][arm] for r in runs]
            keys = (
                "batch_cost_per_work",
                "cost_per_work",
                "service_cost_per_work",
                "paid_gpu_hours",
                "gpu_allocation",
                "pending_p50_s",
                "pending_p99_s",
                "pending_watch_p99_s",
                "unscheduled",
                "cost_usd",
                "work_a100_gpu_hours",
            )
            summary[arm] = {k: {"mean": _mean([f[k] for f in figs]), "sd": _sd([f[k] for f in figs])} for k in keys}
            families = sorted({fam for f in figs for fam in f["node_hours_by_family"]})
            summary[arm]["node_hours_by_family_mean"] = {
                fam: _mean([f["node_hours_by_family"].get(fam, 0.0) for f in figs]) for fam in families
            }
        by_arm: dict[str, dict[str, Any]] = {}
        for arm in [a for a in arms if a not in ("a", "b")]:
            arm_ratios = [
                _ratio(
                    r["arms"][arm]["batch_cost_per_work"],
                    min(r["arms"]["a"]["batch_cost_per_work"], r["arms"]["b"]["batch_cost_per_work"]),
                )
                for r in runs
            ]
            arm_p99 = [_ratio(r["arms"][arm]["pending_p99_s"], r["arms"]["b"]["pending_p99_s"]) for r in runs]
            arm_unsched = [r["arms"][arm]["unscheduled"] - r["arms"]["b"]["unscheduled"] for r in runs]
            by_arm[arm] = {
                "cost_per_work_ratio": _mean(arm_ratios),
                "cost_per_work_ratio_sd": _sd(arm_ratios),
                "cost_per_work_ratio_runs": arm_ratios,
                "pending_p99_ratio": _mean(arm_p99),
                "pending_p99_ratio_runs": arm_p99,
                "unscheduled_delta": _mean(arm_unsched),
            }
        if "l" in by_arm and "e" in by_arm:  # learned minus table, per window (same pods, same run)
            diffs = [
                None if x is None or y is None else x - y
                for x, y in zip(by_arm["l"]["cost_per_work_ratio_runs"], ratios, strict=True)
            ]
            by_arm["l"]["minus_e_runs"] = diffs
            by_arm["l"]["minus_e"] = _mean(diffs)
            by_arm["l"]["minus_e_sd"] = _sd(diffs)
        if "l" in by_arm and "o" in by_arm:  # regret: learned minus oracle, per window (same pods, same run)
            regret = _differences(by_arm["l"]["cost_per_work_ratio_runs"], by_arm["o"]["cost_per_work_ratio_runs"])
            by_arm["l"]["minus_o_runs"] = regret
            by_arm["l"]["minus_o"] = _mean(regret)
            by_arm["l"]["minus_o_sd"] = _sd(regret)
        if "o" in by_arm and "e" in by_arm:  # what the truth is worth to the table-driven arm
            gain = _differences(by_arm["o"]["cost_per_work_ratio_runs"], ratios)
            by_arm["o"]["minus_e_runs"] = gain
            by_arm["o"]["minus_e"] = _mean(gain)
            by_arm["o"]["minus_e_sd"] = _sd(gain)
        per_load[tag] = {
            "by_arm_vs_better_stock": by_arm,
            "cost_per_work_ratio_runs": ratios,
            "cost_per_work_ratio_sd": _sd(ratios),
            "pending_p99_ratio_runs": p99,
            "pending_watch_p99_ratio_runs": [
                _ratio(r["arms"]["e"]["pending_watch_p99_s"], r["arms"]["b"]["pending_watch_p99_s"]) for r in runs
            ],
            "unscheduled_delta_runs": unsched,
            "price_sensitivity_cost_per_work_ratio": sensitivity,
            "arms": summary,
        }
    out["per_load"] = per_load
    return out


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, help=f"folder with {NODE_FILE} and {POD_FILE}")
    ap.add_argument("--nodes", type=Path, help="node list CSV (overrides --trace)")
    ap.add_argument("--pods", type=Path, help="pod list CSV (overrides --trace)")
    ap.add_argument("--catalog", type=Path, help="price catalog CSV (default: the shipped one)")
    ap.add_argument("--fraction", type=float, default=0.05, help="share of each (model, GPUs) stratum of nodes per arm")
    ap.add_argument("--length", type=float, default=6000, help="trace seconds per segment (after the prefill)")
    ap.add_argument("--speedup", type=float, default=100, help="trace seconds per wall second (<= 100)")
    ap.add_argument("--loads", default="0.5,0.7,0.9", help="target GPU demand shares")
    ap.add_argument("--reps", type=int, default=5, help="held-out windows per load")
    ap.add_argument("--cv-windows", type=int, default=2, help="earlier windows for choosing the weights")
    ap.add_argument("--cv-weights", default="1:0,1:1,1:3", help="candidate extender weights cost:pack")
    ap.add_argument(
        "--throughput-scale-old",
        type=float,
        default=1.0,
        help="sensitivity: families below 0.5 of an A100 run this much faster than the table says",
    )
    ap.add_argument(
        "--scenario", choices=SCENARIOS, default="reference", help="how the GPUs' real speed differs (replay/truth.py)"
    )
    ap.add_argument(
        "--arms",
        choices=("standard", "learning"),
        default="standard",
        help="standard: a-e; learning: a, b, e, l (e learning from the pods' step times through Prometheus) "
        "and o (e with the scenario's true speeds in its table)",
    )
    ap.add_argument("--weights", help="cost:pack for the extender arms; given, no cross-validation is run")
    ap.add_argument("--refresh-s", type=float, default=2.0, help="arm l: extender's step-time refresh (wall s)")
    ap.add_argument("--step-window-s", type=float, default=5.0, help="arm l: step-time rate window (wall s)")
    ap.add_argument("--prior-samples", type=float, default=1.0, help="arm l: weight of the table (samples)")
    ap.add_argument(
        "--fresh-classes",
        action="store_true",
        help="arm l: each window's workload classes get new names (class-WINDOW), so every window is a cold start",
    )
    ap.add_argument("--curve-slices", type=int, default=5, help="learning curve: slices of each window by start time")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--from-partial",
        action="store_true",
        help="no replay: summarize the segments an interrupted run left in OUT.partial-{cv,eval}.json",
    )
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)  # the partial results go beside it while the replay runs
    if not args.trace and not (args.nodes and args.pods):
        ap.error("give --trace FOLDER, or both --nodes and --pods")
    if not 0 < args.speedup <= 100:
        ap.error("--speedup must be in (0, 100]")
    args.cv_weights = [Weights(*map(float, w.split(":"))) for w in args.cv_weights.split(",") if w]
    loads = [float(x) for x in args.loads.split(",")]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    attach = os.environ.get("STATICTRAIN_TEST_CLUSTER")
    cluster = LocalCluster(attach or f"st-bench-finops-{os.getpid()}")
    if not attach:
        cluster.start(build_binaries(log=sys.stderr), log=sys.stderr, real_node=False)
    cluster_version = cluster.bin_dir.parent.name  # read while it runs: stop() forgets it
    workdir = Path(tempfile.mkdtemp(prefix="st-bench-finops-"))
    t_start = time.monotonic()
    candidates = {f"w{i}": w for i, w in enumerate(args.cv_weights)}
    complete = True
    try:
        core = client.CoreV1Api(api_client(str(cluster.kubeconfig)))
        replay = Replay(args, core, cluster, workdir)
        starts = windows(replay.pods, args.cv_windows + args.reps)
        cv_starts, eval_starts = starts[: args.cv_windows], starts[args.cv_windows :]
        if args.from_partial:  # an interrupted run: what its finished segments recorded
            cv_results = json.loads(args.out.with_name(args.out.stem + ".partial-cv.json").read_text())
            results = json.loads(args.out.with_name(args.out.stem + ".partial-eval.json").read_text())
            loads = [load for load in loads if any(r["load"] == load for r in results)]
            best, cv_table = choose_weights(cv_results, candidates)
            chosen = candidates[best]
            complete = False
        else:
            replay.create_nodes()
            try:
                if args.weights:
                    chosen = Weights(*map(float, args.weights.split(":")))
                    best, cv_table = "fixed", {"fixed": {"weights": [chosen.cost, chosen.pack], "by": "--weights"}}
                else:
                    cv_arms = [Arm("b", tuned=True), *(Arm(k, tuned=True, weights=w) for k, w in candidates.items())]
                    cv_results = replay.phase("cv", cv_arms, [(f"t{i}", s, 0.7) for i, s in enumerate(cv_starts)])
                    best, cv_table = choose_weights(cv_results, candidates)
                    chosen = candidates[best]
                    log.info("weights chosen by CV: %s %s", best, chosen)
                segments = [(f"l{round(load * 100)}r{i}", s, load) for load in loads for i, s in enumerate(eval_starts)]
                eval_arms = learning_arms(chosen) if args.arms == "learning" else standard_arms(chosen)
                results = replay.phase("eval", eval_arms, segments)
            finally:
                replay.delete_nodes()
    finally:
        if not attach and not args.from_partial:
            cluster.stop()
    report = summarize(results, loads)
    goal = {
        "cost_per_work_ratio_70": "<= 0.80",
        "pending_p99_ratio_70": "<= 1.10",
        "unscheduled_delta_70": "<= 0",
    }
    met = (
        report.get("cost_per_work_ratio_70") is not None
        and report["cost_per_work_ratio_70"] <= 0.80
        and report.get("pending_p99_ratio_70") is not None
        and report["pending_p99_ratio_70"] <= 1.10
        and report.get("unscheduled_delta_70") is not None
        and report["unscheduled_delta_70"] <= 0
    )
    strata: dict[str, int] = {}
    for n in replay.inventory:
        strata[f"{n.model}x{n.gpus}"] = strata.get(f"{n.model}x{n.gpus}", 0) + 1
    result = {
        **{k: v for k, v in report.items() if k != "per_load"},
        "runs_per_arm": min(sum(1 for r in results if r["load"] == load) for load in loads),
        "complete": complete,
        "loads_measured": loads,
        "goal": goal,
        "goal_met": met,
        "cost_per_work": "batch (non-LS) pods' share of node cost / their delivered work in A100-equivalent "
        "GPU-hours; services (LS) are reported apart (service_cost_per_work)",
        "per_load": report["per_load"],
        "cv": {
            "windows_start_s": cv_starts,
            "load": 0.7,
            "candidates": cv_table,
            "chosen": best,
            "chosen_weights": [chosen.cost, chosen.pack],
        },
        "eval_windows_start_s": eval_starts,
        "segments": results,
        "setup": {
            "trace_files": [str(f) for f in replay.files],
            "skipped_pods": replay.skipped,
            "eligible_pods": len(replay.pods),
            "inventory_fraction": args.fraction,
            "inventory_per_arm": strata,
            "gpus_per_arm": replay.capacity_milli // 1000,
            "length_trace_s": args.length,
            "speedup": args.speedup,
            "reference_family": REFERENCE_FAMILY,
            "throughput_table": replay.table,
            "throughput_scale_old": args.throughput_scale_old,
            "scenario": args.scenario,
            "truth_by_class": replay.truth,
            "arms": args.arms,
            "learning": {
                "refresh_s": args.refresh_s,
                "step_window_s": args.step_window_s,
                "prior_samples": args.prior_samples,
                "step_reference_trace_s": STEP_REFERENCE_S,
                "fresh_classes": args.fresh_classes,
                "curve_slices": args.curve_slices,
            },
            "unknown_gpu_families": replay.unknown_families,
            "node_families": sorted(set(replay.families.values())),
            "catalog_mapping": dict(CATALOG_MODEL),
            "price_variants": PRICE_VARIANTS,
            "equal_gpu_hour_usd": EQUAL_GPU_HOUR_USD,
            "gpu_hourly_usd": {n.model: str(replay.prices[n.name].gpu_hourly_usd) for n in replay.inventory},
        },
        "wall_seconds_total": time.monotonic() - t_start,
        "command": "python " + " ".join(["bench/finops_replay.py", *sys.argv[1:]]),
        "versions": {
            "python": platform.python_version(),
            "cluster": cluster_version,
            "git": subprocess.run(
                ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
            ).stdout.strip(),
        },
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "load_avg": os.getloadavg()},
    }
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps({k: result[k] for k in list(result)[:10]}, indent=1, default=str))


if __name__ == "__main__":
    main()
