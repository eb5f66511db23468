from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain_extender.policy import (
    CAPACITY_TYPES_ANNOTATION,
    GPU_MODELS_ANNOTATION,
    MAX_HOURLY_ANNOTATION,
    PlacementPolicy,
    PolicyError,
    pod_gpu_milli,
    pod_view,
    policy_from_annotations,
    violation,
)

from .builders import info, pod_obj
from .hostile import json_values, put

NAMES = frozenset({"statictrain-scheduler"})


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, PlacementPolicy(), id="none"),
        pytest.param(
            {CAPACITY_TYPES_ANNOTATION: "Spot, on-demand"},
            PlacementPolicy(capacity_types=frozenset({"spot", "on-demand"})),
            id="capacity-types-normalised",
        ),
        pytest.param(
            {GPU_MODELS_ANNOTATION: "H100,NVIDIA-A100-SXM4-80GB"},
            PlacementPolicy(gpu_families=frozenset({"H100", "A100"})),
            id="gpu-models-to-families",
        ),
        pytest.param({MAX_HOURLY_ANNOTATION: "12.50"}, PlacementPolicy(max_hourly_usd=12.5), id="max-price"),
        pytest.param({MAX_HOURLY_ANNOTATION: " "}, PlacementPolicy(), id="blank-max-price"),
    ],
)
def test_policy_from_annotations(annotations: dict[str, str], want: PlacementPolicy) -> None:
    assert policy_from_annotations(annotations) == want


@pytest.mark.parametrize(
    ("annotations", "want_in_message"),
    [
        pytest.param({CAPACITY_TYPES_ANNOTATION: "cheap"}, "spot, on-demand", id="unknown-capacity-type"),
        pytest.param({MAX_HOURLY_ANNOTATION: "ten"}, "positive decimal", id="max-not-a-number"),
        pytest.param({MAX_HOURLY_ANNOTATION: "-1"}, "positive decimal", id="max-negative"),
        pytest.param({MAX_HOURLY_ANNOTATION: "Infinity"}, "positive decimal", id="max-infinite"),
        # finite as a decimal, not as a float: inf (no cap at all) and 0.0 (nothing passes)
        pytest.param({MAX_HOURLY_ANNOTATION: "1e400"}, "positive decimal", id="max-overflows-a-float"),
        pytest.param({MAX_HOURLY_ANNOTATION: "1e-400"}, "positive decimal", id="max-underflows-to-zero"),
        # tens of thousands of models made every filter call sort them once per candidate node (minutes)
        pytest.param({GPU_MODELS_ANNOTATION: ",".join(f"X{i}" for i in range(10_000))}, "at most", id="models"),
    ],
)
def test_policy_errors_say_what_to_fix(annotations: dict[str, str], want_in_message: str) -> None:
    with pytest.raises(PolicyError, match=want_in_message):
        policy_from_annotations(annotations)


@pytest.mark.parametrize(
    ("node", "policy", "want_reason"),
    [
        pytest.param(info("n"), PlacementPolicy(), None, id="unconstrained"),
        pytest.param(
            info("n", capacity="spot"),
            PlacementPolicy(capacity_types=frozenset({"on-demand"})),
            "capacity",
            id="spot",
        ),
        pytest.param(
            info("n", capacity=""),
            PlacementPolicy(capacity_types=frozenset({"spot"})),
            "unlabelled",
            id="unlabelled",
        ),
        pytest.param(info("n", family="T4"), PlacementPolicy(gpu_families=frozenset({"A100"})), "GPU model", id="gpu"),
        pytest.param(info("n", family="A100"), PlacementPolicy(gpu_families=frozenset({"A100"})), None, id="gpu-ok"),
        pytest.param(info("n", hourly=40.0), PlacementPolicy(max_hourly_usd=32.0), "above max", id="too-expensive"),
        pytest.param(info("n", hourly=32.0), PlacementPolicy(max_hourly_usd=32.0), None, id="at-max"),
        pytest.param(info("n", hourly=None), PlacementPolicy(max_hourly_usd=32.0), "no price", id="unpriced"),
    ],
)
def test_violation(node: object, policy: PlacementPolicy, want_reason: str | None) -> None:
    got = violation(node, policy)  # type: ignore[arg-type]
    if want_reason is None:
        assert got is None
    else:
        assert got is not None and want_reason in got


