"""Local workers: how a worker pod is turned into local processes (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from statictrain_localcluster import workers


def pod() -> dict[str, Any]:
    def field(name: str, path: str) -> dict[str, Any]:
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}

    return {
        "metadata": {"name": "j-worker-1-abc", "namespace": "team-a", "uid": "u-1",
                     "labels": {"statictrain.io/job": "j", "statictrain.io/commit": "c0ffee",
                                "statictrain.io/team": "nlp"},
                     "annotations": {"batch.kubernetes.io/job-completion-index": "1"}},
        "spec": {
            "nodeName": "p5-spot-0",
            "volumes": [{"name": "stats", "emptyDir": {}},
                        {"name": "cache", "persistentVolumeClaim": {"claimName": "compile-cache"}}],
            "initContainers": [  # the operator's native sidecar
                {"name": "sidecar", "restartPolicy": "Always", "command": ["statictrain-sidecar"],
                 "volumeMounts": [{"name": "stats", "mountPath": "/var/run/statictrain"}],
                 "env": [{"name": "STATICTRAIN_STATS_DIR", "value": "/var/run/statictrain"},
                         {"name": "STATICTRAIN_METRICS_PORT", "value": "9400"}]},
            ],
            "containers": [
                {"name": "trainer", "command": ["torchrun", "--module", "statictrain_trainer.main"],
                 "volumeMounts": [{"name": "stats", "mountPath": "/var/run/statictrain"},
                                  {"name": "cache", "mountPath": "/cache"}],
                 "env": [{"name": "MASTER_ADDR", "value": "j-worker-0.j-worker"},
                         {"name": "MASTER_PORT", "value": "29500"},
                         {"name": "PET_MASTER_ADDR", "value": "j-worker-0.j-worker"},
                         {"name": "PET_NPROC_PER_NODE", "value": "8"},
                         {"name": "STATICTRAIN_STATS_DIR", "value": "/var/run/statictrain"},
                         {"name": "STATICTRAIN_COMPILE_CACHE_DIR", "value": "/cache/inductor"},
                         field("STATICTRAIN_POD", "metadata.name"),
                         field("STATICTRAIN_POD_UID", "metadata.uid"),
                         field("NODE_RANK", "metadata.annotations['batch.kubernetes.io/job-completion-index']")]},
            ],
        },
    }


def test_pod_identity_volumes_and_rendezvous_are_local(tmp_path: Path) -> None:
    p = workers.plan(pod(), rendezvous_port=41000, metrics_port=42000, volume_root=tmp_path, bin_dir=tmp_path)
    env = p.trainer.env
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == "127.0.0.1"
    assert env["MASTER_PORT"] == "41000"
    assert env["PET_NPROC_PER_NODE"] == "1"
    assert env["NODE_RANK"] == "1"
    assert env["STATICTRAIN_POD"] == "j-worker-1-abc" and env["STATICTRAIN_POD_UID"] == "u-1"
    stats = tmp_path / "team-a" / "j-worker-1-abc" / "stats"
    assert env["STATICTRAIN_STATS_DIR"] == str(stats)
    assert env["STATICTRAIN_COMPILE_CACHE_DIR"] == str(tmp_path / "team-a" / "shared" / "compile-cache" / "inductor")
    assert p.sidecar is not None
    assert p.sidecar.env["STATICTRAIN_STATS_DIR"] == str(stats), "trainer and sidecar share the emptyDir"
    assert p.sidecar.env["STATICTRAIN_METRICS_PORT"] == "42000"
    assert p.scrape_labels == {"job_name": "j", "namespace": "team-a", "pod": "j-worker-1-abc",
                               "commit": "c0ffee", "team": "nlp"}


def test_commands_resolve_to_the_environment_bin_dir(tmp_path: Path) -> None:
    (tmp_path / "torchrun").touch()
    p = workers.plan(pod(), 1, 2, tmp_path, bin_dir=tmp_path)
    assert p.trainer.command == [str(tmp_path / "torchrun"), "--module", "statictrain_trainer.main"]
    assert p.sidecar is not None and p.sidecar.command == ["statictrain-sidecar"]


def test_unsupported_field_ref_is_an_error() -> None:
    with pytest.raises(ValueError, match="unsupported fieldRef"):
        workers.field_value(pod(), "status.phase")


def test_pod_without_trainer_is_refused(tmp_path: Path) -> None:
    bad = pod()
    bad["spec"]["containers"] = bad["spec"]["containers"][1:]
    with pytest.raises(ValueError, match="no 'trainer' container"):
        workers.plan(bad, 1, 2, tmp_path, tmp_path)
