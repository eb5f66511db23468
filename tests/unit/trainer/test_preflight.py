"""statictrain-preflight on the repository's examples (real torch on the CPU, in its child process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from statictrain import preflight_message
from statictrain.pricing import parse_catalog, shipped_catalog_text
from statictrain_trainer import preflight
from statictrain_trainer.examples import graph_break

GIB = 1024**3


def _spec(entrypoint: str, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "image": "x",
        "entrypoint": entrypoint,
        "resources": {"gpusPerReplica": 1, "gpuModels": ["T4", "A100"]},
        "compile": {"mode": "default", "fullgraph": True},
        "precision": "bf16",
        "env": [{"name": "STATICTRAIN_BATCH_SIZE", "value": "16"}],
    }
    spec.update(extra)
    return {
        "apiVersion": "statictrain.io/v1alpha1",
        "kind": "StaticTrainingJob",
        "metadata": {"name": "p"},
        "spec": spec,
    }


def _run(
    tmp_path: Path, doc: dict[str, Any], *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    cmd = [sys.executable, "-m", "statictrain_trainer.preflight", "-f", str(path), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False, env=env)


RECOMPILING_MODEL = """
from torch import nn
from statictrain_trainer.examples import tiny


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = tiny.TinyMLP()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.net(x) * self.calls  # a Python int that changes every call: dynamo guards on it


def build():
    w = tiny.build()
    w.model = Counting()
    return w
