"""Each deployable installs alone (core + its own distribution) into a fresh virtualenv, its entry
point starts, and it brings none of the packages it must not have (the Dockerfile installs the same set)."""

from __future__ import annotations

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
    ("trainer", "statictrain-train", ["prophet", "kopf", "kubernetes"]),
]


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
