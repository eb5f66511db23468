"""NAB (Numenta Anomaly Benchmark) scoring, written from NAB's documented rules.

Pure functions: no files, no clocks. The rules (see shared/data/nab/README.md):

- the first ``min(floor(0.15 N), 750)`` records of a file are a probationary
  period, removed before scoring;
- each labelled window starts at ``-A_FN``; its first detection turns it into
  ``A_TP * sigma(y) / sigma(-1)`` with ``y = -(r - i + 1) / w``;
- a detection outside every window costs ``A_FP`` at full weight before the
  first window and ``A_FP * sigma((i - r) / (w - 1))`` after a window ``[l, r]``;
- one threshold per profile, optimised over the pooled records of all files;
- normalised score ``100 (S - S_null) / (S_perfect - S_null)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "PROBATION_CAP_RECORDS",
    "PROBATION_PERCENT",
    "FileRecords",
    "FileScore",
    "Profile",
    "ProfileResult",
    "ScoredRecord",
    "category_scores",
    "normalized",
    "null_and_perfect",
    "optimize_threshold",
    "parse_profiles",
    "prepare_file",
    "probationary_length",
    "scaled_sigmoid",
    "score_corpus",
    "score_file",
    "window_indices",
]

PROBATION_PERCENT = 0.15
PROBATION_CAP_RECORDS = 5000


@dataclass(frozen=True)
class Profile:
    """One NAB cost profile (``config/profiles.json``)."""

    name: str
    """Profile name as in profiles.json (standard, reward_low_FP_rate, reward_low_FN_rate)."""
    tp_weight: float
    """A_TP: reward for an on-time detection of a window."""
    fn_weight: float
    """A_FN: cost of a window with no detection."""
    fp_weight: float
    """A_FP: cost of a detection outside every window."""


@dataclass(frozen=True)
class ScoredRecord:
    """A record after the probationary period, ready for the threshold sweep."""

    score: float
    """The detector's anomaly score in [0, 1]."""
    window: int | None
    """Index of the window (within its file) holding the record, or None."""
    sigmoid: float
    """Unweighted value: sigma(y)/sigma(-1) in a window, sigma(y) (<= 0) outside one."""


@dataclass(frozen=True)
class FileRecords:
    """One file's scorable records and its window count."""

    name: str
    """File key, ``<category>/<file>.csv``."""
    records: tuple[ScoredRecord, ...]
    """Records after the probationary period, in time order."""
    n_windows: int
    """Number of labelled windows in the file."""


@dataclass(frozen=True)
class FileScore:
    """Raw score of one file at a fixed threshold."""

    name: str
    """File key."""
    raw: float
    """Sum of window contributions and false-positive costs."""
    n_windows: int
    """Windows in the file."""
    detected_windows: int
    """Windows with at least one detection."""
    false_positives: int
    """Detections outside every window."""


def parse_profiles(
    doc: Mapping[str, Mapping[str, Mapping[str, float]]],
) -> list[Profile]:
    """Profiles from the parsed ``profiles.json``; raises ValueError naming a missing weight."""
    out = []
    for name, body in doc.items():
        try:
            matrix = body["CostMatrix"]
            out.append(
                Profile(
                    name=name,
                    tp_weight=float(matrix["tpWeight"]),
                    fn_weight=float(matrix["fnWeight"]),
                    fp_weight=float(matrix["fpWeight"]),
                )
            )
        except KeyError as exc:
            raise ValueError(
                f"profile {name!r}: CostMatrix needs tpWeight, fnWeight, fpWeight (missing {exc})"
            ) from exc
    return out


def probationary_length(n_records: int) -> int:
    """Records at the start of a file that are never scored."""
    return int(min(math.floor(PROBATION_PERCENT * n_records), PROBATION_PERCENT * PROBATION_CAP_RECORDS))


def scaled_sigmoid(y: float) -> float:
    """NAB's scaled sigmoid: 2/(1+e^(5y)) - 1, forced to -1 beyond y = 3."""
    if y > 3.0:
        return -1.0
    return 2.0 / (1.0 + math.exp(5.0 * y)) - 1.0


def window_indices(timestamps: Sequence[str], windows: Sequence[Sequence[str]]) -> list[tuple[int, int]]:
    """Window edges as record indices (first occurrence of each edge timestamp).

    Timestamps are compared after dropping a fractional-seconds suffix, since
    label files write ``.000000`` and data files do not.
    """
    first: dict[str, int] = {}
    for i, ts in enumerate(timestamps):
        first.setdefault(_norm_ts(ts), i)
    out = []
    for pair in windows:
        if len(pair) != 2:
            raise ValueError(f"window {pair!r} must be [start, end]")
        start, end = (_norm_ts(p) for p in pair)
        if start not in first or end not in first:
            raise ValueError(f"window {pair!r}: edge timestamp not found in the data file")
        lo, hi = first[start], first[end]
        if hi < lo:
            raise ValueError(f"window {pair!r} ends before it starts")
        out.append((lo, hi))
    return sorted(out)


def _norm_ts(ts: str) -> str:
    return ts.split(".", 1)[0].strip()


