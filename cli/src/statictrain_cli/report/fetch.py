"""Run a report's queries through an injected Prometheus reader, with progress.

I/O happens only through the reader passed in; queries come from the one
selector builder. Long windows are split into chunks of at most
``MAX_POINTS`` evaluation points (Prometheus' per-series limit is 11,000).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from statictrain.cost import Sample
from statictrain.promql import range_duration, selector
from statictrain_cli.report.model import FLAGS_METRIC, JOB_METRICS, NODE_METRICS, ReportWindow
from statictrain_operator.prom import PromReader, Series

__all__ = ["BASELINE_LOOKBACK_S", "FILTER_LABELS", "MAX_POINTS", "Progress", "fetch", "job_filters"]

MAX_POINTS = 10_000
PARALLEL_QUERIES = 4
"""Report queries in flight at once."""
BASELINE_LOOKBACK_S = 3600.0
"""How far before the window a series' last value is looked for."""
FILTER_LABELS = {"namespace": "namespace", "team": "team", "commit": "commit", "job": "job_name"}

Progress = Callable[[int, int, str], None]


def job_filters(filters: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, values in filters.items():
        if name not in FILTER_LABELS:
            raise ValueError(f"unknown filter {name!r}; use one of {', '.join(FILTER_LABELS)}")
        if values:
            out[FILTER_LABELS[name]] = list(values)
    return out


def _chunks(window: ReportWindow) -> tuple[list[tuple[float, float]], float]:
    """(first, last) evaluation point of each range query, in chunks of at most MAX_POINTS, and their step.

    Prometheus evaluates a range query at ``start + k * step`` on its millisecond grid while that is not
    after ``end``; a step of, say, 4.791667 s is sent as 4.792 s and the 24th point would fall after the
    window's end and never be evaluated (the last bucket lost). So the points are chosen here, on that
    grid: the step in whole milliseconds, counted back from the window's last evaluation point
    ``end - 1 ms`` (always evaluated), as many as it takes for the first point's range to reach back to
    the window's first evaluation point. A point's bucket is the one whose end is nearest (see ``model``)."""
    start_ms, end_ms = round(window.eval_start * 1000), round(window.eval_end * 1000)
    step_ms = max(1, round(window.step_s * 1000))
    points = -(-(end_ms - start_ms) // step_ms)
    first_ms = end_ms - (points - 1) * step_ms  # in (start, start + step]
    out = []
    for first in range(0, points, MAX_POINTS):
        last = min(points - 1, first + MAX_POINTS - 1)
        out.append(((first_ms + first * step_ms) / 1000, (first_ms + last * step_ms) / 1000))
    return out, step_ms / 1000


def fetch(
    reader: PromReader,
    window: ReportWindow,
    filters: Mapping[str, Sequence[str]] | None = None,
    progress: Progress | None = None,
    *,
    baseline_lookback_s: float = BASELINE_LOOKBACK_S,
) -> tuple[dict[str, list[Series]], dict[str, list[Series]]]:
    """(job series by field, node series by field) for :func:`report.model.build_report`.

    Per series: its last value before the window (looking back ``baseline_lookback_s``, at least one
    step), stamped at the window's first evaluation point ``start - 1 ms``; then the last raw sample of
    every step of the millisecond grid that ends at ``end - 1 ms`` (``last_over_time`` over exactly one
    step, see ``_chunks``), so a series that ends between two evaluation points (an operator restart, a
    removed target) still contributes its last value and the totals reach the window's end. The first
    step may reach before the window's start; what it finds there is the baseline's value too.
    """
    any_of = job_filters(filters or {})
    plan = [("job", f, selector(m, any_of=any_of)) for f, m in {**JOB_METRICS, "flags": FLAGS_METRIC}.items()]
    plan += [("node", f, selector(m)) for f, m in NODE_METRICS.items()]
    chunks, step = _chunks(window)
    bucket = range_duration(step)
    lookback = range_duration(max(baseline_lookback_s, step))
    calls: list[tuple[int, bool, Callable[[], list[Series]]]] = []  # (plan index, baseline?, query)
    for i, (_, _, sel) in enumerate(plan):
        calls.append((i, True, partial(reader.query, f"last_over_time({sel}[{lookback}])", window.eval_start)))
        for lo, hi in chunks:
            q = f"last_over_time({sel}[{bucket}])"
            calls.append((i, False, partial(reader.query_range, q, lo, hi, step)))
    # the queries are independent: run a few at once (Prometheus evaluates while Python parses), merged in order
    with ThreadPoolExecutor(max_workers=PARALLEL_QUERIES) as pool:
        futures = [pool.submit(call) for _, _, call in calls]
        results: list[list[Series]] = []
        try:
            for done, fut in enumerate(futures, start=1):
                results.append(fut.result())
                if progress:
                    progress(done, len(calls), plan[calls[done - 1][0]][1])
        except BaseException:  # one query failed: the report cannot be made, so the queries not begun are not sent
            for fut in futures:
                fut.cancel()
            raise
    merged: list[dict[tuple[tuple[str, str], ...], list[Sample]]] = [defaultdict(list) for _ in plan]
    for (i, baseline, _), series in zip(calls, results, strict=True):
        for s in series:
            pts = [Sample(window.eval_start, p.v) for p in s.samples] if baseline else s.samples
            merged[i][tuple(sorted(s.labels.items()))].extend(pts)
    out: dict[str, dict[str, list[Series]]] = {"job": {}, "node": {}}
    for (kind, field_name, _), m in zip(plan, merged, strict=True):
        out[kind][field_name] = [Series(dict(k), tuple(v)) for k, v in sorted(m.items())]
    return out["job"], out["node"]
