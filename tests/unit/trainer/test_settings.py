from __future__ import annotations

from pathlib import Path

import pytest
from statictrain import envvars
from statictrain_trainer.exitcodes import UserError
from statictrain_trainer.settings import settings_from_env

BASE = {envvars.ENTRYPOINT: "pkg.mod:build"}


def test_defaults() -> None:
    s = settings_from_env(BASE)
    assert s.entrypoint == "pkg.mod:build"
    assert s.compile_mode == "default"
    assert s.precision == "bf16"
    assert s.world_size == 1 and s.rank == 0
    assert s.checkpoint_dir is None and s.stats_dir is None
    assert not s.autotune
    assert s.max_steps == 0  # no hidden step limit: without spec.training.maxSteps the entrypoint decides


def test_all_fields_read() -> None:
    env = {
        **BASE,
        envvars.COMPILE_MODE: "max-autotune",
        envvars.COMPILE_FULLGRAPH: "true",
        envvars.COMPILE_DYNAMIC: "false",
        envvars.PRECISION: "fp16",
        envvars.BUCKET_CAP_MB: "100",
        envvars.GRAD_ACCUM_STEPS: "4",
        envvars.MAX_STEPS: "10",
        envvars.MAX_TOKENS: "5000",
        envvars.CHECKPOINT_DIR: "/ckpt",
        envvars.CHECKPOINT_EVERY: "7",
        envvars.CHECKPOINT_KEEP: "2",
        envvars.AUTOTUNE: "on",
        envvars.AUTOTUNE_BUDGET_S: "90",
        envvars.STATS_DIR: "/stats",
        envvars.BATCH_SIZE: "32",
        envvars.WORLD_SIZE: "4",
        "RANK": "3",
        "LOCAL_RANK": "1",
    }
    s = settings_from_env(env)
    assert (s.compile_mode, s.fullgraph, s.dynamic, s.precision) == ("max-autotune", True, False, "fp16")
    assert (s.bucket_cap_mb, s.grad_accum_steps, s.max_steps, s.max_tokens) == (100, 4, 10, 5000)
    assert (s.checkpoint_dir, s.checkpoint_every, s.checkpoint_keep) == (Path("/ckpt"), 7, 2)
    assert (s.autotune, s.autotune_budget_s, s.stats_dir, s.batch_size) == (True, 90.0, Path("/stats"), 32)
    assert (s.world_size, s.rank, s.local_rank) == (4, 3, 1)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param({}, "must be 'module:function'", id="no-entrypoint"),
        pytest.param({envvars.ENTRYPOINT: "nocolon"}, "must be 'module:function'", id="no-colon"),
        pytest.param(
            {**BASE, envvars.COMPILE_MODE: "fast"}, "STATICTRAIN_COMPILE_MODE='fast' is not one of", id="mode"
        ),
        pytest.param({**BASE, envvars.PRECISION: "fp8"}, "STATICTRAIN_PRECISION='fp8' is not one of", id="precision"),
        pytest.param(
            {**BASE, envvars.FP8_RECIPE: "blockwise"},
            "STATICTRAIN_FP8_RECIPE='blockwise' is not one of tensorwise, rowwise",
            id="fp8-recipe",
        ),
        pytest.param({**BASE, envvars.MAX_STEPS: "ten"}, "STATICTRAIN_MAX_STEPS='ten' is not an integer", id="int"),
        pytest.param({**BASE, envvars.MAX_STEPS: "0"}, "STATICTRAIN_MAX_STEPS=0 must be >= 1", id="min"),
        pytest.param({**BASE, envvars.COMPILE_FULLGRAPH: "maybe"}, "is not a boolean", id="bool"),
        pytest.param({**BASE, envvars.AUTOTUNE_BUDGET_S: "nan"}, "must be a finite number", id="nan"),
        pytest.param({**BASE, envvars.WORLD_SIZE: "2", "RANK": "2"}, "RANK=2 must be < WORLD_SIZE=2", id="rank"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        settings_from_env(env)


@pytest.mark.parametrize(
    ("env", "want"),
    [
        pytest.param({}, 1, id="single-process"),
        pytest.param({envvars.WORLD_SIZE: "16", "RANK": "9", "LOCAL_WORLD_SIZE": "8"}, 8, id="two-pods-of-8"),
        pytest.param({envvars.WORLD_SIZE: "2", "RANK": "1", "LOCAL_WORLD_SIZE": "8"}, 2, id="capped-at-world"),
    ],
)
def test_local_world_size_sizes_this_pods_share(env: dict[str, str], want: int) -> None:
    assert settings_from_env({**BASE, **env}).local_world_size == want


def test_the_label_names_what_runs_as_the_autotuner_does() -> None:
    s = settings_from_env({**BASE, envvars.COMPILE_MODE: "reduce-overhead", envvars.FP8: "true",
                           envvars.FP8_RECIPE: "rowwise", envvars.CHUNKED_LOSS: "true"})
    assert s.label(16) == "reduce-overhead@16+chunked_loss+fp8_rowwise"
    assert settings_from_env(BASE).label(8) == "default@8"
