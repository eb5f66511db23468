"""Waiting for the cluster to reach a state, for tests, benchmarks and the demo."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any, Protocol


class Kubectl(Protocol):
    """What ``crds_established`` calls: ``LocalCluster.kubectl`` and the bench clusters' own."""

    def __call__(self, *args: str, check: bool = ...) -> subprocess.CompletedProcess[str]: ...


def eventually(check: Callable[[], Any], timeout: float = 90.0, what: str = "", interval: float = 0.5) -> Any:
    """Poll until ``check()`` returns something truthy and return it; after ``timeout``
    seconds fail with ``what`` and the last value. Waiting, not timing: callers assert
    on values only."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; last value {last!r}")
        time.sleep(interval)


def crds_established(kubectl: Kubectl, names: list[str], timeout: float = 60.0) -> None:
    """Poll until every CustomResourceDefinition in ``names`` is Established. (``kubectl wait
    --for=condition=Established`` fails at once, instead of waiting, on a CRD just created whose status
    has no conditions yet: "accessor error: <nil> is of the type <nil>".)"""

    def established() -> bool:
        out = kubectl("get", *[f"crd/{n}" for n in names], "-o", "json", check=False)
        if out.returncode != 0:
            return False
        doc = json.loads(out.stdout)
        items = doc.get("items", [doc])
        return len(items) == len(names) and all(
            any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in (item.get("status") or {}).get("conditions") or []
            )
            for item in items
        )

    eventually(established, timeout, f"CRDs {', '.join(names)} to be Established")
