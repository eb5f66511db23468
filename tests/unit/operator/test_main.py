"""The entry point: optional handler modules, kopf settings."""

from __future__ import annotations

import logging

import pytest
from statictrain_operator import main, settings


def test_missing_optional_handler_modules_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        loaded = main.import_handlers(("statictrain_operator.no_such_part.handlers",))
    assert loaded == ["statictrain_operator.handlers"]
    assert "statictrain_operator.no_such_part.handlers is not installed" in caplog.text


def test_a_broken_import_inside_an_optional_module_is_not_hidden() -> None:
    with pytest.raises(ModuleNotFoundError):
        main.import_handlers(("statictrain_operator.children_that_do_not_exist.x.y",))


def test_parts_name_their_handler_modules() -> None:
    assert main.part_modules(settings.Settings().parts) == [
        "statictrain_operator.cost.handlers",
        "statictrain_operator.anomaly.handlers",
    ]
    assert main.part_modules(settings.from_env({"STATICTRAIN_OPERATOR_PARTS": ""}).parts) == []


def test_kopf_settings_filter_jobs_server_side() -> None:
    ks = main.kopf_settings(settings.Settings(max_workers=7))
    assert ks.execution.max_workers == 7
    assert list(ks.watching.label_selectors.values()) == [
        "app.kubernetes.io/managed-by=statictrain",
        "app.kubernetes.io/managed-by=statictrain",
        "statictrain.io/heartbeat=true",
    ]


def test_help_starts_without_a_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main.main(["--help"])
    assert e.value.code == 0
    assert "statictrain-operator" in capsys.readouterr().out
