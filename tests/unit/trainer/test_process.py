"""The real entry point as a process: exit codes, kill and resume, SIGTERM checkpoints."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from statictrain import envvars
from statictrain_trainer import checkpoint
from statictrain_trainer.exitcodes import ExitCode

from .conftest import RunEnv, read_raw, run_trainer, start_trainer, wait_for_step


def test_bad_entrypoint_is_a_user_error(trainer_env: RunEnv, tmp_path: Path) -> None:
    proc = run_trainer(trainer_env(**{envvars.ENTRYPOINT: "no_such_package.models:build"}))
    assert proc.returncode == ExitCode.USER_ERROR
    assert "cannot import module 'no_such_package.models'" in proc.stderr
    reason = json.loads((tmp_path / "termination-log").read_text())
    assert reason["kind"] == "USER_ERROR" and "no_such_package" in reason["message"]


def test_missing_function_is_a_user_error(trainer_env: RunEnv) -> None:
    proc = run_trainer(trainer_env(**{envvars.ENTRYPOINT: "statictrain_trainer.examples.tiny:nope"}))
    assert proc.returncode == ExitCode.USER_ERROR
    assert "has no function 'nope'" in proc.stderr


def test_bad_setting_is_a_user_error(trainer_env: RunEnv) -> None:
    proc = run_trainer(trainer_env(**{envvars.PRECISION: "fp8"}))
    assert proc.returncode == ExitCode.USER_ERROR
    assert "STATICTRAIN_PRECISION='fp8' is not one of fp32, bf16, fp16" in proc.stderr


def test_killed_then_restarted_resumes_from_checkpoint(trainer_env: RunEnv, tmp_path: Path) -> None:
    stats, ckpt = tmp_path / "stats", tmp_path / "ckpt"
    env = trainer_env(**{envvars.MAX_STEPS: "100000", envvars.CHECKPOINT_EVERY: "5"})
    with start_trainer(env) as proc:
        wait_for_step(proc, stats, 12)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    saved = checkpoint.list_steps(ckpt)
    assert saved and saved[0] >= 10
    before = len(read_raw(stats))
    resume_at = saved[0]
    finished = run_trainer({**env, envvars.MAX_STEPS: str(resume_at + 3)})
    assert finished.returncode == ExitCode.OK, finished.stderr[-2000:]
    after = read_raw(stats)[before:]
    assert [r["step"] for r in after] == [resume_at + 1, resume_at + 2, resume_at + 3]
    assert f"resumed from {ckpt / f'step-{resume_at:08d}.pt'}" in finished.stderr


def size(path: Path) -> int:
    """Bytes of a file that may be renamed away at any moment (0 once it is gone)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def test_killed_in_the_middle_of_a_checkpoint_write_resumes_from_the_last_complete_one(
    trainer_env: RunEnv, tmp_path: Path
) -> None:
    """Case 9 with a real kill: SIGKILL as soon as the trainer's next checkpoint is being written (its
    temporary file exists and is still shorter than a whole checkpoint); the restarted trainer loads the
    last complete one and never the partial file."""
    stats, ckpt = tmp_path / "stats", tmp_path / "ckpt"
    here = str(Path(__file__).resolve().parent)
    env = trainer_env(
        **{
            envvars.ENTRYPOINT: "wide_workload:build",
            envvars.MAX_STEPS: "100000",
            envvars.CHECKPOINT_EVERY: "2",
            "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]),
        }
    )
    partial: list[Path] = []
    with start_trainer(env) as proc:
        wait_for_step(proc, stats, 2)
        while not (saved := checkpoint.list_steps(ckpt)) and proc.poll() is None:
            time.sleep(0.01)
        whole = checkpoint.checkpoint_path(ckpt, saved[0]).stat().st_size
        deadline = time.monotonic() + 300
        while not partial and proc.poll() is None and time.monotonic() < deadline:
            partial = [p for p in ckpt.glob(".tmp-*") if 0 < size(p) < whole]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert partial, "no checkpoint write caught in the middle within 300 s"
    (leftover,) = partial
    assert leftover.exists() and leftover.stat().st_size < whole  # killed mid-write: the file is incomplete
    resume_at = checkpoint.list_steps(ckpt)[0]
    assert f"step-{resume_at:08d}.pt" not in leftover.name  # the partial one is a later step
    found = checkpoint.load_latest(ckpt)
    assert found is not None and found.step == resume_at
    before = len(read_raw(stats))
    finished = run_trainer({**env, envvars.MAX_STEPS: str(resume_at + 2), envvars.CHECKPOINT_EVERY: "0"})
    assert finished.returncode == ExitCode.OK, finished.stderr[-2000:]
    assert f"resumed from {ckpt / f'step-{resume_at:08d}.pt'}" in finished.stderr
    assert [r["step"] for r in read_raw(stats)[before:]] == [resume_at + 1, resume_at + 2]


def test_sigterm_writes_a_checkpoint_and_exits_preempted(trainer_env: RunEnv, tmp_path: Path) -> None:
    stats, ckpt = tmp_path / "stats", tmp_path / "ckpt"
    env = trainer_env(**{envvars.MAX_STEPS: "100000", envvars.CHECKPOINT_EVERY: "0"})
    with start_trainer(env) as proc:
        wait_for_step(proc, stats, 3)
        assert checkpoint.list_steps(ckpt) == []
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    assert proc.returncode == ExitCode.PREEMPTED
    last_step = read_raw(stats)[-1]["step"]
    assert checkpoint.list_steps(ckpt) == [last_step]
    found = checkpoint.load_latest(ckpt)
    assert found is not None and found.step == last_step
