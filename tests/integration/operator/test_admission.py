"""Bad specs are refused by the API server (schema and CEL rules) with a message saying what to fix;
`kubectl get stj` shows the printer columns."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from .conftest import Kube, stj, wait_for

pytestmark = pytest.mark.cluster

DIGEST = "a" * 64


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        pytest.param(stj("neg", replicas=-1), "spec.replicas: Invalid value: -1", id="negative-replicas"),
        pytest.param(
            stj("huge", replicas=100000), "spec.replicas: Invalid value: 100000", id="absurd-replicas"
        ),
        pytest.param(
            stj("minmax", replicas=2, elastic={"minReplicas": 4, "maxReplicas": 2}),
            "spec.elastic.minReplicas must not exceed spec.elastic.maxReplicas",
            id="min-above-max",
        ),
        pytest.param(
            stj("outside", replicas=9, elastic={"minReplicas": 1, "maxReplicas": 8}),
            "spec.replicas must lie within spec.elastic.minReplicas..spec.elastic.maxReplicas",
            id="replicas-outside-elastic",
        ),
        pytest.param(
            stj("mode", compile={"mode": "turbo"}),
            'spec.compile.mode: Unsupported value: "turbo"',
            id="unknown-compile-mode",
        ),
        pytest.param(
            stj("img", image="Registry.example.com/UPPER/train::v1"),
            "spec.image in body should match",
            id="malformed-image",
        ),
        pytest.param(
            stj("img2", image=f"registry.example.com/x/train@sha256:{DIGEST[:10]}"),
            "spec.image in body should match",
            id="short-digest",
        ),
        pytest.param(
            stj("ep", entrypoint="not a module"),
            "spec.entrypoint in body should match",
            id="malformed-entrypoint",
        ),
        pytest.param(
            stj("money", budget={"limitUSD": "1,500"}),
            "spec.budget.limitUSD in body should match",
            id="money-not-decimal",
        ),
        pytest.param(
            stj("big", env=[{"name": "BLOB", "value": "x" * 300_000}]),
            "spec.env[0].value: Too long",
            id="300KB-spec",
        ),
        pytest.param(stj("Bad_Name"), "metadata.name", id="bad-name"),
        pytest.param(stj("a" * 41), "metadata.name must be at most 40 characters", id="long-name"),
    ],
)
def test_invalid_specs_are_rejected_with_a_useful_message(
    kube: Kube, manifest: dict[str, Any], message: str
) -> None:
    proc = kube.create(manifest, check=False)
    assert proc.returncode != 0, f"the API server accepted {manifest['metadata']['name']}"
    assert message in proc.stderr


def test_valid_examples_are_accepted(kube: Kube) -> None:
    examples = sorted((pathlib.Path(__file__).resolve().parents[3] / "deploy" / "examples").glob("*.yaml"))
    assert len(examples) >= 3
    for path in examples:
        proc = kube.run("apply", "--dry-run=server", "-f", str(path), check=False)
        assert proc.returncode == 0, f"{path.name}: {proc.stderr}"


def test_defaults_are_filled_in(kube: Kube) -> None:
    kube.create(stj("defaults"))
    spec = (kube.get("stj", "defaults") or {})["spec"]
    assert spec["replicas"] == 1
    assert spec["compile"]["mode"] == "default"
    assert spec["precision"] == "bf16"
    assert spec["runPolicy"]["backoffLimit"] == 3
    assert spec["suspend"] is False


def test_image_is_immutable_once_running_but_not_before(kube: Kube, make_operator: Any) -> None:
    kube.create(stj("imm", resources={"gpusPerReplica": 1}))
    kube.patch("stj", "imm", {"spec": {"image": "ghcr.io/statictrain/trainer:0.1.1"}})  # not started: fine
    make_operator()
    wait_for(
        lambda: ((kube.get("stj", "imm") or {}).get("status") or {}).get("phase") == "Running", "Running"
    )
    proc = kube.run(
        "patch", "stj", "imm", "--type=merge", "-p", '{"spec":{"image":"ghcr.io/x/y:2"}}', check=False
    )
    assert proc.returncode != 0
    assert (
        "spec.image, spec.entrypoint and spec.resources are immutable once the job has started" in proc.stderr
    )


def test_replicas_of_a_non_elastic_job_cannot_change(kube: Kube) -> None:
    kube.create(stj("fixed", replicas=2))
    proc = kube.run("scale", "stj/fixed", "--replicas=3", check=False)
    assert proc.returncode != 0
    assert "spec.replicas can change only for elastic jobs" in proc.stderr


def test_printer_columns(kube: Kube) -> None:
    kube.create(stj("cols"))
    kube.run(
        "patch",
        "stj",
        "cols",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"phase":"Running","replicas":1,"progress":{"step":42},'
        '"cost":{"usd":"12.34","projectedUSD":"20.5","usdPer1MTokens":"0.56","gpuEnergyKWh":"1.5",'
        '"carbonKgCO2e":"0.6","readable":{"usd":"$12.3","projectedUSD":"$20.5","usdPer1MTokens":"$0.560"}}}}',
    )
    out = kube.run("get", "stj", "cols").stdout.split("\n")
    assert out[0].split() == ["NAME", "PHASE", "REPLICAS", "STEP", "COST", "PROJECTED", "$/1M-TOKENS", "AGE"]
    assert out[1].split()[:7] == ["cols", "Running", "1", "42", "$12.3", "$20.5", "$0.560"]
    wide = kube.run("get", "stj", "cols", "-o", "wide").stdout.split("\n")
    assert wide[0].split()[-3:] == ["GPU-KWH", "KGCO2E", "AGE"] and wide[1].split()[-3:-1] == ["1.5", "0.6"]
    short = kube.run("get", "stj", "-o", "name").stdout.strip()
    assert short == "statictrainingjob.statictrain.io/cols"


def test_status_rejects_a_float_cost(kube: Kube) -> None:
    kube.create(stj("money"))
    proc = kube.run(
        "patch",
        "stj",
        "money",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"cost":{"usd":12.34}}}',
        check=False,
    )
    assert proc.returncode != 0
    assert "status.cost.usd" in proc.stderr
