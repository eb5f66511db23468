"""A real Prometheus holding given series: OpenMetrics text with timestamps, written into its TSDB by promtool's
backfill (Debian's binaries), so a test reads exactly the instants it wrote."""

from __future__ import annotations

import subprocess
from collections.abc import Generator
from pathlib import Path

from statictrain_localcluster import prometheus
from statictrain_localcluster.procs import free_port

__all__ = ["backfilled", "openmetrics"]

Families = dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]]
"""metric name -> (labels, [(unix seconds, value)]) per series."""


def openmetrics(families: Families) -> str:
    """The series as OpenMetrics text (type unknown), for promtool's backfill."""
    lines = []
    for name, series in families.items():
        lines.append(f"# TYPE {name} unknown")
        for labels, samples in series:
            lab = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines += [f"{name}{{{lab}}} {v:.12g} {t:.3f}" for t, v in samples]
    return "\n".join([*lines, "# EOF", ""])


def backfilled(root: Path, name: str, text: str) -> Generator[str, None, None]:
    """A real Prometheus whose TSDB holds ``text`` (OpenMetrics with timestamps); yields its URL."""
    data, src = root / name / "data", root / name / "series.om"
    data.mkdir(parents=True)
    src.write_text(text)
    made = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(src), str(data)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    port = free_port()
    (root / name / "prometheus.yml").write_text("global: {scrape_interval: 15s}\n")
    with (root / name / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen([str(prometheus.find_binary()), f"--config.file={root / name / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{port}",
                                 "--storage.tsdb.retention.time=30d"],
                                stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        prometheus.wait_ready(url, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
