"""Resume: a checkpoint that verifies but does not fit the model falls back to the one before it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from statictrain import envvars
from statictrain_trainer import checkpoint
from statictrain_trainer.distributed import DistContext, pick_device
from statictrain_trainer.examples import tiny
from statictrain_trainer.exitcodes import ExitCode, UserError
from statictrain_trainer.loop import Trainer
from statictrain_trainer.settings import TrainerSettings, settings_from_env
from torch import nn

from .conftest import RunEnv, run_trainer

CPU = DistContext(rank=0, local_rank=0, world_size=1, device=pick_device(0))


def _settings(ckpt: Path, max_steps: int, every: int = 0) -> TrainerSettings:
    return settings_from_env(
        {
            envvars.ENTRYPOINT: "statictrain_trainer.examples.tiny:build",
            envvars.COMPILE_MODE: "none",
            envvars.PRECISION: "fp32",
            envvars.CHECKPOINT_DIR: str(ckpt),
            envvars.MAX_STEPS: str(max_steps),
            envvars.CHECKPOINT_EVERY: str(every),
        }
    )


def _other_model_state() -> dict[str, object]:
    """A checkpoint's state for a wider model than tiny's (same keys, other shapes)."""
    model = nn.Sequential(nn.Linear(tiny.IN_FEATURES, 64), nn.Tanh(), nn.Linear(64, tiny.OUT_FEATURES))
    opt = torch.optim.AdamW(model.parameters())
    model(torch.zeros(1, tiny.IN_FEATURES)).sum().backward()
    opt.step()
    return {"model": {f"net.{k}": v for k, v in model.state_dict().items()}, "optimizer": opt.state_dict()}


def test_a_newer_checkpoint_that_does_not_fit_falls_back_to_the_one_before(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = tmp_path / "ckpt"
    Trainer(_settings(ckpt, 10, every=5), tiny.build(), CPU).run()
    checkpoint.save(ckpt, 15, _other_model_state(), keep=5)
    assert checkpoint.list_steps(ckpt) == [15, 10, 5]
    with caplog.at_level(logging.WARNING):
        resumed = Trainer(_settings(ckpt, 12), tiny.build(), CPU)
    assert resumed.start_step == 10
    assert f"checkpoint {ckpt / 'step-00000015.pt'} does not fit this model" in caplog.text
    assert "'net.0.weight' is (64, 16) in the checkpoint, (32, 16) in the model" in caplog.text
    result = resumed.run()
    assert (result.start_step, result.end_step) == (10, 12)
    assert checkpoint.list_steps(ckpt)[0] == 15  # the one that did not fit is left as it is


def test_an_optimizer_state_of_another_layout_falls_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ckpt = tmp_path / "ckpt"
    Trainer(_settings(ckpt, 5), tiny.build(), CPU).run()
    good = checkpoint.load_latest(ckpt)
    assert good is not None
    other = _other_model_state()["optimizer"]
    checkpoint.save(ckpt, 8, {**good.state, "optimizer": other}, keep=5)
    with caplog.at_level(logging.WARNING):
        resumed = Trainer(_settings(ckpt, 6), tiny.build(), CPU)
    assert resumed.start_step == 5
    assert "step-00000008.pt does not fit this model (optimizer" in caplog.text


def test_checkpoints_of_which_none_fits_are_a_user_error_that_says_what_to_do(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    checkpoint.save(ckpt, 20, _other_model_state(), keep=5)
    with pytest.raises(UserError, match=f"no checkpoint in {ckpt} fits this model .*{envvars.CHECKPOINT_DIR}"):
        Trainer(_settings(ckpt, 25), tiny.build(), CPU)
    assert checkpoint.list_steps(ckpt) == [20]  # nothing overwritten or pruned


def test_none_fits_exits_with_the_user_error_code(trainer_env: RunEnv, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    checkpoint.save(ckpt, 20, _other_model_state(), keep=5)
    proc = run_trainer(trainer_env(**{envvars.MAX_STEPS: "25"}))
    assert proc.returncode == ExitCode.USER_ERROR, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    reason = json.loads((tmp_path / "termination-log").read_text())
    assert reason["kind"] == "USER_ERROR" and "fits this model" in reason["message"]


def test_only_unreadable_checkpoints_start_at_step_zero(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "step-00000007.pt").write_bytes(b"garbage")
    (ckpt / "step-00000007.json").write_text('{"format": 2, "step": 7, "bytes": 7, "sha256": "' + "0" * 64 + '"}')
    assert Trainer(_settings(ckpt, 3), tiny.build(), CPU).start_step == 0
