"""The CI cost gate (pure): compare a commit's $/1M tokens and tokens/s per GPU model with a baseline.

Inputs are per-commit figures (:class:`CommitFigures`), built from an exported
report JSON (``statictrain report --by commit --format json``) or from
Prometheus (``statictrain_cli.gate``). The verdict fails when a figure got worse by more
than the allowed fraction, and when either commit has no runs: a gate never
passes for lack of data. A figure that is missing or not finite (NaN, an
infinity, a negative cost, a sum that overflowed) gives no verdict at all
(``judged`` false): it never passes either.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Check",
    "CommitFigures",
    "Verdict",
    "compare",
    "figures_from_report_json",
    "parse_max_regression",
]


@dataclass(frozen=True)
class CommitFigures:
    commit: str
    usd: float
    tokens: float
    tokens_per_s: Mapping[str, float] = field(default_factory=dict)
    """GPU model -> mean tokens/s of one worker pod on that model; empty when unknown."""

    @property
    def usd_per_1m_tokens(self) -> float | None:
        return self.usd / self.tokens * 1e6 if self.tokens > 0 else None

    def unusable(self) -> list[str]:
        """What makes these figures unusable for a verdict: each figure that is not a finite, non-negative
        number (missing figures are NaN), and a $/1M tokens that overflows."""
        out = [
            f"{what} {v!r}"
            for what, v in (("cost (USD)", self.usd), ("tokens", self.tokens))
            if not (math.isfinite(v) and v >= 0)
        ]
        out += [
            f"tokens/s on {m} {v!r}" for m, v in sorted(self.tokens_per_s.items()) if not (math.isfinite(v) and v > 0)
        ]
        per = self.usd_per_1m_tokens
        if not out and per is not None and not math.isfinite(per):
            out.append(f"$/1M tokens ({self.usd!r} USD over {self.tokens!r} tokens overflows)")
        return out


@dataclass(frozen=True)
class Check:
    what: str
    baseline: float
    candidate: float
    worse_by: float
    """Fraction by which the candidate is worse (negative: better)."""
    failed: bool


@dataclass(frozen=True)
class Verdict:
    passed: bool
    checks: tuple[Check, ...]
    notes: tuple[str, ...]
    """Why it failed without a check (no runs), and what could not be compared."""
    judged: bool = True
    """False: a figure was missing or not finite, so there is no verdict (and no pass)."""

    def explain(self, commit: str, baseline: str, max_regression: float) -> str:
        head = "PASS" if self.passed else "FAIL" if self.judged else "CANNOT JUDGE"
        lines = [f"cost gate {head}: commit {commit} vs baseline {baseline}, max regression {max_regression:.1%}"]
        for c in self.checks:
            mark = "REGRESSION" if c.failed else "ok"
            lines.append(f"  {mark:10} {c.what}: {c.baseline:.6g} -> {c.candidate:.6g} ({_change(c.worse_by)})")
        lines.extend(f"  {n}" for n in self.notes)
        return "\n".join(lines) + "\n"


def _change(worse_by: float) -> str:
    if math.isinf(worse_by):
        return "infinitely worse" if worse_by > 0 else "infinitely better"
    if worse_by == 0:
        return "unchanged"
    return f"{worse_by:.1%} worse" if worse_by > 0 else f"{-worse_by:.1%} better"


def parse_max_regression(text: str) -> float:
    """``"5%"`` -> 0.05; a percentage from 0 to 1000."""
    t = text.strip()
    if not t.endswith("%"):
        raise ValueError(f"max regression {text!r}: write it as a percentage, like 5%")
    try:
        v = float(t[:-1])
    except ValueError:
        raise ValueError(f"max regression {text!r}: write it as a percentage, like 5%") from None
    if not 0 <= v <= 1000:
        raise ValueError(f"max regression {text!r} must be between 0% and 1000%")
    return v / 100


def _worse_by(baseline: float, candidate: float, higher_is_worse: bool) -> float:
    if baseline == candidate:
        return 0.0
    if baseline <= 0:
        return math.inf if higher_is_worse else -math.inf
    ratio = candidate / baseline
    return ratio - 1 if higher_is_worse else 1 - ratio


def compare(
    candidate: CommitFigures | None,
    baseline: CommitFigures | None,
    max_regression: float,
    *,
    commit: str,
    baseline_commit: str,
) -> Verdict:
    """Checks of $/1M tokens (higher is worse) and tokens/s per GPU model on both (lower is worse)."""
    notes: list[str] = []
    for name, figs in (("commit", candidate), ("baseline", baseline)):
        label = commit if name == "commit" else baseline_commit
        bad = figs.unusable() if figs is not None else []
        if bad:
            notes.append(
                f"cannot judge {name} {label!r}: {', '.join(bad)} is not a finite non-negative number "
                "(missing, not a number, NaN/Inf in the input, or a sum that overflowed)"
            )
    if notes:
        return Verdict(False, (), tuple(notes), judged=False)
    for name, figs in (("commit", candidate), ("baseline", baseline)):
        label = commit if name == "commit" else baseline_commit
        if figs is None:
            notes.append(f"no runs for {name} {label!r}: nothing recorded for it (check the commit label and window)")
        elif figs.usd_per_1m_tokens is None:
            notes.append(f"no tokens recorded for {name} {label!r} ({figs.usd:.6g} USD): cannot compute $/1M tokens")
    if notes:
        return Verdict(False, (), tuple(notes))
    assert candidate is not None and baseline is not None
    cand_per, base_per = candidate.usd_per_1m_tokens, baseline.usd_per_1m_tokens
    assert cand_per is not None and base_per is not None
    checks = [_check("$/1M tokens", base_per, cand_per, True, max_regression)]
    shared = sorted(set(candidate.tokens_per_s) & set(baseline.tokens_per_s))
    for model in shared:
        b, c = baseline.tokens_per_s[model], candidate.tokens_per_s[model]
        checks.append(_check(f"tokens/s per pod on {model}", b, c, False, max_regression))
    only = sorted(set(candidate.tokens_per_s) ^ set(baseline.tokens_per_s))
    if only:
        notes.append(f"tokens/s not compared on {', '.join(only)}: measured for one commit only")
    if not candidate.tokens_per_s and not baseline.tokens_per_s:
        notes.append("tokens/s per GPU model: not available from this source (only $/1M tokens compared)")
    return Verdict(not any(c.failed for c in checks), tuple(checks), tuple(notes))


def _check(what: str, baseline: float, candidate: float, higher_is_worse: bool, limit: float) -> Check:
    worse = _worse_by(baseline, candidate, higher_is_worse)
    return Check(what, baseline, candidate, worse, worse > limit)


def _figure(value: object) -> float:
    """A report's figure (a decimal string as the report writes it, or a JSON number); NaN when it is missing
    or not a number, so that the verdict says it cannot judge."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return math.nan
    try:
        return float(value)
    except (ValueError, OverflowError):
        return math.nan


def figures_from_report_json(docs: Iterable[Mapping[str, Any]], source: str = "report") -> dict[str, CommitFigures]:
    """Per-commit USD and tokens from reports exported with ``--by commit --format json`` (summed); a figure
    that is missing or not a number makes its commit's sum NaN (no verdict, see :meth:`CommitFigures.unusable`)."""
    usd: dict[str, float] = defaultdict(float)
    tokens: dict[str, float] = defaultdict(float)
    for doc in docs:
        if not isinstance(doc, Mapping) or not isinstance(doc.get("rows"), list):
            raise ValueError(f"{source}: not a statictrain report JSON (no 'rows' list)")
        if doc.get("group_by") != "commit":
            raise ValueError(
                f"{source}: report is grouped by {doc.get('group_by')!r}; export it with "
                "`statictrain report --by commit --format json`"
            )
        for i, row in enumerate(doc["rows"]):
            c = row.get("commit") if isinstance(row, Mapping) else None
            if not isinstance(c, str):
                raise ValueError(f"{source}: row {i} has no commit (a string): not a `report --by commit` row")
            usd[c] += _figure(row.get("usd"))
            tokens[c] += _figure(row.get("tokens"))
    return {c: CommitFigures(c, usd[c], tokens[c]) for c in usd}
