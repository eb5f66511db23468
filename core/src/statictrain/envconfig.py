"""Fill a settings dataclass from environment variables: ``PREFIX + FIELD NAME IN UPPER CASE``.

Each value is converted to the type of the field's default: ``true``/``false``
for bools, ints, floats, comma-separated tuples of strings, JSON lists and
objects; anything else stays a string. A value that does not convert raises
EnvConfigError naming the variable. Unset variables keep the defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

PROMETHEUS_URL_ENV = "STATICTRAIN_PROMETHEUS_URL"
"""The one Prometheus URL setting of every part (operator's cost and anomaly loops, report CLI, extender)."""

T = TypeVar("T")

__all__ = ["PROMETHEUS_URL_ENV", "EnvConfigError", "convert", "fill"]


class EnvConfigError(ValueError):
    """An environment variable holds a value that does not convert to its field's type."""


def convert(env_name: str, raw: str, default: Any) -> Any:
    """``raw`` converted to the type of ``default``; EnvConfigError names ``env_name`` when it does not."""
    try:
        if isinstance(default, bool):
            if raw.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return raw.lower() == "true"
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, tuple):
            return tuple(p.strip() for p in raw.split(",") if p.strip())
        if isinstance(default, list | dict):
            value = json.loads(raw)
            if not isinstance(value, type(default)):
                raise ValueError(f"expected a JSON {type(default).__name__}")
            return value
        return raw
    except ValueError as e:
        raise EnvConfigError(f"{env_name}={raw!r} is not valid: {e}") from None


def fill(cls: type[T], prefix: str, env: Mapping[str, str], shared: Mapping[str, str] | None = None) -> T:
    """An instance of the dataclass ``cls`` from ``env``.

    ``shared`` maps field names to variables shared by several parts (e.g.
    ``prometheus_url`` -> STATICTRAIN_PROMETHEUS_URL); the shared variable wins
    over the part's own ``PREFIX + FIELD`` one, which still works when the shared
    one is unset.
    """
    base = cls()
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        names = [prefix + f.name.upper()]
        if shared and f.name in shared:
            names.insert(0, shared[f.name])
        for name in names:
            raw = env.get(name)
            if raw is not None:
                values[f.name] = convert(name, raw, getattr(base, f.name))
                break
    return cls(**values)
