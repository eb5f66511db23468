"""The optional pre-flight pod: its body, reading its result, and the order pod -> workers in the converger."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from statictrain import api, labels, preflight_message
from statictrain_operator import children, converger, preflight, runtime, status
from statictrain_operator.kube import port
from statictrain_operator.settings import Settings

from tests.fakes.kube import FakeKube

from . import builders as b

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
ON = {"enabled": True, "timeoutSeconds": 300}
BREAK: api.GraphBreak = {
    "location": "/opt/venv/lib/python3.11/site-packages/statictrain_trainer/examples/graph_break.py:21",
    "reason": "Data-dependent branching",
}


def owner(**spec: Any) -> children.Owner:
    return b.owner(b.spec(**{"preflight": ON, "resources": {"gpusPerReplica": 1, "cpu": "2", "memory": "8Gi"}, **spec}))


def ended(pod: dict[str, Any], phase: str, exit_code: int | None, said: str | None, **extra: Any) -> dict[str, Any]:
    """``pod`` as the kubelet reports it once its container ended (``said``: its termination message)."""
    term: dict[str, Any] = {} if exit_code is None else {"exitCode": exit_code}
    if said is not None:
        term["message"] = said
    container = {"name": children.PREFLIGHT, "state": {"terminated": term} if term else {}}
    return {**pod, "status": {"phase": phase, "containerStatuses": [container], **extra}}


def passed_message(**extra: Any) -> str:
    result: api.PreflightResult = {"passed": True, "message": "no problem found", "graphBreaks": 0, "breaks": [],
                                   "recompiles": 0, "peakMemoryBytes": 123456789, **extra}  # type: ignore[typeddict-item]
    return preflight_message.encode(result)


# ----------------------------------------------------------------------------- the pod


def test_the_pod_runs_the_check_on_the_cpu_as_the_workers_run_restricted() -> None:
    o = owner()
    pod = children.preflight_pod(o, Settings(node_selector={"pool": "cpu"}))
    (c,) = pod["spec"]["containers"]
    assert pod["metadata"]["name"] == "gpt2-preflight"
    assert pod["metadata"]["labels"][labels.ROLE] == "preflight"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == o.uid
    assert c["command"][0] == "statictrain-preflight"
    assert json.loads(c["command"][c["command"].index("--spec") + 1]) == o.spec
    assert c["command"][c["command"].index("--termination-log") + 1] == c["terminationMessagePath"]
    assert c["image"] == o.spec["image"]
    assert c["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}}  # no GPU
    assert pod["spec"]["activeDeadlineSeconds"] == 300 + children.PREFLIGHT_START_MARGIN_S
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["automountServiceAccountToken"] is False
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["nodeSelector"] == {"pool": "cpu"}


# ----------------------------------------------------------------------------- the result


def test_a_result_of_any_size_fits_the_termination_message_and_reads_back() -> None:
    breaks: list[api.GraphBreak] = [
        {"location": f"/src/model_{i}.py:{i}" + "x" * 400, "reason": "ü" * 500} for i in range(50)
    ]
    text = preflight_message.encode({"passed": False, "message": "m" * 5000, "graphBreaks": 50, "breaks": breaks})
    assert len(text.encode()) <= preflight_message.MAX_BYTES
    back = preflight_message.decode(text)
    assert back["graphBreaks"] == 50 and back["passed"] is False
    assert 1 <= len(back["breaks"]) <= preflight_message.MAX_BREAKS
    assert back["breaks"][0]["location"].startswith("/src/model_0.py:0")
    assert len(back["message"]) <= preflight_message.MAX_MESSAGE


def test_a_small_result_reads_back_unchanged() -> None:
    result: api.PreflightResult = {"passed": False, "message": "fullgraph", "graphBreaks": 1, "breaks": [BREAK],
                                   "recompiles": 2, "peakMemoryBytes": 10}
    assert preflight_message.decode(preflight_message.encode(result)) == result


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "no termination message"),
        ("  ", "no termination message"),
        ('{"passed": true, "message": "' + "x" * 5000 + '"}', "more than the 4096"),
        ('{"passed": true, "mess', "not JSON"),
        ("[1, 2]", "not an object"),
        ('{"message": "ok"}', "passed is None"),
        ('{"passed": "yes"}', "passed is 'yes'"),
        ('{"passed": true, "graphBreaks": -1}', "graphBreaks is -1"),
        ('{"passed": true, "recompiles": true}', "recompiles is True"),
        ('{"passed": true, "breaks": [{"location": 3}]}', "a graph break is"),
        ('{"passed": true, "breaks": "many"}', "breaks is 'many'"),
    ],
)
def test_garbage_in_the_termination_message_is_a_clear_error(text: str | None, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        preflight_message.decode(text)


def test_unknown_fields_of_the_message_are_dropped() -> None:
    back = preflight_message.decode('{"passed": true, "phase": "Passed", "pod": "other", "extra": 1}')
    assert back == {"passed": True, "message": "", "breaks": []}


def test_passed_needs_the_pod_the_exit_code_and_the_result_to_agree() -> None:
    pod = children.preflight_pod(owner(), Settings())
    ok = preflight.observe(ended(pod, "Succeeded", 0, passed_message()))
    assert ok["phase"] == "Passed" and ok["passed"] is True and ok["peakMemoryBytes"] == 123456789
    lying = preflight.observe(ended(pod, "Failed", 1, passed_message()))
    assert lying["phase"] == "Failed" and lying["passed"] is False
    assert "exit code 1" in lying["message"] and "though its result says it passed" in lying["message"]


def test_a_pod_that_ended_without_a_result_fails_with_the_reason() -> None:
    pod = children.preflight_pod(owner(), Settings())
    out = preflight.observe(ended(pod, "Failed", 137, None, reason="DeadlineExceeded", message="too long"))
    assert out["phase"] == "Failed"
    assert "exit code 137, DeadlineExceeded: too long" in out["message"]
    assert "no termination message" in out["message"]
    garbage = preflight.observe(ended(pod, "Succeeded", 0, "Traceback (most recent call last):"))
    assert garbage["phase"] == "Failed" and "not JSON" in garbage["message"]


def test_a_running_pod_is_running() -> None:
    pod = children.preflight_pod(owner(), Settings())
    assert preflight.observe({**pod, "status": {"phase": "Pending"}})["phase"] == "Running"
    assert preflight.observe(pod)["phase"] == "Running"  # just created: no status yet


# ----------------------------------------------------------------------------- the gate


def test_the_gate_creates_the_pod_first_and_opens_only_on_a_pass() -> None:
    o, s = owner(), Settings()
    state, plan = preflight.gate(o, s, None, None)
    assert state is not None and state["phase"] == "Running"
    assert plan is not None and [x["kind"] for x in plan.create] == ["Pod"]
    pod = plan.create[0]
    state, plan = preflight.gate(o, s, pod, state)
    assert plan is not None and plan.create == []  # running: nothing more
    state, plan = preflight.gate(o, s, ended(pod, "Succeeded", 0, passed_message()), state)
    assert plan is None and state is not None and state["phase"] == "Passed"
    # the pod deleted after its result: the result stands, no second pod
    assert preflight.gate(o, s, None, state) == (state, None)


def test_a_suspended_job_gets_no_preflight_pod_until_resumed() -> None:
    state, plan = preflight.gate(owner(suspend=True), Settings(), None, None)
    assert state is None and plan is not None and plan.create == []


def test_a_pod_of_another_owner_is_waited_for_not_read() -> None:
    o = owner()
    stranger = b.observed(children.preflight_pod(o, Settings()), uid="uid-of-an-older-job")
    state, plan = preflight.gate(o, Settings(), ended(stranger, "Succeeded", 0, passed_message()), None)
    assert state is None and plan is not None and plan.create == [] and "another owner" in (plan.wait or "")


def test_status_while_it_runs_and_after_it_failed() -> None:
    o = owner()
    running: api.PreflightStatus = {"phase": "Running", "pod": "gpt2-preflight", "message": "created"}
    out = status.compute(o.name, o.spec, generation=1, job=None, current={}, now=NOW, preflight=running)
    conds = {c["type"]: c for c in out["conditions"]}
    assert out["phase"] == "Pending" and conds["Created"]["reason"] == "PreflightRunning"
    assert conds["PreflightPassed"]["status"] == "Unknown"
    failed: api.PreflightStatus = {"phase": "Failed", "pod": "gpt2-preflight", "passed": False,
                                   "message": "compile.fullgraph is set and the graph breaks 1 time(s)"}
    out = status.compute(o.name, o.spec, generation=1, job=None, current=out, now=NOW, preflight=failed)
    conds = {c["type"]: c for c in out["conditions"]}
    assert out["phase"] == "Failed" and out["preflight"] == failed and "completionTime" in out
    assert conds["Failed"]["reason"] == "PreflightFailed" and "graph breaks" in conds["Failed"]["message"]
    assert conds["PreflightPassed"]["status"] == "False"


# ----------------------------------------------------------------------------- the converger


class Cluster:
    """FakeKube with one job; the converger's indexes read it back, as kopf's watches would."""

    def __init__(self, **spec: Any) -> None:
        self.api = FakeKube(clock=lambda: NOW)
        self.o = owner(**spec)
        body = {"apiVersion": labels.API_VERSION, "kind": labels.KIND, "spec": self.o.spec,
                "metadata": {"name": self.o.name, "namespace": self.o.namespace, "labels": dict(self.o.labels)}}
        asyncio.run(self.api.create(port.STJ, body))
        self.api.writes.clear()
        self.key: converger.Key = (self.o.namespace, self.o.name)
        rt = runtime.Runtime(settings=Settings(), kube=self.api, holder="t", clock=lambda: NOW)
        lookups = (self.lookup(port.STJ, self.o.name), self.lookup(port.JOBS, "gpt2-worker"),
                   self.lookup(port.SERVICES, "gpt2-worker"), self.lookup(port.PODS, "gpt2-preflight"))
        self.c = converger.Converger(rt, lookups, logging.getLogger("test"))

    def lookup(self, res: port.Resource, name: str) -> converger.Lookup:
        def get(key: converger.Key) -> dict[str, Any] | None:
            obj = self.api.objects.get((res.path(), key[0], name))
            return {**obj, "metadata": {**obj["metadata"], "generation": 1}} if obj else None

        return get

    def converge(self) -> api.Status:
        asyncio.run(self.c.converge(self.key))
        job = self.api.objects[(port.STJ.path(), *self.key)]
        return job.get("status") or {}  # type: ignore[return-value]

    def pod_ends(self, phase: str, exit_code: int, message: str) -> None:
        path = (port.PODS.path(), self.o.namespace, "gpt2-preflight")
        self.api.objects[path] = ended(self.api.objects[path], phase, exit_code, message)


def test_the_workers_are_created_only_after_the_preflight_passed() -> None:
    k = Cluster()
    st = k.converge()
    assert k.api.writes == ["create Pod", "apply StaticTrainingJob/status"]
    assert st["phase"] == "Pending" and st["preflight"]["phase"] == "Running"
    k.api.writes.clear()
    assert k.converge()["phase"] == "Pending" and k.api.writes == []  # still running: nothing to do
    k.pod_ends("Succeeded", 0, passed_message())
    st = k.converge()
    assert "create Job" in k.api.writes and "create Service" in k.api.writes
    assert st["preflight"]["phase"] == "Passed" and st["preflight"]["peakMemoryBytes"] == 123456789
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["PreflightPassed"]["status"] == "True" and conds["Created"]["status"] == "True"


def test_a_view_behind_the_last_write_does_not_turn_the_verdict_or_its_condition_back() -> None:
    k = Cluster()
    k.converge()
    running = copy.deepcopy(k.api.objects[(port.STJ.path(), *k.key)])  # the view while the pod ran
    k.pod_ends("Succeeded", 0, passed_message())
    k.converge()  # passed: the workers are created
    k.c.trainingjob = lambda key: {**running, "metadata": {**running["metadata"], "generation": 1}}
    st = k.converge()  # e.g. the worker Job's event, handled before the watch brought the status write
    conds = {c["type"]: c for c in st["conditions"]}
    assert st["preflight"]["phase"] == "Passed" and conds["PreflightPassed"]["status"] == "True", st


def test_a_failed_preflight_fails_the_job_with_the_break_and_creates_no_workers() -> None:
    k = Cluster(compile={"mode": "default", "fullgraph": True})
    k.converge()
    failed: api.PreflightResult = {"passed": False, "graphBreaks": 1, "breaks": [BREAK],
                                   "message": "compile.fullgraph is set and the graph breaks 1 time(s)"}
    k.pod_ends("Failed", 1, preflight_message.encode(failed))
    st = k.converge()
    assert st["phase"] == "Failed" and st["preflight"]["breaks"] == [BREAK]
    assert {c["type"]: c for c in st["conditions"]}["Failed"]["reason"] == "PreflightFailed"
    k.api.writes.clear()
    k.converge()
    assert k.api.writes == []
    assert not any(path == port.JOBS.path() for path, _, _ in k.api.objects)


def test_without_preflight_nothing_changes() -> None:
    k = Cluster(preflight={"enabled": False})
    st = k.converge()
    assert "create Pod" not in k.api.writes and "create Job" in k.api.writes and "preflight" not in st
