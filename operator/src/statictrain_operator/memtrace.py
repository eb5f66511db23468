"""Where the operator's memory goes: a tracemalloc snapshot on SIGUSR2 and at exit, for benchmarks.

With ``STATICTRAIN_OPERATOR_TRACEMALLOC=PATH`` the entry point starts tracemalloc before kopf and
writes PATH (JSON) on every SIGUSR2 and once more when the process ends: the memory traced now and at
its peak, and the live allocations grouped three ways: by the file that allocated them, by the line,
and by the innermost frame outside the standard library and the interpreter's own packages (json,
asyncio, copy...), which names the owner (kopf's stores, aiohttp, this operator's indexes). Tracing
costs CPU and memory of its own (about the traced size again); leave it unset outside measurements.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib
import signal
import sysconfig
import tracemalloc
from typing import Any

__all__ = ["ENV", "FRAMES", "install", "report", "write"]

ENV = "STATICTRAIN_OPERATOR_TRACEMALLOC"
FRAMES = 8
"""Frames kept per allocation: enough to reach the caller outside json/asyncio (16 made a snapshot of
2,000 jobs take over 5 minutes on 2 busy cores)."""
TOP = 40

_STDLIB = tuple(
    p for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]} if p
)


def _owner(trace: tracemalloc.Traceback) -> str:
    """file:line of the innermost frame not in the standard library (the frame itself when all are)."""
    for frame in trace:  # most recent call first
        if not frame.filename.startswith(_STDLIB) and not frame.filename.startswith("<"):
            return f"{frame.filename}:{frame.lineno}"
    return f"{trace[0].filename}:{trace[0].lineno}"


def report(snapshot: tracemalloc.Snapshot, top: int = TOP) -> dict[str, Any]:
    """The snapshot's live allocations grouped by file, by line and by owner (see the module's docstring)."""
    current, peak = tracemalloc.get_traced_memory() if tracemalloc.is_tracing() else (0, 0)

    def rows(group: str) -> list[dict[str, Any]]:
        out = []
        for s in snapshot.statistics(group)[:top]:
            frame = s.traceback[0]
            where = frame.filename if group == "filename" else f"{frame.filename}:{frame.lineno}"
            out.append({"where": where, "kib": round(s.size / 1024, 1), "blocks": s.count})
        return out

    by_file, by_line = rows("filename"), rows("lineno")
    owners: dict[str, list[int]] = {}
    for trace in snapshot.traces:
        acc = owners.setdefault(_owner(trace.traceback), [0, 0])
        acc[0] += trace.size
        acc[1] += 1
    by_owner = [
        {"where": w, "kib": round(size / 1024, 1), "blocks": n}
        for w, (size, n) in sorted(owners.items(), key=lambda kv: -kv[1][0])[:top]
    ]
    return {
        "traced_mib": round(current / 2**20, 1),
        "traced_peak_mib": round(peak / 2**20, 1),
        "by_file": by_file,
        "by_line": by_line,
        "by_owner": by_owner,
    }


def write(path: pathlib.Path) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(report(snapshot), indent=1) + "\n")
    os.replace(tmp, path)


def install(environ: dict[str, str] | os._Environ[str] = os.environ) -> pathlib.Path | None:
    """Start tracing when ENV names a path; returns that path (None: not asked for)."""
    target = environ.get(ENV, "")
    if not target:
        return None
    path = pathlib.Path(target)
    tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR2, lambda *_: write(path))
    atexit.register(write, path)
    return path
