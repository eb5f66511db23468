from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain import labels
from statictrain_extender.gpus import gpu_family
from statictrain_extender.nodes import node_from_object, parse_quantity_int

from .builders import node_obj
from .hostile import json_values, put


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("NVIDIA-H100-80GB-HBM3", "H100"),
        ("NVIDIA-H100-NVL", "H100"),
        ("NVIDIA-A100-SXM4-40GB", "A100"),
        ("NVIDIA-A10G", "A10G"),
        ("NVIDIA-A10", "A10"),
        ("NVIDIA-L4", "L4"),
        ("NVIDIA-L40S", "L40S"),
        ("Tesla-T4", "T4"),
        ("Tesla-V100-SXM2-16GB", "V100"),
        ("h100", "H100"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("Tesla T4", "T4"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA B200", "B200"),
        ("V100M32", "V100M32"),
        ("G2", "G2"),
        ("", ""),
        ("Some-New-GPU", "SOME-NEW-GPU"),
    ],
)
def test_gpu_family(name: str, want: str) -> None:
    assert gpu_family(name) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("8", 8),
        (8, 8),
        ("2k", 2000),
        ("0", 0),
        ("-3", 0),
        ("x", 0),
        (None, 0),
        (True, 0),
        ("1.5", 1),
        ("1e999999", 0),
        ("Infinity", 0),
        ("-inf", 0),
        ("NaN", 0),
        ("999999999999999", 999999999999999),
        ("1e15", 0),
        (10**15, 0),  # a JSON integer is bounded like a string one
        (2**64 - 1, 0),
        (999999999999999, 999999999999999),
    ],
)
def test_parse_quantity_int(value: object, want: int) -> None:
    assert parse_quantity_int(value) == want


@pytest.mark.parametrize(
    ("kwargs", "want_gpu_hourly", "want_hourly"),
    [
        pytest.param({"hourly": "32", "gpu_hourly": None}, 4.0, 32.0, id="per-gpu-derived-from-node-price"),
        pytest.param({"hourly": "32", "gpu_hourly": "3.5"}, 3.5, 32.0, id="per-gpu-annotation-wins"),
        pytest.param({"hourly": None, "gpu_hourly": None}, None, None, id="no-price-is-unknown-not-zero"),
        pytest.param({"hourly": "0", "gpu_hourly": None}, None, None, id="zero-price-is-unknown"),
        pytest.param({"hourly": "abc", "gpu_hourly": None}, None, None, id="garbage-price-is-unknown"),
        pytest.param({"hourly": "NaN", "gpu_hourly": None}, None, None, id="nan-price-is-unknown"),
        pytest.param({"hourly": "1e400", "gpu_hourly": None}, None, None, id="price-beyond-a-float-is-unknown"),
        pytest.param({"hourly": "1e-400", "gpu_hourly": None}, None, None, id="price-that-is-0-as-a-float-is-unknown"),
        pytest.param({"hourly": "32", "gpu_hourly": "1e-400"}, 4.0, 32.0, id="per-gpu-0-as-float-falls-back"),
        pytest.param({"hourly": "8", "gpu_hourly": None, "gpus": 0}, None, 8.0, id="cpu-node"),
    ],
)
def test_node_prices(kwargs: dict[str, object], want_gpu_hourly: float | None, want_hourly: float | None) -> None:
    got = node_from_object(node_obj("n", **kwargs))  # type: ignore[arg-type]
    assert got.gpu_hourly_usd == want_gpu_hourly
    assert got.hourly_usd == want_hourly


def test_node_fields() -> None:
    got = node_from_object(node_obj("n1", product="NVIDIA-H100-80GB-HBM3", gpus=8, capacity="Spot"))
    assert (got.name, got.gpu_family, got.gpus, got.capacity_type) == ("n1", "H100", 8, "spot")


def test_node_without_anything_does_not_crash() -> None:
    got = node_from_object({})
    assert (got.name, got.gpus, got.gpu_hourly_usd) == ("", 0, None)


NODE_PATHS: list[tuple[str, ...]] = [
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "labels"),
    ("metadata", "labels", labels.GPU_PRODUCT),
    ("metadata", "labels", "karpenter.sh/capacity-type"),
    ("metadata", "annotations"),
    ("metadata", "annotations", labels.HOURLY_COST),
    ("metadata", "annotations", labels.GPU_HOURLY_COST),
    ("metadata", "annotations", labels.PRICE_CAPACITY_TYPE),
    ("status",),
    ("status", "allocatable"),
    ("status", "allocatable", labels.GPU_RESOURCE),
]


@given(changes=st.lists(st.tuples(st.sampled_from(NODE_PATHS), json_values), max_size=3))
def test_any_node_object_is_read_never_raises(changes: list[tuple[tuple[str, ...], object]]) -> None:
    """A Node from a hostile API server (or sent inline) with any JSON anywhere: a NodeInfo, and the values
    it holds are of their types and in range."""
    obj = node_obj("n")
    for path, value in changes:
        with contextlib.suppress(KeyError, TypeError):
            put(obj, path, value)
    got = node_from_object(obj)
    assert isinstance(got.name, str) and isinstance(got.gpu_family, str) and isinstance(got.capacity_type, str)
    assert isinstance(got.gpus, int) and 0 <= got.gpus < 10**15 * 1000
    for price in (got.hourly_usd, got.gpu_hourly_usd):
        assert price is None or 0 < price < math.inf
