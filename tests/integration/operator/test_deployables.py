"""Each deployable installs alone (core + its own distribution) into a fresh virtualenv, its entry
point starts, and it brings none of the packages it must not have (the Dockerfile installs the same set).

The trainer is only resolved (pip's dry run, the same resolver): installing it copies ~5 GB of CUDA
torch per run, and the trainer image built from the Dockerfile (`make images`) is that install,
started for real by the real-node tests (tests/integration/realnode)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import venv

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.slow

CASES = [
    # (distribution folder, entry point, packages that must not be installed)
    ("operator", "statictrain-operator", ["torch", "nvidia-ml-py"]),
    ("sidecar", "statictrain-sidecar", ["torch", "prophet", "kopf"]),
    ("extender", "statictrain-extender", ["torch", "prophet", "kopf"]),
]
TRAINER_FORBIDDEN = ["prophet", "kopf", "kubernetes"]


@pytest.mark.parametrize(("dist", "entry", "forbidden"), CASES, ids=[c[0] for c in CASES])
def test_installs_alone_and_starts(
    dist: str, entry: str, forbidden: list[str], tmp_path: pathlib.Path
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", str(REPO / "core"), str(REPO / dist)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    started = subprocess.run(
        [str(env_dir / "bin" / entry), "--help"], capture_output=True, text=True, timeout=300, check=False
    )
    assert started.returncode == 0, started.stderr[-3000:]
    assert "usage" in started.stdout.lower()
    listed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout.lower()
    names = {line.split("==")[0] for line in listed.splitlines()}
    assert names.isdisjoint(forbidden), f"{dist} pulls in {sorted(names & set(forbidden))}"
    assert sys.version_info >= (3, 11)


def test_trainer_resolves_without_operator_packages(tmp_path: pathlib.Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    report = tmp_path / "report.json"
    resolved = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--dry-run", "--report", str(report),
         str(REPO / "core"), str(REPO / "trainer")],
        capture_output=True, text=True, timeout=1800, check=False,
    )
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"torch", "statictrain-trainer"} <= names, sorted(names)
    assert names.isdisjoint(TRAINER_FORBIDDEN), f"trainer pulls in {sorted(names & set(TRAINER_FORBIDDEN))}"