def prepare_file(name: str, scores: Sequence[float], windows: Sequence[tuple[int, int]]) -> FileRecords:
    """Attach window membership and sigmoid weights to each post-probation record."""
    n = len(scores)
    for s in scores:
        if not (0.0 <= s <= 1.0) or math.isnan(s):
            raise ValueError(f"{name}: anomaly scores must lie in [0, 1], got {s}")
    probation = probationary_length(n)
    records = []
    pending = list(windows)
    current: tuple[int, int] | None = None
    current_idx = -1
    previous: tuple[int, int] | None = None
    for i in range(n):
        if current is None and pending and i >= pending[0][0]:
            current = pending.pop(0)
            current_idx = len(windows) - len(pending) - 1
        window: int | None = None
        if current is not None:
            lo, hi = current
            width = hi - lo + 1
            value = scaled_sigmoid(-(hi - i + 1) / width) / scaled_sigmoid(-1.0)
            window = current_idx
        elif previous is not None:
            lo, hi = previous
            width = hi - lo + 1
            value = scaled_sigmoid(abs(hi - i) / max(width - 1, 1))
        else:
            value = -1.0
        if i >= probation:
            records.append(ScoredRecord(score=float(scores[i]), window=window, sigmoid=value))
        if current is not None and i == current[1]:
            previous, current = current, None
    return FileRecords(name=name, records=tuple(records), n_windows=len(windows))


def score_file(f: FileRecords, profile: Profile, threshold: float) -> FileScore:
    """Raw NAB score of one file at a threshold (detection: score >= threshold)."""
    best: dict[int, float] = {}
    fp_cost = 0.0
    fps = 0
    for r in f.records:
        if r.score < threshold:
            continue
        if r.window is None:
            fp_cost += profile.fp_weight * r.sigmoid
            fps += 1
        elif r.window not in best:
            best[r.window] = profile.tp_weight * r.sigmoid
    raw = fp_cost + sum(best.values()) - profile.fn_weight * (f.n_windows - len(best))
    return FileScore(f.name, raw, f.n_windows, len(best), fps)


def optimize_threshold(files: Sequence[FileRecords], profile: Profile) -> tuple[float, float]:
    """Best (threshold, corpus raw score) by one sweep over all distinct scores.

    Starts above 1.0 (nothing detected); lowering the threshold through the
    pooled scores adds detections one group of equal scores at a time.
    """
    pooled: list[tuple[float, int, ScoredRecord]] = []
    n_windows = 0
    for fi, f in enumerate(files):
        n_windows += f.n_windows
        pooled.extend((r.score, fi, r) for r in f.records)
    pooled.sort(key=lambda t: -t[0])
    total = -profile.fn_weight * n_windows
    best_threshold, best_total = 1.1, total
    # Records of one window arrive in score order, not time order: keep the
    # best (earliest) value seen so far for each detected window.
    window_best: dict[tuple[int, int], float] = {}
    i = 0
    while i < len(pooled):
        level = pooled[i][0]
        while i < len(pooled) and pooled[i][0] == level:
            _, fi, r = pooled[i]
            i += 1
            if r.window is None:
                total += profile.fp_weight * r.sigmoid
                continue
            key = (fi, r.window)
            prev = window_best.get(key)
            if prev is None:
                total += profile.fn_weight + profile.tp_weight * r.sigmoid
                window_best[key] = r.sigmoid
            elif r.sigmoid > prev:
                total += profile.tp_weight * (r.sigmoid - prev)
                window_best[key] = r.sigmoid
        if total > best_total:
            best_threshold, best_total = level, total
    return best_threshold, best_total


def null_and_perfect(files: Sequence[FileRecords], profile: Profile) -> tuple[float, float]:
    """(S_null, S_perfect): the null detector (constant 0.5, threshold optimised) and a perfect one."""
    null_files = [
        FileRecords(f.name, tuple(ScoredRecord(0.5, r.window, r.sigmoid) for r in f.records), f.n_windows)
        for f in files
    ]
    _, s_null = optimize_threshold(null_files, profile)
    s_perfect = profile.tp_weight * sum(f.n_windows for f in files)
    return s_null, s_perfect


def normalized(raw: float, s_null: float, s_perfect: float) -> float | None:
    """100 (raw - S_null) / (S_perfect - S_null); None when there is no window to score against."""
    if s_perfect == s_null:
        return None
    return 100.0 * (raw - s_null) / (s_perfect - s_null)


@dataclass(frozen=True)
class ProfileResult:
    """A profile's optimised threshold, corpus score and per-file scores."""

    profile: str
    """Profile name."""
    threshold: float
    """Threshold chosen by the sweep."""
    raw: float
    """Corpus raw score at that threshold."""
    score: float
    """Normalised corpus score (100 perfect, 0 null)."""
    files: tuple[FileScore, ...]
    """Per-file raw scores at the threshold."""


def score_corpus(files: Sequence[FileRecords], profile: Profile) -> ProfileResult:
    """Optimise the threshold for a profile and normalise the corpus score."""
    if not any(f.n_windows for f in files):
        raise ValueError("the corpus has no labelled window: nothing to normalise against")
    threshold, raw = optimize_threshold(files, profile)
    s_null, s_perfect = null_and_perfect(files, profile)
    score = normalized(raw, s_null, s_perfect)
    assert score is not None
    per_file = tuple(score_file(f, profile, threshold) for f in files)
    return ProfileResult(profile.name, threshold, raw, score, per_file)


def category_scores(
    files: Sequence[FileRecords], result: ProfileResult, profile: Profile
) -> dict[str, dict[str, float | int | None]]:
    """Per-category raw and normalised scores at the corpus threshold (category = key before '/')."""
    by_cat: dict[str, list[int]] = {}
    for idx, f in enumerate(files):
        by_cat.setdefault(f.name.split("/", 1)[0], []).append(idx)
    out: dict[str, dict[str, float | int | None]] = {}
    for cat, idxs in sorted(by_cat.items()):
        raw = sum(result.files[i].raw for i in idxs)
        windows = sum(files[i].n_windows for i in idxs)
        s_null = -profile.fn_weight * windows
        out[cat] = {
            "raw": raw,
            "normalized": normalized(raw, s_null, profile.tp_weight * windows),
            "windows": windows,
            "detected_windows": sum(result.files[i].detected_windows for i in idxs),
            "false_positives": sum(result.files[i].false_positives for i in idxs),
        }
    return out
