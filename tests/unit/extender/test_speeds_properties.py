"""Bad step-time input is never learned from (issue 27's "Bad input"), for any mix of good and bad samples."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from statictrain_extender.speeds import SpeedEstimator, class_key
from statictrain_extender.stepstats import parse_step_samples

GOOD = st.floats(min_value=0.01, max_value=100.0)
BAD = st.sampled_from(["NaN", "+Inf", "-Inf", "0", "-1.5", "", "x", None])
NOT_POSITIVE = {"0", "-1.5"}  # the other BAD values are not finite numbers
MODELS = st.sampled_from(["NVIDIA-A100-SXM4-80GB", "Tesla-T4", "Tesla-V100-SXM2-16GB"])


@st.composite
def results(
    draw: st.DrawFn,
) -> tuple[list[dict[str, object]], dict[tuple[str, str], set[str]], dict[str, int]]:
    """A Prometheus result of good and bad samples, which (job, model) carry a good one, and how many samples
    must be skipped for each reason."""
    out: list[dict[str, object]] = []
    good: dict[tuple[str, str], set[str]] = {}
    skipped: dict[str, int] = {}
    for i in range(draw(st.integers(0, 12))):
        job, model = f"j{draw(st.integers(0, 4))}", draw(MODELS)
        labels: dict[str, str] = {"namespace": "team", "job_name": job, "gpu_model": model}
        if draw(st.booleans()):  # a pod without a GPU (no gpu_model joined in) or without its job label
            labels.pop(draw(st.sampled_from(["gpu_model", "job_name"])))
            out.append({"metric": labels, "value": [i, str(draw(GOOD))]})
            skipped["unlabelled"] = skipped.get("unlabelled", 0) + 1
            continue
        if draw(st.booleans()):
            bad = draw(BAD)
            out.append({"metric": labels, "value": [i, bad]})
            reason = "not_positive" if bad in NOT_POSITIVE else "not_a_number"
            skipped[reason] = skipped.get(reason, 0) + 1
        else:
            out.append({"metric": labels, "value": [i, str(draw(GOOD))]})
            good.setdefault(("team", job), set()).add(model)
    return out, good, skipped


@settings(max_examples=300, deadline=None)
@given(st.lists(results(), min_size=1, max_size=5))
def test_only_finite_positive_samples_of_a_gpu_pod_are_learned(refreshes: list) -> None:  # type: ignore[type-arg]
    speeds = SpeedEstimator(min_jobs_for_outliers=10**6)  # outliers apart: tested in test_speeds
    rounds: dict[tuple[tuple[str, str], str], int] = {}
    expected_rejected: dict[str, int] = {}
    for result, good, skipped in refreshes:
        parsed, counted = parse_step_samples(result)
        assert counted == skipped  # every sample not learned from is counted, under its reason
        for reason, n in skipped.items():
            expected_rejected[reason] = expected_rejected.get(reason, 0) + n
        # Only jobs with a good sample appear; a bad one beside a good one of the same series is dropped.
        assert set(parsed) <= set(good)
        for job, families in parsed.items():
            assert all(math.isfinite(s) and s > 0 for s in families.values())
            for family in families:
                rounds[(job, family)] = rounds.get((job, family), 0) + 1
        speeds.observe(parsed, lambda job: class_key(job[0], job[1], None), counted)
    assert speeds.rejected == expected_rejected  # what the extender's rejected-samples metric reports
    for key, per_family in speeds.stats.items():
        for family, stats in per_family.items():
            for job, (seconds, seen) in stats.jobs.items():
                assert math.isfinite(seconds) and seconds > 0
                # A job absent from a refresh (missing, stale: no rate in the window) gains no sample there.
                assert seen == rounds[(job, family)]
        figures = speeds.throughput(key)
        assert figures is not None and all(math.isfinite(v) and v > 0 for v in figures.relative.values())
