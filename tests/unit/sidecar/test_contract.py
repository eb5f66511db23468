"""The metric-name contract: metrics.py, what the collector exports, the README's Metrics section, the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from statictrain import envvars, metrics
from statictrain_sidecar.collector import EXPORTED_METRICS
from statictrain_sidecar.main import main

README = Path(__file__).resolve().parents[3] / "sidecar" / "README.md"
SIDECAR_PREFIXES = (
    "statictrain_sidecar_",
    "statictrain_gpu_",
    "statictrain_train_",
    "statictrain_channel_",
    "statictrain_profile_",
)


def readme_metrics_section() -> str:
    text = README.read_text()
    match = re.search(r"^## Metrics\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, "sidecar/README.md needs a '## Metrics' section"
    return match.group(1)


def test_readme_lists_exactly_the_exported_metrics() -> None:
    listed = set(re.findall(r"^\| `(statictrain_[a-z0-9_]+)`", readme_metrics_section(), re.M))
    assert listed == set(EXPORTED_METRICS)


def test_every_sidecar_name_in_metrics_py_is_exported() -> None:
    names = {v for k, v in vars(metrics).items() if k.isupper() and isinstance(v, str) and k != "PREFIX"}
    sidecar_names = {n for n in names if n.startswith(SIDECAR_PREFIXES)}
    assert sidecar_names == set(EXPORTED_METRICS)


@pytest.mark.parametrize("name", EXPORTED_METRICS)
def test_names_follow_prometheus_conventions(name: Any) -> None:
    assert re.fullmatch(r"statictrain_[a-z][a-z0-9_]*", name)
    assert not name.endswith(("_milliseconds", "_ms", "_kb", "_mb", "_percent")), "base units only"


def test_help_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--interval" in out and envvars.STATS_DIR in out


def test_bad_environment_exits_2_with_the_variable_to_fix() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "statictrain_sidecar.main", "--port", "0"],
        env={envvars.SAMPLE_INTERVAL_S: "soon", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert envvars.SAMPLE_INTERVAL_S in proc.stderr
