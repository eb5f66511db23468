"""The trainer -> sidecar channel: versioned JSON-lines records in a shared directory.

The trainer appends one JSON object per line to ``<STATS_DIR>/steps.jsonl``;
the sidecar tails it. A record is a StepRecord; unknown keys are ignored so a
newer trainer may add fields without breaking an older sidecar. A record whose
``v`` is a higher major version than SCHEMA_VERSION, or that does not parse,
is counted as malformed and skipped, never fatal: ``decode`` raises nothing but
MalformedRecord, whatever the line holds.

Bounds, per field (a record outside them is malformed as a whole, so a counter
the sidecar sums never goes down and never turns NaN or infinite): every integer
field is a whole number from 0 to MAX_COUNT (exact as a float, Prometheus's only
number type); ``step_seconds`` is finite, from 0 to MAX_STEP_SECONDS (it feeds a
histogram's sum); ``rank_seconds`` holds at most MAX_RANKS entries; text fields
at most MAX_STR_CHARS characters. The other float fields are gauges: any JSON
number, null for NaN (``1e400`` reads as infinity and is kept as such).

Each trainer process on a GPU writes ``<STATS_DIR>/gpus/<local rank>.json``
holding ``{"v": 1, "uuid": "GPU-…", "local_rank": N}``: the GPUs of this pod.
The sidecar requests no GPU of its own, so on a node where NVML shows it every
GPU (or none) it reports exactly these.

Requests flow the other way through ``<STATS_DIR>/requests/``: the sidecar (or
a user with kubectl exec/cp) drops a ``profile-<id>.json`` file holding
``{"v": 1, "steps": N}``; the trainer picks it up, captures N steps with
torch.profiler into ``<STATS_DIR>/profiles/<id>/`` and removes the request.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

SCHEMA_VERSION = 1
STEPS_FILE = "steps.jsonl"
REQUESTS_DIR = "requests"
PROFILES_DIR = "profiles"
GPUS_DIR = "gpus"
CACHE_STATUSES = ("hit", "miss_empty", "miss_other_environment", "load_failed", "no_artifacts", "unused", "off")
"""Values of StepRecord.cache_status (a sidecar labels any other value ``other``)."""
SETTINGS_BY = ("spec", "autotune")
"""Values of StepRecord.settings_by (a sidecar labels any other value ``other``)."""
MAX_STR_CHARS = 96
"""Longest text field value accepted in a record."""
MAX_COUNT = 2**53
"""Largest integer field value accepted: every whole number up to it is exact as a float."""
MAX_STEP_SECONDS = 1e6
"""Longest step accepted, in seconds (about 11.6 days)."""
MAX_RANKS = 4096
"""Most entries accepted in ``rank_seconds`` (one gauge series each at every scrape)."""
MAX_UUID_CHARS = 96
"""Longest GPU UUID accepted (NVML's UUID buffer, NVML_DEVICE_UUID_V2_BUFFER_SIZE)."""
_MAX_QUOTED_CHARS = 40
"""Longest piece of a bad value quoted in a MalformedRecord reason (log lines stay short)."""


@dataclass(frozen=True)
class StepRecord:
    """One optimizer step as the trainer reports it."""

    step: int
    """Optimizer steps completed so far (global, resumes from checkpoints)."""
    step_seconds: float
    """Wall seconds of this step, including gradient accumulation."""
    tokens: int = 0
    """Tokens processed in this step by the ranks of this pod (0 if not a token model).

    One record per pod (local rank 0 writes it), carrying that pod's share: summing
    over the pods of a job (as cost accounting and anomaly queries do) gives the
    job's total, with no double counting on multi-pod jobs."""
    samples: int = 0
    """Samples processed in this step by the ranks of this pod (summed over its ranks, like tokens)."""
    loss: float = math.nan
    compile_seconds: float = 0.0
    """Seconds spent compiling so far in this process (first step(s) mostly)."""
    cache_hit: bool = False
    """Whether the compile cache was found and loaded at start."""
    cache_status: str = ""
    """Why: hit, miss_empty, miss_other_environment, load_failed, no_artifacts, unused, off (no cache
    directory or eager); empty from older trainers."""
    graph_breaks: int = 0
    recompiles: int = 0
    mfu: float = math.nan
    """Model FLOPs utilization estimate, NaN when FLOPs per token are unknown."""
    rank: int = 0
    world_size: int = 1
    time: float = 0.0
    """Unix time at the end of the step."""
    rank_seconds: tuple[float, ...] = ()
    """Each rank's local seconds of the latest step already read back when this one was launched
    (with one step in flight, two steps earlier in steady state; NaN before any), indexed by rank:
    from the step's start to the end of its last forward, before any gradient synchronization (so
    a slow rank stands out; waiting for it does not count). Empty when the trainer does not report it."""
    settings: str = ""
    """What the trainer runs with: compile mode @ per-rank batch + levers (``reduce-overhead@16+fp8``);
    empty from older trainers."""
    settings_by: str = ""
    """Who chose them: ``spec`` (the job's spec as written) or ``autotune`` (the runtime's tuner)."""
    autotune_speedup: float = math.nan
    """The tuner's pick over its first trial (the spec's batch in default mode), in samples per second
    measured by the tuner; NaN when not tuned or not known."""
    v: int = SCHEMA_VERSION


class MalformedRecord(ValueError):  # noqa: N818 (a record, named for what it is; the sidecar imports this name)
    """A channel line that is not a valid StepRecord."""


_FIELDS = {f.name: f for f in fields(StepRecord)}


def encode(record: StepRecord) -> str:
    """One JSON line (NaN written as null)."""

    def plain(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None if math.isnan(v) else v
        if isinstance(v, tuple):
            return [None if not math.isfinite(x) else x for x in v]
        return v

    data = {k: plain(v) for k, v in asdict(record).items()}
    return json.dumps(data, separators=(",", ":")) + "\n"


def _object(text: str) -> dict[str, Any]:
    """A JSON object of a schema version this code reads; MalformedRecord with the reason otherwise."""
    try:
        raw: Any = json.loads(text)
    except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than the parser's stack
        raise MalformedRecord(f"not JSON: {_quoted(str(e))}") from None
    if not isinstance(raw, dict):
        raise MalformedRecord("not a JSON object")
    version = raw.get("v", SCHEMA_VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        raise MalformedRecord(f"unsupported schema version {_quoted(repr(version))}")
    return raw


def _quoted(text: str) -> str:
    return text if len(text) <= _MAX_QUOTED_CHARS else text[:_MAX_QUOTED_CHARS] + f"… ({len(text)} chars)"


def _count(value: Any) -> int:
    """A whole number from 0 to MAX_COUNT (an integral float such as 3.0 too); TypeError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError
    if isinstance(value, float) and not value.is_integer():  # also NaN and infinities
        raise TypeError
    if not 0 <= value <= MAX_COUNT:
        raise TypeError
    return int(value)


def _number(value: Any) -> float:
    """A JSON number as a float, null as NaN; TypeError for anything else (booleans, huge integers)."""
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError
    return float(value)  # OverflowError (an ArithmeticError) for integers past the float range


def _field(typ: str, value: Any) -> Any:
    if typ == "int":
        return _count(value)
    if typ == "float":
        return _number(value)
    if typ == "bool":
        if not isinstance(value, bool):
            raise TypeError
        return value
    if typ.startswith("tuple[float"):
        if not isinstance(value, list) or len(value) > MAX_RANKS:
            raise TypeError
        return tuple(_number(x) for x in value)
    if typ == "str":
        if not isinstance(value, str) or len(value) > MAX_STR_CHARS:
            raise TypeError
        return value
    raise AssertionError(f"StepRecord field of unhandled type {typ}")


def decode(line: str) -> StepRecord:
    """Parse one line; raise MalformedRecord with the reason on any problem (and nothing else)."""
    raw = _object(line)
    kwargs: dict[str, Any] = {}
    for name, f in _FIELDS.items():
        if name not in raw:
            continue
        value = raw[name]
        typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        try:
            kwargs[name] = _field(typ, value)
        except (TypeError, ArithmeticError):
            raise MalformedRecord(f"field {name!r} has a bad value {_quoted(repr(value))}") from None
    for required in ("step", "step_seconds"):
        if required not in kwargs:
            raise MalformedRecord(f"missing field {required!r}")
    if not 0 <= kwargs["step_seconds"] <= MAX_STEP_SECONDS:
        raise MalformedRecord(f"step_seconds must be from 0 to {MAX_STEP_SECONDS:g}, got {kwargs['step_seconds']!r}")
    return StepRecord(**kwargs)


def encode_gpu(uuid: str, local_rank: int) -> str:
    """The content of ``gpus/<local_rank>.json`` for a trainer process on GPU ``uuid``."""
    return json.dumps({"v": SCHEMA_VERSION, "uuid": uuid, "local_rank": local_rank}) + "\n"


def decode_gpu(text: str) -> str:
    """The GPU UUID of one ``gpus/*.json`` file; MalformedRecord with the reason otherwise."""
    raw = _object(text)
    uuid = raw.get("uuid")
    if not isinstance(uuid, str) or not uuid.startswith(("GPU-", "MIG-")) or len(uuid) > MAX_UUID_CHARS:
        raise MalformedRecord(f"uuid must be an NVML UUID (GPU-… or MIG-…), got {_quoted(repr(uuid))}")
    return uuid
