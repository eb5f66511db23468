"""The report's summary in plain words (pure): biggest spender, biggest idle waste, worst $/token regression.

Commits are compared in the order they first cost money in the window (each
with the one before it), over everything they ran: a change of GPU model or of
the model trained shows up as a change of $/token too, and the sentence says
which two commits it compares so a reader can check.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from statictrain_cli.report.model import Report
from statictrain_cli.report.text import usd_for_people

__all__ = ["Regression", "commit_order", "sentences", "usd", "worst_regression"]


def usd(value: float) -> str:
    """Dollars for people: three significant digits and a ``$`` sign (``$0.0394``, ``$16.0``)."""
    return usd_for_people(value)


def commit_order(report: Report) -> list[str]:
    """Commits in the order their jobs first cost money in the window (ties: by name)."""
    first: dict[str, int] = {}
    for key, buckets in report.job_buckets.items():
        i = next((i for i, v in enumerate(buckets) if v > 0), None)
        commit = report.job_commits.get(key, "")
        if i is not None:
            first[commit] = min(first.get(commit, i), i)
    return sorted(first, key=lambda c: (first[c], c))


@dataclass(frozen=True)
class Regression:
    before: str
    after: str
    usd_per_1m_before: float
    usd_per_1m_after: float

    @property
    def change(self) -> float:
        """Relative change of $/1M tokens, e.g. 0.25 for 25 % more expensive."""
        return self.usd_per_1m_after / self.usd_per_1m_before - 1


def worst_regression(report: Report) -> tuple[Regression | None, int]:
    """(the largest rise in $/1M tokens from a commit to the next, None when none rose; pairs compared)."""
    per_1m = {c: u / t * 1e6 for c, (u, t) in report.commit_tokens.items() if t > 0 and u > 0}
    order = [c for c in commit_order(report) if c in per_1m]
    pairs = [Regression(a, b, per_1m[a], per_1m[b]) for a, b in pairwise(order)]
    worst = max(pairs, key=lambda r: (r.change, r.after), default=None)
    return (worst if worst is not None and worst.change > 0 else None), len(pairs)


def sentences(report: Report) -> list[str]:
    """Three sentences for the top of the report."""
    out = []
    jobs = {k: sum(v) for k, v in report.job_buckets.items()}
    total = sum(jobs.values())
    if total > 0:
        (ns, job), top = max(jobs.items(), key=lambda kv: (kv[1], kv[0]))
        out.append(
            f"Biggest spender: job {ns}/{job} (commit {report.job_commits.get((ns, job)) or 'none'}), "
            f"{usd(top)}, {100 * top / total:.0f}% of all job cost in the window."
        )
    else:
        out.append("Biggest spender: no job cost anything in the window.")
    idle = [(r.idle_usd, f"{report.group_by} {'/'.join(r.key)} (allocated GPUs left idle)") for r in report.rows]
    idle.append((report.node_idle_usd, "unallocated node capacity (nobody's pods)"))
    waste, what = max(idle, key=lambda x: (x[0], x[1]))
    if waste > 0:
        share = f", {100 * waste / report.node_usd:.0f}% of node cost" if report.node_usd > 0 else ""
        out.append(f"Biggest idle waste: {what}, {usd(waste)}{share}.")
    else:
        out.append("Biggest idle waste: none, nothing was paid for idle in the window.")
    reg, pairs = worst_regression(report)
    if reg is not None:
        out.append(
            f"Worst $/token regression: commit {reg.after} at {usd(reg.usd_per_1m_after)} per 1M tokens, "
            f"{100 * reg.change:+.0f}% against commit {reg.before} before it ({usd(reg.usd_per_1m_before)})."
        )
    elif pairs:
        out.append("Worst $/token regression: none, no commit costs more per token than the one before it.")
    else:
        out.append("Worst $/token regression: not comparable, fewer than two commits trained tokens in the window.")
    return out
