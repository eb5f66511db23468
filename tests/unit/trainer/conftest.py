"""Helpers for the trainer's CPU tests: run the real entry point as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from statictrain import channel, envvars

TINY = "statictrain_trainer.examples.tiny:build"
RunEnv = Callable[..., dict[str, str]]


@pytest.fixture
def trainer_env(tmp_path: Path) -> RunEnv:
    """An environment for one trainer process: tiny model, fp32, eager, its own dirs under tmp_path."""

    def make(**overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STATICTRAIN_")}
        env.update(
            {
                envvars.ENTRYPOINT: TINY,
                envvars.COMPILE_MODE: "none",
                envvars.PRECISION: "fp32",
                envvars.STATS_DIR: str(tmp_path / "stats"),
                envvars.CHECKPOINT_DIR: str(tmp_path / "ckpt"),
                envvars.TERMINATION_LOG: str(tmp_path / "termination-log"),
                "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
                "OMP_NUM_THREADS": "1",
            }
        )
        env.update(overrides)
        return env

    return make


def run_trainer(env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statictrain_trainer.main"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_torchrun(env: dict[str, str], nproc: int, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The entry point under torchrun (standalone rendezvous on a free port)."""
    torchrun = Path(sys.executable).with_name("torchrun")
    return subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", str(nproc), "-m", "statictrain_trainer.main"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def start_trainer(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "statictrain_trainer.main"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_raw(stats_dir: Path) -> list[dict[str, Any]]:
    path = stats_dir / channel.STEPS_FILE
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]


def read_records(stats_dir: Path) -> list[channel.StepRecord]:
    path = stats_dir / channel.STEPS_FILE
    return [channel.decode(line) for line in path.read_text().splitlines()]


def wait_for_step(proc: subprocess.Popen[str], stats_dir: Path, step: int, limit_s: float = 300) -> None:
    """Poll the channel until a record for ``step`` appears (fails if the process exits first)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        records = read_raw(stats_dir)
        if records and records[-1]["step"] >= step:
            return
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            pytest.fail(f"trainer exited with {proc.returncode} before step {step}: {err[-2000:]}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no record for step {step} within {limit_s} s")
