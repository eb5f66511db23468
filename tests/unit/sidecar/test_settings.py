"""Sidecar settings from the environment: defaults, every variable, errors that say what to fix."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from statictrain import envvars
from statictrain_sidecar.settings import Identity, Settings, SettingsError, read_token


def test_defaults_with_an_empty_environment() -> None:
    s = Settings.from_env({})
    assert s == Settings()
    assert s.stats_dir is None and s.port == 9400 and s.sample_interval_s == 1.0 and s.nvml


def test_every_variable_is_read() -> None:
    env = {
        envvars.JOB_NAME: "gpt2",
        envvars.JOB_NAMESPACE: "team-nlp",
        envvars.COMMIT: "3f2c1ab",
        envvars.TEAM: "nlp",
        envvars.POD_NAME: "gpt2-worker-0",
        envvars.POD_UID: "1234-abcd",
        envvars.STATS_DIR: "/stats",
        envvars.METRICS_PORT: "9500",
        envvars.METRICS_BIND: "127.0.0.1",
        envvars.SAMPLE_INTERVAL_S: "0.1",
        envvars.SIDECAR_GPUS: "0, GPU-abc ,",
        envvars.SIDECAR_NVML: "false",
        envvars.PROFILE_MAX_STEPS: "20",
        envvars.PROFILE_TIMEOUT_S: "30",
        envvars.PROFILE_MAX_BYTES: "1000",
    }
    assert Settings.from_env(env) == Settings(
        identity=Identity("gpt2", "team-nlp", "3f2c1ab", "nlp", "gpt2-worker-0", "1234-abcd"),
        stats_dir=Path("/stats"),
        port=9500,
        bind="127.0.0.1",
        sample_interval_s=0.1,
        gpus=("0", "GPU-abc"),
        nvml=False,
        profile_max_steps=20,
        profile_timeout_s=30.0,
        profile_max_bytes=1000,
    )


def test_long_label_values_are_cut() -> None:
    s = Settings.from_env({envvars.COMMIT: "c" * 1000})
    assert len(s.identity.commit) == 253


BAD = [
    ("port-not-a-number", {envvars.METRICS_PORT: "http"}, envvars.METRICS_PORT),
    ("port-out-of-range", {envvars.METRICS_PORT: "70000"}, envvars.METRICS_PORT),
    ("interval-zero", {envvars.SAMPLE_INTERVAL_S: "0"}, envvars.SAMPLE_INTERVAL_S),
    ("interval-nan", {envvars.SAMPLE_INTERVAL_S: "nan"}, envvars.SAMPLE_INTERVAL_S),
    ("interval-words", {envvars.SAMPLE_INTERVAL_S: "1s"}, envvars.SAMPLE_INTERVAL_S),
    ("nvml-maybe", {envvars.SIDECAR_NVML: "maybe"}, envvars.SIDECAR_NVML),
    ("profile-steps-zero", {envvars.PROFILE_MAX_STEPS: "0"}, envvars.PROFILE_MAX_STEPS),
    ("profile-timeout-negative", {envvars.PROFILE_TIMEOUT_S: "-1"}, envvars.PROFILE_TIMEOUT_S),
    ("profile-bytes-negative", {envvars.PROFILE_MAX_BYTES: "-5"}, envvars.PROFILE_MAX_BYTES),
    # #33: int() and float() take more than ASCII digits
    ("port-arabic-indic-digits", {envvars.METRICS_PORT: "\u0669\u0664\u0660\u0660"}, envvars.METRICS_PORT),
    ("port-underscore", {envvars.METRICS_PORT: "9_400"}, envvars.METRICS_PORT),
    ("port-plus", {envvars.METRICS_PORT: "+9400"}, envvars.METRICS_PORT),
    ("interval-underscore", {envvars.SAMPLE_INTERVAL_S: "1_0"}, envvars.SAMPLE_INTERVAL_S),
    ("interval-arabic-indic", {envvars.SAMPLE_INTERVAL_S: "\u0661"}, envvars.SAMPLE_INTERVAL_S),
    ("bytes-huge", {envvars.PROFILE_MAX_BYTES: "9" * 5000}, envvars.PROFILE_MAX_BYTES),
]


@pytest.mark.parametrize(("env", "variable"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_values_name_the_variable(env: Any, variable: Any) -> None:
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env(env)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_token_file_that_is_no_small_file_is_refused_without_hanging(tmp_path: Path, kind: str) -> None:
    # #33: read_text() blocked forever on a FIFO and read /dev/zero until memory ran out
    path = tmp_path / "token"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_text("t" * (1 << 20))
    with pytest.raises(SettingsError, match=envvars.PROFILE_TOKEN_FILE):
        read_token(path)


def test_a_token_behind_a_secret_volumes_symlinks_is_read(tmp_path: Path) -> None:
    (tmp_path / "..data").mkdir()
    (tmp_path / "..data" / "token").write_text("0123456789abcdef0123\n")
    (tmp_path / "token").symlink_to("..data/token")  # how the kubelet mounts a Secret's key
    assert read_token(tmp_path / "token") == "0123456789abcdef0123"
