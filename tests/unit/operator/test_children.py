"""Desired children: env, labels, resources, owner references, scheduling."""

from __future__ import annotations

from typing import Any

import pytest
from statictrain import api, envvars, labels
from statictrain.exitcodes import ExitCode
from statictrain_operator import children
from statictrain_operator.settings import Settings

from . import builders as b

SETTINGS = Settings(
    sidecar_image="example.com/sidecar:1",
    tolerations=[{"key": "kwok.x-k8s.io/node", "operator": "Equal", "value": "fake", "effect": "NoSchedule"}],
)


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def containers(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Main and init containers by name (the sidecar is a native sidecar: an init container)."""
    pod = job["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*pod.get("initContainers", []), *pod["containers"]]}


def test_every_child_has_the_four_labels_and_an_owner_reference() -> None:
    o = b.owner()
    job, svc = children.worker_job(o, SETTINGS), children.service(o)
    want = {labels.JOB: "gpt2", labels.NAMESPACE: "team-nlp", labels.COMMIT: "3f2c1ab", labels.TEAM: "nlp"}
    for obj in (job, svc, job["spec"]["template"]):
        assert want.items() <= obj["metadata"]["labels"].items()
    for obj in (job, svc):
        (ref,) = obj["metadata"]["ownerReferences"]
        assert ref == {
            "apiVersion": "statictrain.io/v1alpha1",
            "kind": "StaticTrainingJob",
            "name": "gpt2",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    assert job["spec"]["template"]["metadata"]["labels"][labels.ROLE] == "worker"


def test_missing_commit_and_team_are_labelled_unknown() -> None:
    lab = children.child_labels(b.owner(commit=None, team=None))
    assert (lab[labels.COMMIT], lab[labels.TEAM]) == ("unknown", "unknown")


def test_the_workload_class_reaches_the_worker_pods_only_when_the_job_has_one() -> None:
    assert labels.WORKLOAD_CLASS not in children.child_labels(b.owner())
    owner = b.owner()
    owner = children.Owner(owner.name, owner.namespace, owner.uid, {labels.WORKLOAD_CLASS: "llama-7b-bs8"}, owner.spec)
    job = children.worker_job(owner, SETTINGS)
    assert job["spec"]["template"]["metadata"]["labels"][labels.WORKLOAD_CLASS] == "llama-7b-bs8"


def test_static_job_gets_torchrun_static_rendezvous_at_worker_0() -> None:
    env = env_of(containers(children.worker_job(b.owner(), SETTINGS))["trainer"])
    assert env[envvars.MASTER_ADDR] == "gpt2-worker-0.gpt2-worker"
    assert env[envvars.MASTER_PORT] == "29500"
    assert env[envvars.WORLD_SIZE] == "2"
    assert env["PET_NNODES"] == "2"
    assert env["PET_NPROC_PER_NODE"] == "1"
    rank_ref = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert env[envvars.NODE_RANK] == rank_ref
    assert env["PET_NODE_RANK"] == rank_ref
    assert "PET_RDZV_BACKEND" not in env


def test_elastic_job_gets_c10d_rendezvous_over_min_max() -> None:
    s = b.spec(
        replicas=4,
        elastic={"minReplicas": 2, "maxReplicas": 8, "maxRestarts": 5},
        resources={"gpusPerReplica": 8},
    )
    env = env_of(containers(children.worker_job(b.owner(s), SETTINGS))["trainer"])
    assert env["PET_NNODES"] == "2:8"
    assert env["PET_RDZV_BACKEND"] == "c10d"
    assert env["PET_RDZV_ENDPOINT"] == "gpt2-worker-0.gpt2-worker:29500"
    assert env["PET_RDZV_ID"] == "uid-1"
    assert env["PET_MAX_RESTARTS"] == "5"
    assert env["PET_NPROC_PER_NODE"] == "8"


def test_trainer_settings_reach_the_env() -> None:
    s = b.spec(
        compile={"mode": "max-autotune", "fullgraph": True, "autotune": "On"},
        precision="fp16",
        distributed={"bucketCapMB": 50},
        training={"maxSteps": 1000},
        checkpoint={"everySteps": 100, "path": "/data/ckpt"},
        env=[{"name": "FOO", "value": "bar"}],
    )
    env = env_of(containers(children.worker_job(b.owner(s), SETTINGS))["trainer"])
    assert env[envvars.ENTRYPOINT] == "mypkg.train:build"
    assert env[envvars.COMPILE_MODE] == "max-autotune"
    assert env[envvars.COMPILE_FULLGRAPH] == "true"
    assert env[envvars.COMPILE_DYNAMIC] == "false"  # CRD default
    assert env[envvars.COMPILE_CACHE] == "true"
    assert env[envvars.AUTOTUNE] == "on"
    assert env[envvars.PRECISION] == "fp16"
    assert env[envvars.BUCKET_CAP_MB] == "50"
    assert env[envvars.GRAD_ACCUM_STEPS] == "1"
    assert env[envvars.MAX_STEPS] == "1000"
    assert envvars.MAX_TOKENS not in env
    assert env[envvars.CHECKPOINT_DIR] == "/data/ckpt"
    assert env[envvars.CHECKPOINT_EVERY] == "100"
    assert env["FOO"] == "bar"


def test_pod_has_trainer_sidecar_shared_stats_dir_and_compile_cache() -> None:
    job = children.worker_job(b.owner(), SETTINGS)
    pod = job["spec"]["template"]["spec"]
    c = containers(job)
    assert c["trainer"]["command"] == ["statictrain-launch", "--module", "statictrain_trainer.main"]
    assert [x["name"] for x in pod["containers"]] == ["trainer"]
    assert [(x["name"], x["restartPolicy"]) for x in pod["initContainers"]] == [("sidecar", "Always")]
    assert pod["automountServiceAccountToken"] is False
    assert c["trainer"]["image"] == "registry.example.com/nlp/train:3f2c1ab"
    assert c["sidecar"]["command"] == ["statictrain-sidecar"]
    assert c["sidecar"]["image"] == "example.com/sidecar:1"
    mounts = {m["name"]: m["mountPath"] for m in c["trainer"]["volumeMounts"]}
    side_mounts = {m["name"]: m["mountPath"] for m in c["sidecar"]["volumeMounts"]}
    assert mounts[children.STATS_VOLUME] == side_mounts[children.STATS_VOLUME] == SETTINGS.stats_dir
    assert env_of(c["sidecar"])[envvars.STATS_DIR] == env_of(c["trainer"])[envvars.STATS_DIR] == SETTINGS.stats_dir
    assert mounts[children.CACHE_VOLUME] == SETTINGS.compile_cache_dir
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[children.STATS_VOLUME] == {"name": "stats", "emptyDir": {}}
    assert volumes[children.CACHE_VOLUME] == {"name": "compile-cache", "emptyDir": {}}
    assert pod["schedulerName"] == "statictrain-scheduler"
    assert pod["subdomain"] == "gpt2-worker"
    assert pod["restartPolicy"] == "Never"


def test_compile_cache_and_checkpoint_claims_are_mounted_when_configured() -> None:
    s = b.spec(checkpoint={"persistentVolumeClaim": "ckpts"})
    job = children.worker_job(b.owner(s), Settings(compile_cache_claim="inductor-cache"))
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"]["volumes"]}
    assert volumes[children.CACHE_VOLUME]["persistentVolumeClaim"] == {"claimName": "inductor-cache"}
    assert volumes[children.CHECKPOINT_VOLUME]["persistentVolumeClaim"] == {"claimName": "ckpts"}
    [trainer] = [c for c in job["spec"]["template"]["spec"]["containers"] if c["name"] == "trainer"]
    [cache] = [m for m in trainer["volumeMounts"] if m["name"] == children.CACHE_VOLUME]
    assert "subPath" not in cache  # shared by the namespace's jobs unless per job


def test_a_per_job_compile_cache_writes_only_the_jobs_folder_and_reads_shared_read_only() -> None:
    owner = b.owner(b.spec())
    s = Settings(compile_cache_claim="inductor-cache", compile_cache_per_job=True, compile_cache_dir="/cache/")
    pod = children.worker_job(owner, s)["spec"]["template"]["spec"]
    [trainer] = [c for c in pod["containers"] if c["name"] == "trainer"]
    mounts = [m for m in trainer["volumeMounts"] if m["name"] == children.CACHE_VOLUME]
    assert mounts == [
        {"name": children.CACHE_VOLUME, "mountPath": "/cache/", "subPath": f"jobs/{owner.name}"},
        {"name": children.CACHE_VOLUME, "mountPath": "/cache-shared", "subPath": "shared", "readOnly": True},
    ]
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env["STATICTRAIN_COMPILE_CACHE_DIR"] == "/cache/"
    assert env["STATICTRAIN_COMPILE_CACHE_SHARED_DIR"] == "/cache-shared"
    others = [
        m
        for c in [*pod["containers"], *pod.get("initContainers", [])]
        if c["name"] != "trainer"
        for m in c.get("volumeMounts", [])
        if m["name"] == children.CACHE_VOLUME
    ]
    assert others == []  # no other container sees the claim
    # without a claim the cache is an emptyDir (the pod's own): nothing to split
    plain = children.worker_job(owner, Settings(compile_cache_per_job=True))["spec"]["template"]["spec"]
    [trainer] = [c for c in plain["containers"] if c["name"] == "trainer"]
    assert [m for m in trainer["volumeMounts"] if m["name"] == children.CACHE_VOLUME] == [
        {"name": children.CACHE_VOLUME, "mountPath": Settings().compile_cache_dir}
    ]
    assert "STATICTRAIN_COMPILE_CACHE_SHARED_DIR" not in {e["name"] for e in trainer["env"]}


@pytest.mark.parametrize(
    ("resources", "want_requests", "want_limits"),
    [
        pytest.param({"gpusPerReplica": 8}, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"}, id="gpus"),
        pytest.param(
            {"gpusPerReplica": 0, "cpu": "500m", "memory": "1Gi"},
            {"cpu": "500m", "memory": "1Gi"},
            {"memory": "1Gi"},
            id="cpu-only",
        ),
    ],
)
def test_resources(resources: api.Resources, want_requests: dict[str, str], want_limits: dict[str, str]) -> None:
    trainer = containers(children.worker_job(b.owner(b.spec(resources=resources)), SETTINGS))["trainer"]
    assert trainer["resources"] == {"requests": want_requests, "limits": want_limits}


def test_scheduling_constraints_from_spec_and_settings() -> None:
    s = b.spec(
        resources={"gpuModels": ["H100", "A100"]},
        placement={
            "capacityTypes": ["spot"],
            "maxHourlyUSD": "12.5",
            "nodeSelector": {"pool": "a"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        },
    )
    settings = Settings(
        node_selector={"pool": "default", "zone": "z1"},
        scheduler_name="custom",
        tolerations=[{"key": "t", "operator": "Exists"}],
    )
    tpl = children.worker_job(b.owner(s), settings)["spec"]["template"]
    pod = tpl["spec"]
    assert pod["schedulerName"] == "custom"
    assert pod["nodeSelector"] == {"pool": "default", "zone": "z1"}  # the admin's label wins
    assert pod["tolerations"] == [
        {"key": "t", "operator": "Exists"},
        {"key": "dedicated", "operator": "Exists"},
    ]
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [{"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]
    assert tpl["metadata"]["annotations"] == {
        api.GPU_MODELS_ANNOTATION: "H100,A100",
        api.MAX_HOURLY_USD_ANNOTATION: "12.5",
    }


def test_per_job_checkpoint_claim_unless_the_spec_names_one_or_it_is_switched_off() -> None:
    o = b.owner()
    claim = children.checkpoint_claim(o, SETTINGS)
    assert claim is not None
    assert claim["kind"] == "PersistentVolumeClaim"
    assert claim["metadata"]["name"] == "gpt2-checkpoint"
    assert claim["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # two pods read rank 0's checkpoints
    assert claim["spec"]["resources"] == {"requests": {"storage": SETTINGS.checkpoint_volume_size}}
    assert "storageClassName" not in claim["spec"]
    volumes = {v["name"]: v for v in children.worker_job(o, SETTINGS)["spec"]["template"]["spec"]["volumes"]}
    assert volumes[children.CHECKPOINT_VOLUME]["persistentVolumeClaim"] == {"claimName": "gpt2-checkpoint"}

    one = children.checkpoint_claim(b.owner(b.spec(replicas=1)), Settings(checkpoint_storage_class="nfs"))
    assert one is not None
    assert (one["spec"]["accessModes"], one["spec"]["storageClassName"]) == (["ReadWriteOnce"], "nfs")
    assert children.checkpoint_claim(b.owner(b.spec(checkpoint={"persistentVolumeClaim": "mine"})), SETTINGS) is None
    off = Settings(checkpoint_volume_size="")
    assert children.checkpoint_claim(o, off) is None
    volumes = {v["name"]: v for v in children.worker_job(o, off)["spec"]["template"]["spec"]["volumes"]}
    assert volumes[children.CHECKPOINT_VOLUME] == {"name": "checkpoint", "emptyDir": {}}


def test_profile_token_secret_is_per_job_random_and_mounted_in_the_sidecar_only() -> None:
    o = b.owner()
    assert children.profile_token_secret(o, SETTINGS) is None  # off by default: /profile refuses everything
    on = Settings(profile_token=True)
    secret = children.profile_token_secret(o, on)
    again = children.profile_token_secret(o, on)
    assert secret is not None and again is not None
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == "gpt2-profile-token" and secret["immutable"]
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"  # deleted with the job
    token = secret["stringData"]["token"]
    assert len(token) >= 32 and token != again["stringData"]["token"]  # random, long enough for the sidecar
    pod = children.worker_job(o, on)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret_volume = volumes[children.PROFILE_TOKEN_VOLUME]["secret"]
    assert secret_volume == {"secretName": "gpt2-profile-token", "defaultMode": 0o440}
    sidecar, trainer = pod["initContainers"][0], pod["containers"][0]
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env[envvars.PROFILE_TOKEN_FILE] == f"{children.PROFILE_TOKEN_DIR}/token"
    assert {
        "name": children.PROFILE_TOKEN_VOLUME,
        "mountPath": children.PROFILE_TOKEN_DIR,
        "readOnly": True,
    } in sidecar["volumeMounts"]
    assert children.PROFILE_TOKEN_VOLUME not in {m["name"] for m in trainer["volumeMounts"]}
    assert envvars.PROFILE_TOKEN_FILE not in {e["name"] for e in trainer["env"]}
    off_pod = children.worker_job(o, SETTINGS)["spec"]["template"]["spec"]
    assert children.PROFILE_TOKEN_VOLUME not in {v["name"] for v in off_pod["volumes"]}


@pytest.mark.parametrize(("grace", "want_pod", "want_agent"), [(None, 120, "115"), (30, 30, "25"), (3, 3, "1")])
def test_grace_period_from_the_spec_reaches_the_pod_and_torchrun(
    grace: int | None, want_pod: int, want_agent: str
) -> None:
    s = b.spec(runPolicy={"terminationGracePeriodSeconds": grace} if grace else {})
    job = children.worker_job(b.owner(s), SETTINGS)
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == want_pod
    assert env_of(containers(job)["trainer"])["PET_SHUTDOWN_TIMEOUT"] == want_agent


def test_job_level_policies() -> None:
    s = b.spec(replicas=3, suspend=True, runPolicy={"backoffLimit": 7, "activeDeadlineSeconds": 3600})
    js = children.worker_job(b.owner(s), SETTINGS)["spec"]
    assert (js["completionMode"], js["completions"], js["parallelism"]) == ("Indexed", 3, 3)
    assert js["suspend"] is True
    assert js["backoffLimit"] == 7
    assert js["activeDeadlineSeconds"] == 3600
    rules = js["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
    by_code = {code: r["action"] for r in rules[1:] for code in r["onExitCodes"]["values"]}
    assert by_code == {ExitCode.USER_ERROR: "FailJob", ExitCode.INFRA_ERROR: "Ignore", ExitCode.PREEMPTED: "Ignore"}


def test_service_is_headless_and_selects_the_workers() -> None:
    svc = children.service(b.owner(b.spec(distributed={"masterPort": 23456})))
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == {labels.JOB: "gpt2", labels.ROLE: "worker"}
    assert svc["spec"]["ports"][0]["port"] == 23456
    assert children.selector("gpt2") == "statictrain.io/job=gpt2,statictrain.io/role=worker"


def test_template_hash_ignores_elastic_replicas_but_not_settings() -> None:
    def h(**kw: Any) -> str:
        return children.template_hash(b.owner(b.spec(elastic={"minReplicas": 1, "maxReplicas": 8}, **kw)), SETTINGS)

    assert h(replicas=2) == h(replicas=5)
    assert h(replicas=2) != h(replicas=2, precision="fp32")
    static_2 = children.template_hash(b.owner(b.spec(replicas=2)), SETTINGS)
    assert static_2 != children.template_hash(b.owner(b.spec(replicas=3)), SETTINGS)


def test_the_sidecar_exports_dcgm_names_only_when_asked() -> None:
    def sidecar_env(settings: Settings) -> dict[str, str | None]:
        pod = children.worker_job(b.owner(), settings)["spec"]["template"]["spec"]
        return {e["name"]: e.get("value") for e in pod["initContainers"][0]["env"]}

    assert envvars.SIDECAR_DCGM not in sidecar_env(SETTINGS)
    assert sidecar_env(Settings(sidecar_dcgm=True))[envvars.SIDECAR_DCGM] == "true"
