"""The least any operator must do for a new StaticTrainingJob: one watch, one Job create per event.

A reference for bench/operator_scale.py (--floor-sizes), run side by side with the real operator on the
same burst: no status, no Service, no planning, no retries. Its create -> worker Job latency is the floor
that the machine (API server, etcd, watch delivery, the other processes on the same cores) sets for any
controller built on watches; the operator's latency over it is what the operator adds.

    python bench/floor_controller.py --kubeconfig KUBECONFIG --namespace NS

Prints "watching" once its watch is established.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
from typing import Any

from kubernetes import client, config, watch
from statictrain import labels

TOLERATIONS = [{"operator": "Exists"}]


def worker_job(name: str) -> dict[str, Any]:
    pod_labels = {labels.MANAGED_BY: labels.MANAGED_BY_VALUE, labels.JOB: name}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{name}-worker", "labels": pod_labels},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": TOLERATIONS,
                    "containers": [{"name": "worker", "image": "ghcr.io/statictrain/trainer:0.1.0"}],
                },
            },
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True)
    args = p.parse_args(argv)
    cfg = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    cfg.connection_pool_maxsize = 16
    api = client.ApiClient(cfg)
    custom, batch = client.CustomObjectsApi(api), client.BatchV1Api(api)
    ns = args.namespace

    def create(name: str) -> None:
        try:
            batch.create_namespaced_job(ns, worker_job(name), _preload_content=False)  # type: ignore[arg-type]  # a dict body is sent as is
        except client.ApiException as e:
            if e.status != 409:
                print(f"{name}: {e.status} {e.reason}", file=sys.stderr)

    def list_jobs(**kw: Any) -> Any:
        return custom.list_namespaced_custom_object(labels.GROUP, labels.VERSION, ns, labels.PLURAL, **kw)

    initial = json.loads(list_jobs(_preload_content=False).data)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for item in initial["items"]:
            pool.submit(create, item["metadata"]["name"])
        print("watching", flush=True)
        stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
            list_jobs, resource_version=initial["metadata"]["resourceVersion"], deserialize=False
        )
        for event in stream:
            if event["type"] == "ADDED":
                pool.submit(create, event["object"]["metadata"]["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
