"""Counting from raw Prometheus samples so that consecutive windows tile time exactly.

Every figure that accounting derives from a series is a sum over the series' raw
samples, and each raw sample belongs to exactly one half-open window ``[a, b)``:

* a **counter** (per process: tokens, steps executed, compile seconds, CPU seconds)
  contributes, for each sample ``s`` with ``a <= s.t < b``, its rise over the
  previous sample of the same series (which may lie before ``a``), or ``s.v``
  itself after a drop (a process restart starts again from 0). A series with no
  sample before ``s`` started at 0 (a new pod UID is a new process), so its first
  sample counts in full. Summed over windows that tile ``[t0, t1)``, this is the
  exact total of the series, whatever the window boundaries: nothing overlaps,
  nothing falls between. A counter that does not start at 0 with its series (NVML's GPU
  energy counts from when the driver loaded) is read with ``starts_at_zero=False``: a
  series' first sample is its baseline and counts nothing; drops are resets as above.
* a **gauge held until the next sample** (GPU utilization, memory) covers
  ``[s.t, next.t)`` capped at ``max_gap``; the part inside ``[a, b)`` belongs to
  the window. The last sample before ``a`` reaches into it ("held across windows").
* a **job's step** at time ``t`` is, per rank, the value of the rank's latest sample
  before ``t`` (over its pods), averaged over ranks (see statictrain.cost). A window's
  progress is ``step(b) - step(a)``, which telescopes over consecutive windows.

Prometheus' own ``increase()`` extrapolates to the range boundaries and drops the
first sample of a new series, so it is not used; the raw samples are read with a
range selector evaluated at ``b - 1 ms`` (samples in ``[a, b)`` on Prometheus'
millisecond grid). Pure; times are Unix seconds.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["Counter", "Increase", "Sample", "held_seconds", "increase", "latest_value"]


class Sample(NamedTuple):
    """One sample of a series: Unix time and value (a tuple: cheap to build by the hundred thousand)."""

    t: float
    v: float


@dataclass(frozen=True, slots=True)
class Counter:
    """One counter series as one window sees it."""

    prev: float | None
    """Value of the last sample before the window; None when the series has none (it starts from 0)."""
    samples: tuple[Sample, ...]
    """Samples inside the window, in time order."""
    prev_t: float | None = None
    """Time of the sample ``prev`` comes from, when known."""


@dataclass(frozen=True, slots=True)
class Increase:
    value: float
    """Sum of rises; after a drop the new value counts from 0. Never negative."""
    resets: int
    """Drops seen (process restarts)."""


def increase(counter: Counter, *, starts_at_zero: bool = True) -> Increase:
    """The counter's increase over the window (see the module docstring); with ``starts_at_zero`` False a
    series without a sample before the window takes its first sample as its baseline."""
    samples = counter.samples
    prev = counter.prev
    if prev is None and not starts_at_zero and samples:
        prev, samples = samples[0].v, samples[1:]
    prev = prev if prev is not None else 0.0
    total = 0.0
    resets = 0
    for s in samples:
        if s.v >= prev:
            total += s.v - prev
        else:
            resets += 1
            total += max(s.v, 0.0)
        prev = s.v
    return Increase(total, resets)


def held_seconds(
    samples: Sequence[Sample], lo: float, hi: float, *, max_gap: float, below: float | None = None
) -> tuple[float, float]:
    """(covered seconds, covered seconds with value < ``below``) of ``[lo, hi)``.

    Each sample holds until the next one, at most ``max_gap`` seconds; samples
    before ``lo`` reach into it. ``samples`` must be in time order. With
    ``below`` None the second figure is 0.
    """
    covered = low = 0.0
    for cur, nxt in itertools.pairwise([*samples, Sample(hi, 0.0)]):
        if cur.t >= hi:
            break
        a, b = max(lo, cur.t), min(hi, nxt.t, cur.t + max_gap)
        if b <= a:
            continue
        covered += b - a
        if below is not None and cur.v < below:
            low += b - a
    return covered, low


def held_mean(samples: Sequence[Sample], lo: float, hi: float, *, max_gap: float) -> float | None:
    """Time-weighted mean of a held gauge over ``[lo, hi)``; None when no sample covers any of it."""
    covered = weighted = 0.0
    for cur, nxt in itertools.pairwise([*samples, Sample(hi, 0.0)]):
        if cur.t >= hi:
            break
        a, b = max(lo, cur.t), min(hi, nxt.t, cur.t + max_gap)
        if b > a:
            covered += b - a
            weighted += (b - a) * cur.v
    return weighted / covered if covered > 0 else None


def latest_value(series: Iterable[Sequence[Sample]], before: float) -> float | None:
    """Value of the latest sample strictly before ``before`` over several series (ties: the largest)."""
    best: Sample | None = None
    for samples in series:
        for s in samples:
            if s.t < before and (best is None or s.t > best.t or (s.t == best.t and s.v > best.v)):
                best = s
    return best.v if best is not None else None
