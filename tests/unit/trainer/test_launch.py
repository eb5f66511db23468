"""statictrain-launch: a worker's exit code becomes the container's."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from statictrain_localcluster.waiting import eventually
from statictrain_trainer.launch import container_exit_code


@pytest.mark.parametrize(
    ("worker", "container"),
    [
        pytest.param(0, 0, id="ok"),
        pytest.param(42, 42, id="user-error-fails-the-job"),
        pytest.param(75, 75, id="infra-error-retried"),
        pytest.param(143, 143, id="preempted-after-checkpoint"),
        pytest.param(-9, 137, id="killed-by-sigkill"),
        pytest.param(-15, 143, id="killed-by-sigterm"),
        pytest.param(1, 1, id="unknown"),
        pytest.param(300, 1, id="out-of-range"),
    ],
)
def test_container_exit_code(worker: int, container: int) -> None:
    assert container_exit_code(worker) == container


def _launch(*cmd: str) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).parent / "statictrain-launch"
    return subprocess.Popen(
        [str(exe), "--standalone", "--nproc-per-node", "1", "--no-python", *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_the_agent_exits_with_the_workers_own_code_not_torchruns_1() -> None:
    proc = _launch("sh", "-c", "exit 42")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 42, err.decode()[-2000:]


def test_sigterm_reaches_the_worker_and_the_container_reports_143(tmp_path: Path) -> None:
    started = tmp_path / "started"
    proc = _launch("sh", "-c", f"trap 'echo got-term >&2; exit 143' TERM; touch {started}; while :; do sleep 0.1; done")
    eventually(started.exists, 120, "the worker to start")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()[-2000:]
    assert b"got-term" in err
