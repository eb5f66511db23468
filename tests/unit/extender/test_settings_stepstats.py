from __future__ import annotations

from typing import Any

import pytest
from statictrain_extender.settings import ENV, ExtenderSettings, SettingsError
from statictrain_extender.stepstats import parse_step_samples, parse_step_seconds, step_seconds_query


def test_settings_defaults() -> None:
    got = ExtenderSettings.from_env({})
    assert got == ExtenderSettings()
    assert got.scheduler_names == frozenset({"statictrain-scheduler"})


def test_settings_from_env() -> None:
    got = ExtenderSettings.from_env(
        {
            ENV["port"]: "9000",
            ENV["scheduler_names"]: "a, b",
            ENV["weight_cost"]: "3",
            ENV["weight_pack"]: "0",
            ENV["prometheus_url"]: "http://prom:9090/",
            ENV["watch_pods"]: "false",
        }
    )
    assert (got.port, got.scheduler_names, got.weights.cost, got.weights.pack) == (
        9000,
        frozenset("ab"),
        3.0,
        0.0,
    )
    assert got.prometheus_url == "http://prom:9090"
    assert not got.watch_pods


@pytest.mark.parametrize(
    ("env", "names_var"),
    [
        ({ENV["port"]: "http"}, ENV["port"]),
        ({ENV["port"]: "70000"}, ENV["port"]),
        ({ENV["tls_cert_file"]: "/c.pem"}, ENV["tls_key_file"]),
        ({ENV["weight_cost"]: "0", ENV["weight_pack"]: "0"}, ENV["weight_cost"]),
        ({ENV["weight_cost"]: "-1"}, ENV["weight_cost"]),
        ({ENV["refresh_seconds"]: "0"}, ENV["refresh_seconds"]),
        ({ENV["watch_pods"]: "yes"}, ENV["watch_pods"]),
    ],
)
def test_settings_errors_name_the_variable(env: dict[str, str], names_var: str) -> None:
    with pytest.raises(SettingsError, match=names_var):
        ExtenderSettings.from_env(env)


def test_step_query_joins_gpu_model_and_uses_window() -> None:
    query = step_seconds_query(300)
    assert "statictrain_train_step_seconds_sum[300000ms]" in query
    assert "group_left (gpu_model)" in query
    assert query.startswith("avg by (namespace, job_name, gpu_model)")


def test_parse_step_seconds() -> None:
    result: list[dict[str, Any]] = [
        {
            "metric": {"namespace": "t", "job_name": "j", "gpu_model": "NVIDIA-H100-80GB-HBM3"},
            "value": [1, "0.25"],
        },
        {
            "metric": {"namespace": "t", "job_name": "j", "gpu_model": "NVIDIA A100-SXM4-40GB"},
            "value": [1, "0.5"],
        },
        {"metric": {"namespace": "t", "job_name": "j", "gpu_model": "NVIDIA H200"}, "value": [1, "0.125"]},
        {"metric": {"namespace": "t", "job_name": "j", "gpu_model": "T4"}, "value": [1, "NaN"]},
        {"metric": {"namespace": "t", "job_name": "j"}, "value": [1, "1"]},
        {"metric": {"namespace": "t", "job_name": "k", "gpu_model": "L4"}, "value": [1, "x"]},
        {"metric": {"namespace": "t", "job_name": "k", "gpu_model": "L4"}},
    ]
    assert parse_step_seconds(result) == {("t", "j"): {"H100": 0.25, "A100": 0.5, "H200": 0.125}}  # NVML names too
    garbage: list[Any] = [
        *result,
        "not a sample",
        {"metric": ["x"], "value": 3},
        {"metric": {**result[0]["metric"]}, "value": [1, "-2"]},
    ]
    table, skipped = parse_step_samples(garbage)
    assert table == parse_step_seconds(result)
    assert skipped == {"not_a_number": 3, "unlabelled": 3, "not_positive": 1}
