import math

import pytest
from statictrain.throughput import (
    DEFAULT_RELATIVE_THROUGHPUT,
    INFERRED,
    MEASURED,
    TABLE,
    job_throughput,
    parse_table,
)
from statictrain_extender.gpus import gpu_family

D = DEFAULT_RELATIVE_THROUGHPUT


@pytest.mark.parametrize(
    ("steps", "want", "sources"),
    [
        pytest.param({}, dict(D), {"A100": TABLE, "T4": TABLE}, id="no-measurements-table"),
        pytest.param(
            {"A100": 2.0, "H100": 1.0},
            # geometric mean of the table's (A100, H100) kept; measured ratio H100/A100 = 2.0
            {"A100": math.sqrt(D["H100"] / 2.0), "H100": math.sqrt(D["H100"] * 2.0), "T4": D["T4"]},
            {"A100": MEASURED, "H100": MEASURED, "T4": INFERRED},
            id="measured-ratio-replaces-table-ratio",
        ),
        pytest.param({"A100": 0.5}, {"A100": 1.0, "V100": D["V100"]}, {"A100": MEASURED, "V100": INFERRED}, id="one"),
        pytest.param({"A100": float("nan"), "H100": -1.0}, dict(D), {"A100": TABLE}, id="bad-samples-ignored"),
        pytest.param({"NEWGPU": 0.5}, {"NEWGPU": 2.0, "T4": D["T4"]}, {"NEWGPU": MEASURED, "T4": TABLE}, id="unknown"),
    ],
)
def test_job_throughput(steps: dict[str, float], want: dict[str, float], sources: dict[str, str]) -> None:
    got = job_throughput(steps)
    for family, value in want.items():
        assert got.relative[family] == pytest.approx(value)
    for family, source in sources.items():
        assert got.source(family) == source


def test_shipped_table_is_anchored_and_covers_the_trace_families() -> None:
    assert D["A100"] == 1.0
    # Every GPU of the Alibaba trace, as the replay labels it, has a row.
    for product in ("Tesla-T4", "Tesla-P100-PCIE-16GB", "Tesla-V100-SXM2-32GB", "NVIDIA-A10", "NVIDIA-A100-SXM4-40GB"):
        assert gpu_family(product) in D


@pytest.mark.parametrize(
    "text",
    ["family,relative_to_a100\nA100,0\n", "family,relative_to_a100\nA100,x\n", "family,r\nA100,1\n",
     "family,relative_to_a100\nA100,1\nA100,2\n"],
)
def test_parse_table_rejects_bad_rows(text: str) -> None:
    with pytest.raises(ValueError, match=r"relative_to_a100|line"):
        parse_table(text)
