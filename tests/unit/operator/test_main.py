"""The entry point: optional handler modules, kopf settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from statictrain_operator import main, settings


def test_parts_are_switched_on_by_settings_and_checked_before_kopf_starts() -> None:
    parts = main.part_settings(settings.Settings().parts)
    assert list(parts) == ["progress", "cost", "anomaly"]
    assert main.part_settings(settings.from_env({"STATICTRAIN_OPERATOR_PARTS": ""}).parts) == {}
    with pytest.raises(settings.SettingsError, match="'costs'; the parts are progress, cost, anomaly"):
        main.part_settings(("costs",))


def test_a_bad_part_setting_stops_the_operator_before_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STATICTRAIN_COST_IDLE_THRESHOLD", "2")
    assert main.main(["--kubeconfig", "/nonexistent"]) == 2
    assert "STATICTRAIN_COST_IDLE_THRESHOLD must be within 0..1" in capsys.readouterr().err


def test_a_part_switched_off_by_its_own_settings_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATICTRAIN_ANOMALY_ENABLED", "false")
    assert list(main.part_settings(("cost", "anomaly"))) == ["cost"]


def test_the_parts_handler_modules_import() -> None:
    loaded = main.load_parts(main.part_settings(settings.Settings().parts))
    assert loaded == [
        "statictrain_operator.handlers",
        "statictrain_operator.progress.handlers",
        "statictrain_operator.cost.handlers",
        "statictrain_operator.anomaly.handlers",
    ]


def test_kopf_settings_filter_jobs_server_side() -> None:
    ks = main.kopf_settings(settings.Settings(max_workers=7))
    assert ks.execution.max_workers == 7
    assert list(ks.watching.label_selectors.values()) == [
        "app.kubernetes.io/managed-by=statictrain",
        "app.kubernetes.io/managed-by=statictrain",
        "app.kubernetes.io/managed-by=statictrain,statictrain.io/role=preflight",
        "statictrain.io/heartbeat=true",
    ]


def test_help_starts_without_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main.main(["--help"])
    assert e.value.code == 0
    assert "statictrain-operator" in capsys.readouterr().out


def test_the_chart_runs_the_operators_default_parts() -> None:
    """The chart sets STATICTRAIN_OPERATOR_PARTS from operator.parts: it must not drop a part (it once left out
    progress, so kubectl get stj showed no step in the demo)."""
    values = yaml.safe_load((Path(__file__).resolve().parents[3] / "charts/statictrain/values.yaml").read_text())
    assert tuple(values["operator"]["parts"]) == settings.Settings().parts
