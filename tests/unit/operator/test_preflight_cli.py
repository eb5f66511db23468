"""statictrain preflight: the operator CLI runs the trainer's check in a subprocess and passes its exit status on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _statictrain(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from statictrain_cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=False)


def test_entrypoint_that_does_not_import_exits_2(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "statictrain.io/v1alpha1",
        "kind": "StaticTrainingJob",
        "metadata": {"name": "p"},
        "spec": {"image": "x", "entrypoint": "no_such_module_for_preflight:build"},
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(doc))
    proc = _statictrain("preflight", "-f", str(path), "--reduced-batch", "1")
    assert proc.returncode == 2, proc.stderr
    assert "cannot import module 'no_such_module_for_preflight'" in proc.stderr


def test_the_operator_process_does_not_load_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    code = "import sys, statictrain_cli.main, statictrain_cli.preflight; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"