def test_pod_view_managed() -> None:
    view = pod_view(pod_obj(gpus=2, annotations={GPU_MODELS_ANNOTATION: "H100"}), NAMES)
    assert view.managed
    assert view.gpu_milli == 2000
    assert view.job_key == ("team", "gpt2")
    assert view.policy.gpu_families == frozenset({"H100"})


def test_pod_view_gpu_share_resource() -> None:
    assert pod_view(pod_obj(gpus=0, gpu_milli=460), NAMES).gpu_milli == 460


def test_pod_view_other_scheduler_is_unmanaged_even_with_bad_annotations() -> None:
    view = pod_view(pod_obj(scheduler="default-scheduler", annotations={MAX_HOURLY_ANNOTATION: "x"}), NAMES)
    assert not view.managed


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param("4", 4, id="plain"),
        pytest.param("\u0661\u0662", 1, id="arabic-indic-digits-are-not-a-size"),  # str.isdigit() and int() say 12
        pytest.param("\u00b2", 1, id="superscript-two"),  # isdigit() True, int() raises
        pytest.param("9" * 5000, 1, id="beyond-int-conversion-limit"),  # int() raises ValueError
        pytest.param("100001", 1, id="more-pods-than-a-cluster-runs"),
        pytest.param("0", 1, id="zero"),
        pytest.param("+4", 1, id="sign"),
    ],
)
def test_gang_size_is_a_plain_bounded_count(value: str, want: int) -> None:
    pod = pod_obj()
    pod["spec"]["containers"][0]["env"] = [{"name": "WORLD_SIZE", "value": value}]
    assert pod_view(pod, NAMES).gang_size == want


def test_pod_view_without_job_label() -> None:
    assert pod_view(pod_obj(job=None), NAMES).job_key is None


POD_PATHS: list[tuple[object, ...]] = [
    ("spec",),
    ("metadata",),
    ("spec", "schedulerName"),
    ("spec", "containers"),
    ("spec", "containers", 0),
    ("spec", "containers", 0, "resources"),
    ("spec", "containers", 0, "resources", "requests"),
    ("spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"),
    ("spec", "containers", 0, "env"),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "uid"),
    ("metadata", "labels"),
    ("metadata", "labels", "statictrain.io/job"),
    ("metadata", "annotations"),
    ("metadata", "annotations", GPU_MODELS_ANNOTATION),
    ("metadata", "annotations", CAPACITY_TYPES_ANNOTATION),
    ("metadata", "annotations", MAX_HOURLY_ANNOTATION),
    ("metadata", "annotations", "statictrain.io/gpu-throughput"),
]


@given(changes=st.lists(st.tuples(st.sampled_from(POD_PATHS), json_values), max_size=3))
def test_any_pod_object_is_read_or_refused_with_a_policy_error(
    changes: list[tuple[tuple[object, ...], object]],
) -> None:
    """A pod with any JSON anywhere: a PodView, or a PolicyError that says what to fix; never another
    exception (which made the server answer 'malformed' and a hostile watch event stop a relist)."""
    pod = pod_obj(annotations={GPU_MODELS_ANNOTATION: "A100"})
    pod["spec"]["containers"][0]["env"] = [{"name": "WORLD_SIZE", "value": "4"}]
    for path, value in changes:
        with contextlib.suppress(KeyError, IndexError, TypeError):
            put(pod, path, value)
    try:
        view = pod_view(pod, NAMES)
    except PolicyError as err:
        assert "annotation" in str(err)
        return
    assert isinstance(view.gpu_milli, int) and view.gpu_milli >= 0
    assert isinstance(view.gang_size, int) and 1 <= view.gang_size <= 100_000
    assert all(isinstance(v, str) for v in (view.uid, view.name, view.namespace))
    assert view.job_key is None or all(isinstance(k, str) for k in view.job_key)
    assert isinstance(pod_gpu_milli(pod["spec"]), int) if isinstance(pod.get("spec"), dict) else True
