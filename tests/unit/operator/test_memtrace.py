"""The tracemalloc snapshot the entry point writes when asked (STATICTRAIN_OPERATOR_TRACEMALLOC)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import tracemalloc

from statictrain_operator import memtrace


def _held() -> list[bytearray]:
    return [bytearray(4096) for _ in range(1000)]  # about 4 MiB, allocated in this file


def test_the_report_names_the_file_and_owner_that_hold_the_memory() -> None:
    tracemalloc.start(memtrace.FRAMES)
    try:
        held = _held()
        report = memtrace.report(tracemalloc.take_snapshot())
    finally:
        tracemalloc.stop()
    assert len(held) == 1000
    here = pathlib.Path(__file__).resolve()
    top_file = report["by_file"][0]
    assert pathlib.Path(top_file["where"]).resolve() == here and top_file["kib"] >= 4000
    owner = report["by_owner"][0]
    assert owner["where"].startswith(f"{here}:") and owner["kib"] >= 4000 and owner["blocks"] >= 1000


def test_unset_traces_nothing() -> None:
    assert memtrace.install({}) is None
    assert not tracemalloc.is_tracing()


def test_a_process_writes_its_snapshot_on_sigusr2_and_at_exit(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "snap.json"
    code = (
        "import sys, time; from statictrain_operator import memtrace; memtrace.install()\n"
        "kept = [bytearray(4096) for _ in range(500)]\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
    )
    env = {**os.environ, memtrace.ENV: str(out)}
    with subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == b"ready"
        os.kill(proc.pid, signal.SIGUSR2)
        while not out.exists():  # written by the handler (renamed into place whole)
            assert proc.poll() is None
            time.sleep(0.05)
        on_signal = json.loads(out.read_text())
        assert on_signal["traced_mib"] >= 1.9 and on_signal["by_owner"][0]["where"].startswith("<string>")
        proc.stdin.write(b"\n")
        proc.stdin.close()
        assert proc.wait(60) == 0
    assert json.loads(out.read_text())["by_file"]  # written again at exit