"""


@pytest.mark.slow
def test_a_model_that_recompiles_every_step_is_reported(tmp_path: Path) -> None:
    (tmp_path / "recompiling_model.py").write_text(RECOMPILING_MODEL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    doc = _spec("recompiling_model:build", compile={"mode": "default", "fullgraph": True})
    proc = _run(tmp_path, doc, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["probe"]["compile"]["steps"][1]["recompiles"] >= 1
    assert any("recompiled" in w for w in out["warnings"])


@pytest.mark.slow
def test_gpt2_example_passes(tmp_path: Path) -> None:
    proc = _run(tmp_path, _spec("statictrain_trainer.examples.gpt2:build_small"), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["probe"]["graph_breaks"] == []
    assert out["probe"]["compile"]["recompiles"] == 0
    assert out["probe"]["compile"]["graphs"] == 1
    assert out["probe"]["batch_size"] == 16  # from spec.env
    # AdamW keeps two fp32 tensors per parameter: an oracle independent of the measurement.
    assert out["parts"]["optimizer_state"] == 2 * 4 * out["probe"]["parameters"]
    assert {r["gpu"] for r in out["gpus"]} == {"T4-16GB", "A100-40GB", "A100-80GB"}
    assert all(r["fits"] for r in out["gpus"])


@pytest.mark.slow
def test_graph_breaking_example_fails_with_the_location(tmp_path: Path) -> None:
    source = Path(graph_break.__file__)
    line = next(i for i, t in enumerate(source.read_text().splitlines(), 1) if ".item()" in t and "if " in t)
    log = tmp_path / "termination-log"
    proc = _run(tmp_path, _spec("statictrain_trainer.examples.graph_break:build"), "--termination-log", str(log))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{source}:{line}" in proc.stdout
    assert "fullgraph is set and the graph breaks 1 time(s)" in proc.stdout
    result = preflight_message.decode(log.read_text())  # what the operator reads from the pre-flight pod
    assert result["passed"] is False and result["graphBreaks"] == 1
    assert result["breaks"][0]["location"] == f"{source}:{line}"
    assert "fullgraph" in result["message"] and result.get("peakMemoryBytes", 0) > 0


@pytest.mark.slow
def test_graph_break_without_fullgraph_is_reported_not_failed(tmp_path: Path) -> None:
    doc = _spec("statictrain_trainer.examples.graph_break:build", compile={"mode": "default", "fullgraph": False})
    proc = _run(tmp_path, doc, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out["probe"]["graph_breaks"]) == 1
    assert out["probe"]["compile"]["graph_breaks_taken"] >= 1


def test_entrypoint_that_does_not_import_exits_2(tmp_path: Path) -> None:
    proc = _run(tmp_path, _spec("no_such_module_for_preflight:build"))
    assert proc.returncode == 2
    assert "cannot import module 'no_such_module_for_preflight'" in proc.stderr


def test_the_spec_as_json_and_the_termination_log_as_the_operators_pod_runs_it(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    spec = json.dumps(_spec("no_such_module_for_preflight:build")["spec"])
    cmd = [sys.executable, "-m", "statictrain_trainer.preflight", "--spec", spec, "--termination-log", str(log)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 2
    result = preflight_message.decode(log.read_text())
    assert result["passed"] is False and "cannot import module 'no_such_module_for_preflight'" in result["message"]
    bad = subprocess.run([*cmd[:4], "{not json", *cmd[5:]], capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "--spec is not JSON" in preflight_message.decode(log.read_text())["message"]


def test_bad_manifest_exits_2(tmp_path: Path) -> None:
    doc = _spec("x:y")
    doc["kind"] = "Pod"
    proc = _run(tmp_path, doc)
    assert proc.returncode == 2
    assert "expected StaticTrainingJob" in proc.stderr


def test_activations_extrapolate_linearly_in_batch() -> None:
    value, basis = preflight.activations_at({"2": 3000, "4": 5000}, 16)
    assert value == 1000 + 16 * 1000
    assert "batch 2" in basis and "4" in basis


def test_family_without_memory_means_every_catalog_size() -> None:
    catalog = parse_catalog(shipped_catalog_text())
    got = {g.model for g in preflight.candidate_gpus({"resources": {"gpuModels": ["A100", "H100-80GB"]}}, catalog)}
    assert got == {"A100-40GB", "A100-80GB", "H100-80GB"}


def _probe(params: int, acts: int) -> dict[str, Any]:
    return {
        "parameter_bytes": params, "gradient_bytes": params, "parameters": params // 4, "batch_size": 8,
        "activation_bytes": {"1": acts, "2": 2 * acts}, "graph_breaks": [],
        "compile": {"optimizer_state_bytes": 2 * params, "steps": [{"recompiles": 0}, {"recompiles": 0}]},
    }  # fmt: skip


def test_a_model_too_big_for_every_allowed_gpu_fails() -> None:
    catalog = parse_catalog(shipped_catalog_text())
    spec = {"resources": {"gpusPerReplica": 1, "gpuModels": ["T4", "L4"]}}
    probe = _probe(params=2 * GIB, acts=GIB)  # params+grads+Adam 8 GiB, activations 8 x 1 GiB
    peak, _, _ = preflight.peak_bytes(probe)
    assert peak == 8 * GIB + 8 * GIB
    rows = preflight.fit_rows(spec, peak, catalog)
    fits = {r["gpu"]: r["fits"] for r in rows}
    assert fits == {"T4-16GB": False, "L4-24GB": True}
    problems, _ = preflight.verdict(spec, probe, rows)
    assert problems == []
    rows = preflight.fit_rows(spec, 30 * GIB, catalog)
    problems, _ = preflight.verdict(spec, probe, rows)
    assert problems == ["the estimated peak memory fits no GPU model the spec allows"]


def test_second_step_recompile_is_a_warning() -> None:
    probe = _probe(params=4, acts=4)
    probe["compile"]["steps"][-1]["recompiles"] = 1
    problems, warnings = preflight.verdict({"resources": {"gpusPerReplica": 0}}, probe, [])
    assert problems == []
    assert warnings and "recompiled" in warnings[0]


def test_activation_bytes_match_the_tiny_mlps_saved_tensors_by_hand() -> None:
    """Oracle by hand: fp32 Linear(16->32) saves its input (16), tanh its output (32, also the second
    Linear's input, one storage), mse_loss input and target (4 + 4): 56 floats per sample, weights excluded."""
    import contextlib  # noqa: PLC0415

    from statictrain_trainer.examples import tiny  # noqa: PLC0415
    from statictrain_trainer.loop import LossModule  # noqa: PLC0415
    from statictrain_trainer.preflight_probe import activation_bytes  # noqa: PLC0415

    w = tiny.build()
    module = LossModule(w.model, w.loss)
    for n in (1, 3, 8):
        assert activation_bytes(module, w.batch, n, contextlib.nullcontext) == n * (16 + 32 + 4 + 4) * 4
