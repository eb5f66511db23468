"""The trainer -> sidecar channel: versioned JSON-lines records in a shared directory.

The trainer appends one JSON object per line to ``<STATS_DIR>/steps.jsonl``;
the sidecar tails it. A record is a StepRecord; unknown keys are ignored so a
newer trainer may add fields without breaking an older sidecar. A record whose
``v`` is a higher major version than SCHEMA_VERSION, or that does not parse,
is counted as malformed and skipped, never fatal.

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
MAX_STR_CHARS = 64
"""Longest text field value accepted in a record."""


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
    except ValueError as e:
        raise MalformedRecord(f"not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise MalformedRecord("not a JSON object")
    version = raw.get("v", SCHEMA_VERSION)
    if not isinstance(version, int) or version < 1 or version > SCHEMA_VERSION:
        raise MalformedRecord(f"unsupported schema version {version!r}")
    return raw


def decode(line: str) -> StepRecord:
    """Parse one line; raise MalformedRecord with the reason on any problem."""
    raw = _object(line)
    kwargs: dict[str, Any] = {}
    for name, f in _FIELDS.items():
        if name not in raw:
            continue
        value = raw[name]
        typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        try:
            if typ == "int":
                if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
                    raise TypeError
                kwargs[name] = int(value)
            elif typ == "float":
                kwargs[name] = math.nan if value is None else float(value)
                if isinstance(value, bool):
                    raise TypeError
            elif typ == "bool":
                if not isinstance(value, bool):
                    raise TypeError
                kwargs[name] = value
            elif typ.startswith("tuple[float"):
                if not isinstance(value, list) or any(isinstance(x, bool) for x in value):
                    raise TypeError
                kwargs[name] = tuple(math.nan if x is None else float(x) for x in value)
            elif typ == "str":
                if not isinstance(value, str) or len(value) > MAX_STR_CHARS:
                    raise TypeError
                kwargs[name] = value
        except (TypeError, ValueError):
            raise MalformedRecord(f"field {name!r} has a bad value {value!r}") from None
    for required in ("step", "step_seconds"):
        if required not in kwargs:
            raise MalformedRecord(f"missing field {required!r}")
    if kwargs["step"] < 0 or not kwargs["step_seconds"] >= 0:
        raise MalformedRecord("step and step_seconds must be >= 0")
    return StepRecord(**kwargs)


def encode_gpu(uuid: str, local_rank: int) -> str:
    """The content of ``gpus/<local_rank>.json`` for a trainer process on GPU ``uuid``."""
    return json.dumps({"v": SCHEMA_VERSION, "uuid": uuid, "local_rank": local_rank}) + "\n"


def decode_gpu(text: str) -> str:
    """The GPU UUID of one ``gpus/*.json`` file; MalformedRecord with the reason otherwise."""
    raw = _object(text)
    uuid = raw.get("uuid")
    if not isinstance(uuid, str) or not uuid.startswith(("GPU-", "MIG-")):
        raise MalformedRecord(f"uuid must be an NVML UUID (GPU-… or MIG-…), got {uuid!r}")
    return uuid
