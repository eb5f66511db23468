"""``statictrain advise flavors --cluster-queue Q``: the ClusterQueue flavor order that minimises measured
$ per unit of work, with the figures, and the patch that makes it (``--apply`` applies it).

    statictrain advise flavors --cluster-queue gpu                       # Prometheus, last 7 days
    statictrain advise flavors --cluster-queue gpu --throughput tps.yaml # a recorded table
    statictrain advise flavors --cluster-queue gpu --apply

Throughput: measured tokens/s per GPU per GPU model of the workload in the
namespaces whose LocalQueues feed the ClusterQueue (Prometheus, the sidecars'
metrics), or ``--throughput FILE``: a recorded table, GPU model -> tokens/s per
GPU. Prices: each GPU node's (its price annotations, else the shipped catalog).
See flavors.py for the figure, its assumptions and what it cannot know.
Exit status (``statictrain.exitcodes.CliExit``): 0 advice printed (and applied
with --apply); 1 the patch was refused; 2 bad input (an option, a --nodes or
--throughput file); 3 kubectl, the API server or Prometheus gave no usable answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from statictrain.exitcodes import CliExit
from statictrain.pricing import parse_catalog, shipped_catalog_text
from statictrain_cli.args import add_prometheus_url, add_timeout, duration
from statictrain_cli.files import load_yaml
from statictrain_cli.kubectl import CommandError, Kubectl, kubectl_json, system_kubectl
from statictrain_operator import flavors
from statictrain_operator.estimate import offers_from_nodes
from statictrain_operator.history import UNKNOWN_MODEL, query_per_gpu
from statictrain_operator.prom import HttpPrometheus, PrometheusQueryError, PrometheusUnavailableError, PromReader

DEFAULT_HISTORY = timedelta(days=7)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    advise = subparsers.add_parser("advise", help="advice for the cluster's configuration from measured cost")
    sub = advise.add_subparsers(dest="advice", required=True)
    p = sub.add_parser(
        "flavors",
        help="order a Kueue ClusterQueue's ResourceFlavors by measured $ per million tokens",
        description="Order a Kueue ClusterQueue's ResourceFlavors by measured $ per million training tokens.",
    )
    p.add_argument("--cluster-queue", required=True, help="the ClusterQueue's name")
    p.add_argument("--kubeconfig", help="kubeconfig file (default KUBECONFIG)")
    p.add_argument(
        "--throughput", help="recorded tokens/s per GPU by GPU model (YAML or JSON map) instead of Prometheus"
    )
    p.add_argument(
        "--no-table",
        action="store_true",
        help="measured families only: infer none from statictrain's relative throughput table",
    )
    p.add_argument("--nodes", help="nodes from this file (kubectl get nodes -o json) instead of the cluster")
    p.add_argument("--history", type=duration, help="how far back Prometheus is read (default 7d)")
    add_prometheus_url(p)
    add_timeout(p, 30.0)
    p.add_argument("--apply", action="store_true", help="patch the ClusterQueue after printing the change")
    p.set_defaults(func=run_flavors)


def _get(run: Kubectl, *args: str) -> Any:
    found, message = kubectl_json(run, ["get", *args, "-o", "json"])
    if found is None:
        raise CommandError(f"kubectl get {' '.join(args)}: {message}")
    return found


def _render(cq: str, costs: list[flavors.FlavorCost], before: list[str], after: list[str], source: str) -> str:
    rows = [["FLAVOR", "$/MTOKEN", "GPUS", "GPUS WITH A FIGURE", "GPU FAMILIES"]]
    by_name = {c.name: c for c in costs}
    for name in after:
        c = by_name[name]
        rows.append(
            [
                c.name,
                f"{c.usd_per_mtoken:.4f}" if c.usd_per_mtoken is not None else "?",
                str(c.gpus),
                str(c.measured_gpus),
                ", ".join(c.families) or "-",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"ClusterQueue {cq}: flavors by measured $ per million tokens ({source})"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append(f"order now:      {', '.join(before)}")
    lines.append(f"order advised:  {', '.join(after)}")
    lines.append(
        "note: a flavor's figure is the GPU-weighted mean over its nodes whose GPU family has a throughput "
        "figure ('~': inferred from the table, '?': none); flavors without one keep their order at the end"
    )
    lines.append(
        "note: not known here: free quota when a job arrives, spot interruptions and the work they lose, "
        "throughput of a workload unlike the observed one"
    )
    return "\n".join(lines) + "\n"


def run_flavors(
    args: argparse.Namespace,
    *,
    now: datetime | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    kubectl: Kubectl | None = None,
    reader: PromReader | None = None,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    when = now or datetime.now(UTC)
    run = kubectl or system_kubectl(args.kubeconfig)
    try:
        cq = _get(run, "clusterqueue", args.cluster_queue)
        flavor_names = [f["name"] for g in cq["spec"].get("resourceGroups") or [] for f in g.get("flavors") or []]
        flavor_objs = [_get(run, "resourceflavor", name) for name in dict.fromkeys(flavor_names)]
        nodes = load_yaml(args.nodes) if args.nodes else _get(run, "nodes")
        items = nodes.get("items", [nodes]) if isinstance(nodes, dict) else []
        offers = offers_from_nodes(items, parse_catalog(shipped_catalog_text()), when)
        node_labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in items}
        priced = [(o, node_labels.get(o.where, {})) for o in offers]
        if args.throughput:
            table = load_yaml(args.throughput)
            if not isinstance(table, dict):
                raise ValueError(f"{args.throughput}: expected a map of GPU model to tokens/s per GPU")
            throughput = flavors.throughput_by_family(table)
            source = f"recorded throughput {args.throughput}"
        else:
            lqs = _get(run, "localqueues", "--all-namespaces")
            namespaces = sorted(
                {
                    q["metadata"]["namespace"]
                    for q in lqs.get("items", [])
                    if (q.get("spec") or {}).get("clusterQueue") == args.cluster_queue
                }
            )
            if not namespaces:
                raise CommandError(
                    f"no LocalQueue feeds ClusterQueue {args.cluster_queue}: no workload to measure "
                    "(or pass --throughput FILE)"
                )
            span = (args.history or DEFAULT_HISTORY).total_seconds()
            prom = reader or HttpPrometheus(args.prometheus_url, args.timeout)
            per_model = query_per_gpu(prom, {"namespace": namespaces}, when.timestamp(), span)
            throughput = flavors.throughput_by_family({m: v for m, v in per_model.items() if m != UNKNOWN_MODEL})
            source = f"measured in {', '.join(namespaces)} over {span / 86400:g} d, {args.prometheus_url}"
    except (CommandError, PrometheusUnavailableError, PrometheusQueryError) as e:
        print(f"error: {e}", file=err)
        return CliExit.CANNOT_JUDGE
    except (KeyError, TypeError, AttributeError):  # an object of the API server (or --nodes) not of its kind's shape
        print(
            f"error: the ClusterQueue, a ResourceFlavor, a LocalQueue or a node ({args.nodes or 'the cluster'}) "
            "lacks a field of its kind; check them with kubectl get -o yaml",
            file=err,
        )
        return CliExit.CANNOT_JUDGE
    except ValueError as e:  # InputError included: a --nodes or --throughput file
        print(f"error: {e}", file=err)
        return CliExit.USAGE
    inferred: frozenset[str] = frozenset()
    if not args.no_table:
        throughput, inferred = flavors.with_table(throughput)
        if inferred:
            source += "; families never measured inferred from the relative throughput table (~)"
    costs = flavors.flavor_costs(flavor_objs, priced, throughput, inferred)
    ranking = flavors.order(costs)
    patch = flavors.reorder_patch(cq, ranking)
    out.write(_render(args.cluster_queue, costs, list(dict.fromkeys(flavor_names)), ranking, source))
    if not any(c.usd_per_mtoken is not None for c in costs):
        print("note: no flavor has a measured figure: nothing to reorder", file=out)
    if not patch:
        print("the ClusterQueue already has this order: nothing to change", file=out)
        return CliExit.OK
    text = json.dumps(patch)
    print(f"patch:\nkubectl patch clusterqueue {args.cluster_queue} --type=json -p '{text}'", file=out)
    if args.apply:
        proc = run(["patch", "clusterqueue", args.cluster_queue, "--type=json", "-p", text], None)
        if proc.returncode != 0:
            print(f"error: the patch was refused: {proc.stderr.strip()[:3000]}", file=err)
            return CliExit.FAILED
        print(f"applied: {proc.stdout.strip()[:3000]}", file=out)
    return CliExit.OK
