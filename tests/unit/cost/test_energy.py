"""GPU energy and carbon per job from the sidecars' NVML energy counters (joules since the driver loaded).

The oracle of every table is the GPUs' power x time as the case sets it, written out here; the counters the
cost model reads are sampled from that, with baselines far from zero, resets, scrape gaps and windows cut
anywhere.
"""

from __future__ import annotations

import csv
import itertools
from decimal import Decimal
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain import labels
from statictrain.carbon import GridIntensity, parse_overrides, shipped_table
from statictrain.cost import NodeInfo, PodInfo, PodUsage, Sample, Window, allocate
from statictrain.counters import Counter, increase
from statictrain_operator.cost.inputs import build_usage, node_info, series_key
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.prom import Series

NODE = NodeInfo("gpu-a", Decimal("32"), 8, grid_intensity=400.0)
BASE = 7.5e9  # joules the GPU used since its driver loaded, before the pod


def pod(uid: str = "u1", gpus: int = 2, start: float = 0.0, end: float | None = None) -> PodInfo:
    return PodInfo(uid, "w-0", "ns", "j", "gpu-a", gpus, start, end)


def counter_samples(
    watts: float, t0: float, t1: float, *, every: float = 5.0, base: float = BASE, stop: float = float("inf")
) -> list[Sample]:
    """A GPU drawing ``watts`` from ``t0`` until ``stop`` (nothing after), sampled every ``every`` s until ``t1``."""
    n = int((t1 - t0) / every) + 1
    return [Sample(t0 + i * every, base + watts * (min(t0 + i * every, stop) - t0)) for i in range(n)]


def as_counter(samples: list[Sample], window: Window) -> Counter:
    before = [s for s in samples if s.t < window.start]
    inside = tuple(s for s in samples if window.start <= s.t < window.end)
    return Counter(before[-1].v if before else None, inside, before[-1].t if before else None)


@pytest.mark.parametrize(
    ("prev", "values", "want", "resets"),
    [
        (None, [BASE, BASE + 10, BASE + 25], 25.0, 0),
        (BASE, [BASE + 10], 10.0, 0),
        (None, [BASE], 0.0, 0),
        (None, [], 0.0, 0),
        (BASE, [BASE + 10, 4.0, 9.0], 19.0, 1),
    ],
    ids=["first-sample-is-the-baseline", "continues-from-prev", "one-sample-is-nothing", "no-samples", "reset"],
)
def test_a_counter_that_does_not_start_at_zero(
    prev: float | None, values: list[float], want: float, resets: int
) -> None:
    c = Counter(prev, tuple(Sample(float(i), v) for i, v in enumerate(values)))
    got = increase(c, starts_at_zero=False)
    assert (got.value, got.resets) == (want, resets)


def test_the_default_still_counts_a_new_series_from_zero() -> None:
    assert increase(Counter(None, (Sample(0, 5.0), Sample(1, 7.0)))).value == 7.0


@given(st.lists(st.floats(min_value=1.0, max_value=3599.0), max_size=6, unique=True))
def test_windows_cut_anywhere_add_up_to_the_energy_the_gpus_drew(cuts: list[float]) -> None:
    """Two GPUs at 300 W and 450 W for 3500 s of an hour, sampled every 5 s: 750 W x 3500 s, however it is cut."""
    per_gpu = {
        "GPU-0": counter_samples(300.0, 0.0, 3600.0, stop=3500.0),
        "GPU-1": counter_samples(450.0, 0.0, 3600.0, base=3e8, stop=3500.0),
    }
    bounds = [0.0, *sorted(cuts), 3600.0]
    total = 0.0
    for lo, hi in itertools.pairwise(bounds):
        w = Window(lo, hi)
        usage = {"u1": PodUsage(gpu_energy=[as_counter(s, w) for s in per_gpu.values()])}
        total += allocate(w, [NODE], [pod(start=0.0)], usage).jobs[("ns", "j")].energy_j
    assert total == pytest.approx(750.0 * 3500.0)


def test_scrape_gap_reset_and_carbon() -> None:
    """300 W for 100 s, no sample for 40 s of it, then the driver reloads (the counter restarts at 0) and the
    GPU draws 300 W for 50 s more: 45 kJ, every joule counted once; carbon at 400 g/kWh and PUE 1.2."""
    before = [s for s in counter_samples(300.0, 0.0, 100.0) if not 30.0 < s.t < 70.0]
    after = [Sample(100.0 + t, 300.0 * t) for t in (5.0, 20.0, 50.0)]  # energy since the reload at t=100
    w = Window(0.0, 200.0)
    usage = {"u1": PodUsage(gpu_energy=[as_counter(before + after, w)])}
    alloc = allocate(w, [NODE], [pod(gpus=1)], usage, pue=1.2)
    job = alloc.jobs[("ns", "j")]
    assert job.energy_j == pytest.approx(45_000.0)
    assert job.carbon_g == pytest.approx(45_000.0 / 3.6e6 * 1.2 * 400.0)
    assert "counter-reset" in job.flags


