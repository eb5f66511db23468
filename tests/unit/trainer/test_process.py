"""The real entry point as a process: exit codes, kill and resume, SIGTERM checkpoints."""

from __future__ import annotations

import json
import signal
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
