"""The optional pre-flight pod (spec.preflight): whether it holds the workers back, and status.preflight.

Pure, no I/O. With ``spec.preflight.enabled`` the converger asks ``gate`` before it plans the
workers, as long as the worker Job does not exist: the pre-flight pod is created first
(children.preflight_pod), the workers only once it passed, and a failed check leaves the job
Failed without any worker. The verdict comes from the pod the job owns and nothing else it
says: its phase, the exit code of its container and the container's termination message
(statictrain.preflight_message: compact JSON, read field by field); it passes only when all
three agree. Once a result is in status, it stands even if the pod is deleted; the check runs
once per job (not again when the workers are rebuilt).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from statictrain import api, preflight_message

from . import children
from .reconcile import Plan
from .settings import Settings

__all__ = ["enabled", "gate", "observe"]

_DONE = ("Passed", "Failed")


def enabled(spec: api.Spec) -> bool:
    return bool((spec.get("preflight") or {}).get("enabled", api.DEFAULTS["preflight"]["enabled"]))


def _terminated(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for st in (pod.get("status") or {}).get("containerStatuses") or []:
        if st.get("name") == children.PREFLIGHT:
            return (st.get("state") or {}).get("terminated") or {}
    return {}


def _clip(text: str) -> str:
    limit = preflight_message.MAX_MESSAGE
    return text if len(text) <= limit else text[: limit - 3] + "..."


def observe(pod: Mapping[str, Any]) -> api.PreflightStatus:
    """status.preflight from the pre-flight pod as the API server reports it."""
    name = pod["metadata"]["name"]
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    if phase not in ("Succeeded", "Failed"):
        return {"phase": "Running", "pod": name, "message": f"pre-flight pod {name} is {phase}"}
    term = _terminated(pod)
    code = term.get("exitCode")
    ended = f"pre-flight pod {name} {phase} (exit code {code}"
    ended += f", {status['reason']}: {status.get('message', '')})" if status.get("reason") else ")"
    try:
        result = preflight_message.decode(term.get("message"))
    except ValueError as e:
        return {"phase": "Failed", "pod": name, "passed": False, "message": _clip(f"{ended} without a result: {e}")}
    passed = result["passed"] and phase == "Succeeded" and code == 0
    out: api.PreflightStatus = {**result, "phase": "Passed" if passed else "Failed", "pod": name, "passed": passed}
    if result["passed"] and not passed:
        out["message"] = _clip(f"{ended}, though its result says it passed: {result['message']}")
    return out


def gate(
    owner: children.Owner,
    settings: Settings,
    pod: Mapping[str, Any] | None,
    recorded: api.PreflightStatus | None,
) -> tuple[api.PreflightStatus | None, Plan | None]:
    """(status.preflight, the plan while the pre-flight holds the workers back; None once it passed).

    ``pod`` is the observed pre-flight pod, ``recorded`` what status.preflight holds. A suspended job
    gets no pre-flight pod (and no workers) until it is resumed.
    """
    if pod is not None and not any(r.get("uid") == owner.uid for r in pod["metadata"].get("ownerReferences") or []):
        return recorded, Plan(wait=f"pod {pod['metadata']['name']} belongs to another owner; "
                              "waiting for the garbage collector to remove it")
    if pod is not None:
        state: api.PreflightStatus | None = observe(pod)
    else:
        state = recorded if recorded and recorded.get("phase") in _DONE else None
    if state is not None:
        return state, None if state["phase"] == "Passed" else Plan()
    if owner.spec.get("suspend"):
        return None, Plan()
    made = children.preflight_pod(owner, settings)
    return observe(made), Plan(create=[made])
