"""Training on CPU: eager and compiled losses fall, 2-rank DDP matches 1 rank, the compile cache is found."""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from statictrain import channel, envvars
from statictrain_trainer import checkpoint
from statictrain_trainer.distributed import DistContext, pick_device
from statictrain_trainer.examples import tiny
from statictrain_trainer.exitcodes import ExitCode
from statictrain_trainer.loop import Trainer
from statictrain_trainer.settings import TrainerSettings, settings_from_env

from .conftest import RunEnv, read_raw, read_records, run_torchrun, run_trainer

CPU = DistContext(rank=0, local_rank=0, world_size=1, device=pick_device(0))


def _settings(tmp_path: Path, **env: str) -> TrainerSettings:
    base = {
        envvars.ENTRYPOINT: "statictrain_trainer.examples.tiny:build",
        envvars.COMPILE_MODE: "none",
        envvars.PRECISION: "fp32",
        envvars.CHECKPOINT_DIR: str(tmp_path / "ckpt"),
    }
    return settings_from_env({**base, **env})


def _falls(losses: list[float]) -> bool:
    return statistics.mean(losses[-5:]) < 0.5 * statistics.mean(losses[:3])


def test_eager_loss_falls(tmp_path: Path) -> None:
    settings = _settings(tmp_path, **{envvars.MAX_STEPS: "60"})
    result = Trainer(settings, tiny.build(), CPU).run()
    assert result.end_step == 60 and result.stopped_by == "max_steps"
    assert _falls(result.losses), result.losses


def test_grad_accumulation_matches_a_larger_batch(tmp_path: Path) -> None:
    acc = _settings(tmp_path / "a", **{envvars.MAX_STEPS: "5", envvars.GRAD_ACCUM_STEPS: "2"})
    big = _settings(tmp_path / "b", **{envvars.MAX_STEPS: "5", envvars.BATCH_SIZE: "16"})
    torch.manual_seed(0)
    a = Trainer(acc, tiny.build(), CPU).run()
    torch.manual_seed(0)
    b = Trainer(big, tiny.build(), CPU).run()
    assert a.losses == pytest.approx(b.losses, rel=1e-5)


def test_max_tokens_and_resume_skip_a_truncated_checkpoint(tmp_path: Path) -> None:
    first = Trainer(_settings(tmp_path, **{envvars.MAX_STEPS: "10", envvars.CHECKPOINT_EVERY: "5"}), tiny.build(), CPU)
    first.run()
    ckpt = tmp_path / "ckpt"
    assert checkpoint.list_steps(ckpt) == [10, 5]
    newest = checkpoint.checkpoint_path(ckpt, 10)
    newest.write_bytes(newest.read_bytes()[:100])
    resumed = Trainer(_settings(tmp_path, **{envvars.MAX_STEPS: "12"}), tiny.build(), CPU)
    assert resumed.start_step == 5
    result = resumed.run()
    assert (result.start_step, result.end_step) == (5, 12)


def test_two_rank_ddp_matches_one_rank_with_double_batch(trainer_env: RunEnv, tmp_path: Path) -> None:
    steps = "6"
    one = trainer_env(**{envvars.BATCH_SIZE: "8", envvars.MAX_STEPS: steps, envvars.STATS_DIR: str(tmp_path / "s1")})
    done = run_trainer(one)
    assert done.returncode == ExitCode.OK, done.stderr[-2000:]
    two = trainer_env(
        **{
            envvars.BATCH_SIZE: "4",
            envvars.MAX_STEPS: steps,
            envvars.STATS_DIR: str(tmp_path / "s2"),
            envvars.CHECKPOINT_DIR: str(tmp_path / "ckpt2"),
        }
    )
    ddp = run_torchrun(two, nproc=2)
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    r1, r2 = read_records(tmp_path / "s1"), read_records(tmp_path / "s2")
    assert [r.world_size for r in r2] == [2] * 6
    assert [r.samples for r in r1] == [r.samples for r in r2] == [8] * 6
    assert [r.loss for r in r2] == pytest.approx([r.loss for r in r1], rel=1e-5)
    assert r1[-1].loss < r1[0].loss
    # every rank's local seconds reach the one record (a straggler shows there); with one step in flight a
    # record carries the latest step already read back, so the first has none yet; seconds, not milliseconds
    assert all(len(r.rank_seconds) == 2 for r in r2)
    assert all(math.isnan(x) for x in r2[0].rank_seconds)
    assert all(0 < x <= sum(r.step_seconds for r in r2) for r in r2[1:] for x in r.rank_seconds)
    assert all(len(r.rank_seconds) == 1 for r in r1)


def _compiled_env(root: Path, name: str, **extra: str) -> dict[str, str]:
    """A fresh trainer process's environment: the tiny model compiled, the cache under root/cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATICTRAIN_")}
    env.update(
        {
            envvars.ENTRYPOINT: "statictrain_trainer.examples.tiny:build",
            envvars.COMPILE_MODE: "default",
            envvars.PRECISION: "fp32",
            envvars.MAX_STEPS: "40",
            envvars.COMPILE_CACHE_DIR: str(root / "cache"),
            envvars.PEAK_TFLOPS: "1",
            "OMP_NUM_THREADS": "1",
            envvars.STATS_DIR: str(root / name),
            "TORCHINDUCTOR_CACHE_DIR": str(root / f"inductor-{name}"),
        }
    )
    return env | extra


@pytest.fixture(scope="module")
def compiled_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two fresh processes compile the same tiny model with one shared cache (each its own inductor dir)."""
    root = tmp_path_factory.mktemp("compiled")
    for name in ("first", "second"):
        done = run_trainer(_compiled_env(root, name))
        assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    return root / "first", root / "second", root / "cache"


