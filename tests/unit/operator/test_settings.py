"""Settings from environment variables."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
from statictrain_operator import settings
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.cost.settings import CostSettings


def test_defaults_when_nothing_is_set() -> None:
    assert settings.from_env({}) == settings.Settings()


def test_values_are_parsed_by_type() -> None:
    s = settings.from_env(
        {
            "STATICTRAIN_OPERATOR_NAMESPACES": "a, b,",
            "STATICTRAIN_OPERATOR_SCHEDULER_NAME": "default-scheduler",
            "STATICTRAIN_OPERATOR_SIDECAR_METRICS_PORT": "9500",
            "STATICTRAIN_OPERATOR_REQUEUE_S": "0.5",
            "STATICTRAIN_OPERATOR_TOLERATIONS": '[{"key": "k", "operator": "Exists"}]',
            "STATICTRAIN_OPERATOR_NODE_SELECTOR": '{"pool": "gpu"}',
        }
    )
    assert s.namespaces == ("a", "b")
    assert s.scheduler_name == "default-scheduler"
    assert s.sidecar_metrics_port == 9500
    assert s.requeue_s == 0.5
    assert s.tolerations == [{"key": "k", "operator": "Exists"}]
    assert s.node_selector == {"pool": "gpu"}


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("SIDECAR_METRICS_PORT", "http", "STATICTRAIN_OPERATOR_SIDECAR_METRICS_PORT='http' is not valid"),
        ("SIDECAR_METRICS_PORT", "70000", "must be a port number"),
        ("TOLERATIONS", '{"key": "k"}', "expected a JSON list"),
        ("NODE_SELECTOR", "pool=gpu", "STATICTRAIN_OPERATOR_NODE_SELECTOR='pool=gpu' is not valid"),
        ("BACKOFF_MAX_S", "0.5", "BACKOFF_MAX_S at least 1 and at least REQUEUE_S"),
        ("REQUEUE_S", "0", "REQUEUE_S must be > 0"),
        ("REQUEUE_S", "45", "got 45.0 and 30.0"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(settings.SettingsError, match=message.replace("[", r"\[")):
        settings.from_env({"STATICTRAIN_OPERATOR_" + name: value})


def test_every_field_is_documented() -> None:
    source = pathlib.Path(settings.__file__).read_text()
    for f in dataclasses.fields(settings.Settings):
        after = source.split(f"    {f.name}: ", 1)[1].split("\n", 2)[1]
        assert after.strip().startswith('"""'), f"{f.name} has no docstring"


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, "http://prometheus-server:9090"),
        ({"STATICTRAIN_PROMETHEUS_URL": "http://shared"}, "http://shared"),
        ({"STATICTRAIN_COST_PROMETHEUS_URL": "http://old", "STATICTRAIN_ANOMALY_PROMETHEUS_URL": "http://old"}, "http://old"),
        ({"STATICTRAIN_PROMETHEUS_URL": "http://shared", "STATICTRAIN_COST_PROMETHEUS_URL": "http://old"}, "http://shared"),
    ],
    ids=["default", "shared", "old-per-part-name", "shared-wins"],
)
def test_one_prometheus_url_for_every_part(env: dict[str, str], want: str) -> None:
    assert CostSettings.from_env(env).prometheus_url == want
    assert AnomalySettings.from_env(env).prometheus_url == want


def test_own_metrics_port_is_separate_from_the_sidecar_port() -> None:
    s = settings.from_env({"STATICTRAIN_OPERATOR_OWN_METRICS_PORT": "0"})
    assert (s.own_metrics_port, s.sidecar_metrics_port) == (0, 9400)
    with pytest.raises(settings.SettingsError, match="OWN_METRICS_PORT"):
        settings.from_env({"STATICTRAIN_OPERATOR_OWN_METRICS_PORT": "-1"})
