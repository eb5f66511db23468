"""The trimmed diff-base storage builds exactly kopf's essence."""

from __future__ import annotations

from typing import Any, cast

import kopf
from statictrain_operator.essence import TrimmedDiffBaseStorage

BODY: dict[str, Any] = {
    "apiVersion": "statictrain.io/v1alpha1",
    "kind": "StaticTrainingJob",
    "metadata": {
        "name": "a",
        "namespace": "n",
        "uid": "u",
        "generation": 3,
        "resourceVersion": "9",
        "labels": {"statictrain.io/team": "nlp"},
        "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "note": "x",
            "statictrain.io/last-handled-configuration": "{}",
        },
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
    },
    "spec": {"image": "i", "replicas": 2, "compile": {"mode": "default"}},
    "status": {"phase": "Running", "conditions": [{"type": "Running", "status": "True"}]},
}


def test_same_essence_as_kopf() -> None:
    body = kopf.Body(cast(kopf.RawBody, BODY))
    ours = TrimmedDiffBaseStorage(prefix="statictrain.io", key="last-handled-configuration").build(body=body)
    theirs = kopf.AnnotationsDiffBaseStorage(prefix="statictrain.io", key="last-handled-configuration").build(body=body)
    assert ours == theirs
    assert ours["spec"] == BODY["spec"] and "status" not in ours


def test_essence_is_a_copy() -> None:
    ours = TrimmedDiffBaseStorage().build(body=kopf.Body(cast(kopf.RawBody, BODY)))
    ours["spec"]["replicas"] = 99
    assert BODY["spec"]["replicas"] == 2


def test_kinds_without_change_handlers_get_no_essence() -> None:
    job = {**BODY, "kind": "Job", "apiVersion": "batch/v1"}
    assert TrimmedDiffBaseStorage().build(body=kopf.Body(cast(kopf.RawBody, job))) == {}
    assert TrimmedDiffBaseStorage(kinds=["Job"]).build(body=kopf.Body(cast(kopf.RawBody, job)))["spec"]
