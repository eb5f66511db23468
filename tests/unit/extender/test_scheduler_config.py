"""deploy/scheduler/kube-scheduler-config.yaml keeps the statictrain profile's packing and a safe extender."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CONFIG = Path(__file__).resolve().parents[3] / "deploy" / "scheduler" / "kube-scheduler-config.yaml"


def load() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(CONFIG.read_text())
    return doc


def test_statictrain_profile_packs_and_scores_every_node() -> None:
    profiles = {p["schedulerName"]: p for p in load()["profiles"]}
    assert set(profiles) == {"default-scheduler", "statictrain-scheduler"}
    ours = profiles["statictrain-scheduler"]
    assert ours["percentageOfNodesToScore"] == 100
    assert ours["plugins"]["score"]["disabled"] == [{"name": "NodeResourcesBalancedAllocation"}]
    (fit,) = [c for c in ours["pluginConfig"] if c["name"] == "NodeResourcesFit"]
    assert fit["args"]["scoringStrategy"]["type"] == "MostAllocated"
    assert "pluginConfig" not in profiles["default-scheduler"]


def test_extender_is_ignorable_node_cache_capable_and_sees_gpu_pods() -> None:
    (extender,) = load()["extenders"]
    assert extender["urlPrefix"] == "http://127.0.0.1:EXTENDER_PORT/scheduler"
    assert extender["ignorable"] is True
    assert extender["nodeCacheCapable"] is True
    assert {r["name"] for r in extender["managedResources"]} == {"nvidia.com/gpu", "statictrain.io/gpu-milli"}
