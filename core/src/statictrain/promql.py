"""The one place PromQL selectors are built.

Label values come from users (job names, team and commit labels) and reach
Prometheus inside double-quoted PromQL strings. Every query in statictrain is
built from :func:`selector`, which escapes values so that they match literally:
a value such as ``x"}[5m]) or vector(1) #`` stays one string.

PromQL string literals follow Go's escaping rules; we escape the backslash,
the double quote and every control character, and reject label and metric
names that are not plain Prometheus identifiers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from . import metrics

__all__ = [
    "Matcher",
    "escape_label_value",
    "escape_regex_value",
    "mean_step_seconds",
    "range_duration",
    "selector",
]

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_SIMPLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_REGEX_SPECIAL = re.compile(r"([\\.^$|?*+()\[\]{}])")

Op = Literal["=", "!=", "=~", "!~"]


@dataclass(frozen=True)
class Matcher:
    """One label matcher; ``value`` is the raw, unescaped value."""

    label: str
    op: Op
    value: str


def escape_label_value(value: str) -> str:
    """Escape ``value`` for use inside a double-quoted PromQL string (without the quotes)."""
    if not isinstance(value, str):
        raise TypeError(f"label value must be str, got {type(value).__name__}")
    out: list[str] = []
    for ch in value:
        if ch in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def escape_regex_value(value: str) -> str:
    """Quote RE2 metacharacters so that ``=~`` matches ``value`` literally."""
    return _REGEX_SPECIAL.sub(r"\\\1", value)


def _check_label_name(name: str) -> None:
    if not _LABEL_NAME.match(name):
        raise ValueError(f"invalid Prometheus label name {name!r}: use letters, digits and '_' only")


def selector(
    metric: str,
    labels: Mapping[str, str] | None = None,
    *,
    matchers: Sequence[Matcher] = (),
    any_of: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """Build ``metric{label="value",...}`` with every value escaped.

    ``labels`` are exact-equality matchers; ``any_of`` maps a label to a set of
    literal values (an anchored regex alternation of escaped literals);
    ``matchers`` take any operator, and their values are escaped as strings
    but regex operators keep the value's regex meaning.
    Labels are emitted in sorted order so the same input gives the same query.
    """
    if not _METRIC_NAME.match(metric):
        raise ValueError(f"invalid Prometheus metric name {metric!r}: use letters, digits, '_' and ':' only")
    parts: list[tuple[str, str, str]] = []
    for name, value in (labels or {}).items():
        parts.append((name, "=", value))
    for name, values in (any_of or {}).items():
        if isinstance(values, str):
            raise TypeError(f"any_of[{name!r}] must be a sequence of values, not a string")
        if not values:
            raise ValueError(f"any_of[{name!r}] is empty: it would match nothing")
        alternation = "|".join(escape_regex_value(v) for v in sorted(set(values)))
        parts.append((name, "=~", alternation))
    for m in matchers:
        if m.op not in ("=", "!=", "=~", "!~"):
            raise ValueError(f"invalid matcher operator {m.op!r} for label {m.label!r}")
        parts.append((m.label, m.op, m.value))
    for name, _, _ in parts:
        _check_label_name(name)
    body = ",".join(f'{n}{op}"{escape_label_value(v)}"' for n, op, v in sorted(parts))
    return f"{metric}{{{body}}}" if body else metric


def range_duration(seconds: float) -> str:
    """A PromQL duration for a range selector, in whole milliseconds (e.g. ``300000ms``)."""
    ms = round(seconds * 1000)
    if ms <= 0:
        raise ValueError(f"range duration must be positive, got {seconds!r} s")
    return f"{ms}ms"


def mean_step_seconds(
    window_seconds: float,
    by: Sequence[str] = (),
    match: Mapping[str, str] | None = None,
    any_of: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """Mean optimizer-step seconds over the window, from the trainers' step-time histogram: the rate of
    its sum over the rate of its count, summed ``by`` the given labels (all series when empty);
    ``match`` and ``any_of`` select series as in :func:`selector`."""
    w = range_duration(window_seconds)
    agg = f"sum by ({', '.join(by)}) " if by else "sum"
    total = selector(metrics.TRAIN_STEP_SECONDS + "_sum", match, any_of=any_of)
    count = selector(metrics.TRAIN_STEP_SECONDS + "_count", match, any_of=any_of)
    return f"{agg}(rate({total}[{w}])) / {agg}(rate({count}[{w}]))"