def test_compiled_loss_falls(compiled_runs: tuple[Path, Path, Path]) -> None:
    records = read_records(compiled_runs[0])
    assert _falls([r.loss for r in records])
    assert records[0].compile_seconds > 0


def test_channel_carries_the_documented_fields(compiled_runs: tuple[Path, Path, Path]) -> None:
    raw = read_raw(compiled_runs[0])
    documented = {f.name for f in fields(channel.StepRecord)}
    assert all(set(r) == documented for r in raw)
    records = read_records(compiled_runs[0])
    assert [r.step for r in records] == list(range(1, 41))
    for r in records:
        assert r.v == channel.SCHEMA_VERSION
        assert r.step_seconds > 0 and r.samples == 8 and r.tokens == 0
        assert math.isfinite(r.loss) and r.graph_breaks == 0 and r.recompiles == 0
        assert 0 < r.mfu < 1 and r.world_size == 1 and r.time > 0


def test_second_process_finds_the_compile_cache(compiled_runs: tuple[Path, Path, Path]) -> None:
    first, second, cache = compiled_runs
    assert not any(r.cache_hit for r in read_records(first))
    assert all(r.cache_hit for r in read_records(second))
    assert list(cache.glob("*/*.bin"))


def test_a_loaded_cache_none_of_whose_graphs_match_is_reported_unused_and_replaced(
    compiled_runs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Real artifacts of other graphs (the same model at another batch size) filed under this key: the
    load succeeds, nothing in it is used, so the run says so (not "hit") and saves its own in their place.
    (On an H200, GPU artifacts filed under the CPU's key behave the same: bench/compile_cache_devices.py.)"""
    first, _, cache = compiled_runs
    other = run_trainer(_compiled_env(tmp_path, "other", **{envvars.BATCH_SIZE: "4", envvars.MAX_STEPS: "2"}))
    assert other.returncode == ExitCode.OK, other.stderr[-3000:]
    [foreign] = (tmp_path / "cache").glob("*/*.bin")
    planted = tmp_path / "planted"
    shutil.copytree(cache, planted / "cache")
    [own] = (planted / "cache").glob("*/*.bin")
    assert own.parent.name != foreign.parent.name  # another workload key: other graphs
    own.write_bytes(foreign.read_bytes())
    done = run_trainer(_compiled_env(planted, "run"))
    assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    records = read_records(planted / "run")
    assert {r.cache_status for r in records} == {"unused"} and not any(r.cache_hit for r in records)
    assert "compile cache unused" in done.stderr
    assert [r.loss for r in records] == pytest.approx([r.loss for r in read_records(first)], rel=1e-6)
    assert own.read_bytes() != foreign.read_bytes()  # replaced by this run's own artifacts


def _run_pods(root: Path, name: str) -> list[Path]:
    """One job of two pods: two torchrun nodes of one process each, sharing root/cache; each pod's stats
    go to root/<name>-<node>."""
    torchrun = Path(sys.executable).with_name("torchrun")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pods, stats = [], []
    for node in (0, 1):
        stats.append(root / f"{name}-{node}")
        env = _compiled_env(root, stats[-1].name, **{envvars.MAX_STEPS: "4"})
        argv = [str(torchrun), "--nnodes=2", "--nproc_per_node=1", f"--node_rank={node}"]
        argv += ["--master_addr=127.0.0.1", f"--master_port={port}", "-m", "statictrain_trainer.main"]
        pods.append(subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True))
    errs = [p.communicate(timeout=600)[1] for p in pods]
    assert [p.returncode for p in pods] == [0, 0], errs[0][-2000:] + errs[1][-2000:]
    return stats


def test_every_pod_of_a_job_reports_an_unused_cache_not_only_the_first(tmp_path: Path) -> None:
    """Each pod's local rank 0 writes its own stats, so the second pod (global rank 1, which does not
    save) must say "unused" too when the cache under the job's key holds another workload's artifacts."""
    other = run_trainer(_compiled_env(tmp_path / "o", "other", **{envvars.BATCH_SIZE: "4", envvars.MAX_STEPS: "2"}))
    assert other.returncode == ExitCode.OK, other.stderr[-3000:]
    [foreign] = (tmp_path / "o" / "cache").glob("*/*.bin")
    _run_pods(tmp_path, "first")
    [own] = (tmp_path / "cache").glob("*/*.bin")
    own.write_bytes(foreign.read_bytes())
    for stats in _run_pods(tmp_path, "planted"):
        records = read_records(stats)
        assert [r.world_size for r in records] == [2] * 4
        assert {r.cache_status for r in records} == {"unused"}, stats.name


@pytest.mark.slow
def test_autotune_under_ddp_picks_batch_and_bucket_then_trains(trainer_env: RunEnv, tmp_path: Path) -> None:
    env = trainer_env(
        **{
            envvars.AUTOTUNE: "on",
            envvars.AUTOTUNE_BUDGET_S: "120",
            envvars.MAX_STEPS: "4",
            envvars.STATS_DIR: str(tmp_path / "stats"),
        }
    )
    done = run_torchrun(env, nproc=2)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "stats" / "autotune.json").read_text())
    ok = [o for o in report["outcomes"] if o["ok"]]
    assert ok and all(o["samples_per_s"] > 0 for o in ok)
    assert report["reason"].startswith(f"picked none@{report['chosen']['batch_size']}")
    bucket = report["bucket"]
    assert [o["bucket_cap_mb"] for o in bucket["outcomes"]] == [25, 50, 100, 200]
    assert bucket["chosen"] in (25, 50, 100, 200)
    records = read_records(tmp_path / "stats")
    assert [r.step for r in records] == [1, 2, 3, 4]
    assert {r.samples for r in records} == {2 * report["chosen"]["batch_size"]}
