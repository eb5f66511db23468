"""The subcommands that read Prometheus share one --prometheus-url (statictrain_cli.args.add_prometheus_url)."""

from __future__ import annotations

import pytest
from statictrain import envconfig
from statictrain_cli.args import DEFAULT_PROMETHEUS_URL
from statictrain_cli.main import build_parser

COMMANDS = [
    ["report", "--last", "1h"],
    ["estimate", "-f", "job.yaml"],
    ["gate", "--commit", "c", "--baseline", "b", "--max-regression", "5%"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_prometheus_url_default_env_and_flag(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(envconfig.PROMETHEUS_URL_ENV, raising=False)
    assert build_parser().parse_args(argv).prometheus_url == DEFAULT_PROMETHEUS_URL
    monkeypatch.setenv(envconfig.PROMETHEUS_URL_ENV, "http://prom.example:9090")
    assert build_parser().parse_args(argv).prometheus_url == "http://prom.example:9090"
    flag = build_parser().parse_args([*argv, "--prometheus-url", "http://other:9090"])
    assert flag.prometheus_url == "http://other:9090"
