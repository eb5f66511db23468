from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from statictrain_localcluster import procs


def test_dead_pidfiles_names_the_components_whose_process_is_gone(tmp_path: Path) -> None:
    """A component that exited (a reaped child), an unreadable pid file and a live one."""
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True, text=True
    )
    (tmp_path / "kube-controller-manager.pid").write_text(gone.stdout)
    (tmp_path / "kube-scheduler.pid").write_text("not a pid\n")
    (tmp_path / "kube-apiserver.pid").write_text(f"{os.getpid()}\n")
    assert procs.dead_pidfiles(tmp_path) == ["kube-controller-manager", "kube-scheduler"]
    assert procs.dead_pidfiles(tmp_path / "missing") == []
