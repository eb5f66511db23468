"""Each deployable installs alone (core + its own distribution) into a fresh virtualenv, its entry
point starts, and it brings none of the packages it must not have (the Dockerfile installs the same set).
The CLI installs as a user's laptop or CI runner would (core + operator + cli, no kopf: that is the
operator's `runtime` extra) and runs a real offline command there.

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

CORPUS = REPO / "bench" / "data" / "training_faults"

CASES = [
    # (distribution folders after core, entry point, packages that must not be installed)
    (["operator[runtime]"], "statictrain-operator", ["torch", "nvidia-ml-py"]),
    (["sidecar"], "statictrain-sidecar", ["torch", "prophet", "kopf"]),
    (["extender"], "statictrain-extender", ["torch", "prophet", "kopf"]),
    (["operator", "cli"], "statictrain", ["kopf", "torch", "nvidia-ml-py"]),
]
TRAINER_FORBIDDEN = ["prophet", "kopf", "kubernetes"]


def run(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize(("dists", "entry", "forbidden"), CASES, ids=[c[1] for c in CASES])
def test_installs_alone_and_starts(
    dists: list[str], entry: str, forbidden: list[str], tmp_path: pathlib.Path
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py, bin_dir = env_dir / "bin" / "python", env_dir / "bin"
    install = run(py, "-m", "pip", "install", "-q", REPO / "core", *(f"{REPO}/{d}" for d in dists), timeout=1800)
    assert install.returncode == 0, install.stderr[-3000:]
    started = run(bin_dir / entry, "--help")
    assert started.returncode == 0, started.stderr[-3000:]
    assert "usage" in started.stdout.lower()
    listed = subprocess.run(
        [str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout.lower()
    names = {line.split("==")[0] for line in listed.splitlines()}
    assert names.isdisjoint(forbidden), f"{dists} pulls in {sorted(names & set(forbidden))}"
    assert sys.version_info >= (3, 11)
    if entry == "statictrain":
        cli_runs_without_the_operator_runtime(bin_dir, tmp_path)


def cli_runs_without_the_operator_runtime(bin_dir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    # the operator's own command is there (same distribution) and says what to install, no traceback
    op = run(bin_dir / "statictrain-operator")
    assert op.returncode == 1 and "statictrain-operator[runtime]" in op.stderr and "Traceback" not in op.stderr
    # a real command, offline: one recorded H200 fault through the replay and the operator's detector
    rec = tmp_path / "corpus"
    (rec / "hang-short").mkdir(parents=True)
    for f in (CORPUS / "hang-short").iterdir():
        (rec / "hang-short" / f.name).write_bytes(f.read_bytes())
    labels = json.loads((CORPUS / "labels.json").read_text())
    (rec / "labels.json").write_text(json.dumps({"hang-short": labels["hang-short"]}))
    out = tmp_path / "report.json"
    ran = run(bin_dir / "statictrain", "anomalies", "evaluate", "--series", rec, "--labels", rec / "labels.json",
              "--format", "json", "--out", out, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    summary = json.loads(out.read_text())["summary"]
    assert summary["windows"] == summary["windows_detected"] == 1


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