def test_energy_outside_the_pods_life_is_not_its_own() -> None:
    w = Window(1000.0, 2000.0)
    usage = {"u1": PodUsage(gpu_energy=[as_counter(counter_samples(300.0, 0.0, 2000.0), w)])}
    assert allocate(w, [NODE], [pod(end=900.0)], usage).jobs == {}


@pytest.mark.parametrize(
    ("usage", "intensity", "want_flags"),
    [
        (PodUsage(utilization={"GPU-0": [Sample(0.0, 0.9)]}), 400.0, {"gpu-energy-missing"}),
        (PodUsage(gpu_energy=[Counter(None, (Sample(0, BASE), Sample(50, BASE + 10)))]), None,
         {"carbon-intensity-unknown"}),
        (PodUsage(), None, set()),
    ],
    ids=["sidecar-without-energy", "intensity-unknown", "no-sidecar-no-flag"],
)  # fmt: skip
def test_what_is_not_known_is_flagged(usage: PodUsage, intensity: float | None, want_flags: set[str]) -> None:
    node = NodeInfo("gpu-a", Decimal("32"), 8, grid_intensity=intensity)
    job = allocate(Window(0.0, 100.0), [node], [pod(gpus=1)], {"u1": usage}).jobs[("ns", "j")]
    assert job.flags & {"gpu-energy-missing", "carbon-intensity-unknown"} == want_flags
    assert job.carbon_g == 0.0 or intensity is not None


def test_build_usage_keeps_one_energy_counter_per_gpu_and_each_gpus_own_value_from_further_back() -> None:
    w = Window(100.0, 200.0)
    lab = {"pod_uid": "u1", "namespace": "ns", "pod": "w-0"}
    series = {
        "energy": [
            Series({**lab, "gpu_uuid": "GPU-0"}, (Sample(150.0, 1000.0),)),
            Series({**lab, "gpu_uuid": "GPU-1"}, (Sample(150.0, 5000.0),)),
        ]
    }
    prevs = {"energy": {"u1/GPU-0": 400.0, "u1/GPU-1": 4500.0}}
    u = build_usage(w, series, prevs=prevs)["u1"]
    assert sorted(increase(c, starts_at_zero=False).value for c in u.gpu_energy) == [500.0, 600.0]
    assert series_key(lab) == "u1" and series_key({**lab, "gpu_uuid": "GPU-1"}) == "u1/GPU-1"


def node(name: str = "n1", region: str = "us-east-1", **extra: dict[str, str]) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "labels": {labels.REGION: region, **extra.get("labels", {})}}
    meta["annotations"] = extra.get("annotations", {})
    return {"metadata": meta, "status": {"capacity": {"cpu": "8", "memory": "32Gi"}}}


@pytest.mark.parametrize(
    ("n", "want"),
    [
        (node(annotations={labels.GRID_INTENSITY: "120"}), (120.0, "annotation")),
        (node(labels={labels.GRID_INTENSITY: "130"}), (130.0, "label")),
        (node(region="eu-west-1"), (290.0, "setting")),
        (node(region="us-east-1"), (454.5, "table")),
        (node(region="mars-1"), (None, "unknown")),
    ],
    ids=["annotation", "label", "setting-per-region", "shipped-table", "unknown"],
)
def test_intensity_comes_from_the_node_then_the_setting_then_the_table(
    n: dict[str, object], want: tuple[float | None, str]
) -> None:
    assert GridIntensity(parse_overrides("eu-west-1=290"), shipped_table()).of(n) == want


def test_a_bad_intensity_annotation_is_named_and_leaves_the_nodes_carbon_unknown() -> None:
    bad = node("gpu-x", annotations={labels.GRID_INTENSITY: "lots"})
    value, why = GridIntensity(table=shipped_table()).of(bad)
    assert value is None and "gpu-x" in why and labels.GRID_INTENSITY in why
    info = node_info(bad, lambda facts: Decimal(1), carbon=GridIntensity(table=shipped_table()))
    assert info.grid_intensity is None


def test_the_shipped_table_has_a_source_and_year_per_row() -> None:
    text = resources.files("statictrain").joinpath("data/grid_intensity.csv").read_text()
    rows = list(csv.DictReader(text.splitlines()))
    assert rows and all(r["source"] and r["year"].isdigit() and 0 < float(r["gco2e_per_kwh"]) < 2000 for r in rows)
    assert len({r["region"] for r in rows}) == len(rows)


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"STATICTRAIN_COST_PUE": "0.8"}, "STATICTRAIN_COST_PUE"),
        ({"STATICTRAIN_COST_GRID_INTENSITY": "us-east-1"}, "region=gCO2e-per-kWh"),
        ({"STATICTRAIN_COST_GRID_INTENSITY": "us-east-1=-3"}, "us-east-1"),
    ],
    ids=["pue-below-1", "no-value", "negative"],
)
def test_bad_carbon_settings_name_the_variable(env: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CostSettings.from_env(env)
