"""``statictrain estimate -f job.yaml``: what a job will cost on each GPU model before it runs.

    statictrain estimate -f job.yaml                 # cluster nodes, API dry run, Prometheus history
    statictrain estimate -f job.yaml --offline --catalog --region us-east-1

The spec is first created with a server-side dry run against the API server
(``kubectl create --dry-run=server``), so the CRD's validation and admission
policies judge it and its defaults are filled in; a rejected spec prints the
API server's message and exits 1. ``--offline`` skips the API server (nodes
from ``--nodes`` or ``--catalog``) and says the spec was not validated.
Exit status (``statictrain.exitcodes.CliExit``): 0 estimate printed; 1 spec
rejected; 2 bad input (an option, the spec or ``--nodes`` file); 3 kubectl or the
API server gave no usable answer. Prometheus history is optional: when it cannot
be read, a note says why and the estimate goes on without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from statictrain import labels, manifest
from statictrain.exitcodes import CliExit
from statictrain.pricing import Catalog, parse_catalog, shipped_catalog_text
from statictrain_cli.args import add_prometheus_url, add_timeout, duration
from statictrain_cli.files import load_yaml, load_yaml_all
from statictrain_cli.kubectl import CommandError, Kubectl, kubectl_json, system_kubectl
from statictrain_operator.estimate import (
    Offer,
    Option,
    estimate,
    job_shape,
    offers_from_catalog,
    offers_from_nodes,
    speeds_by_family,
)
from statictrain_operator.history import query_speed
from statictrain_operator.prom import HttpPrometheus, PrometheusQueryError, PrometheusUnavailableError, PromReader

DEFAULT_HISTORY = timedelta(days=30)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "estimate",
        help="expected $/hour, time and $ to finish a job spec on each GPU model, cheapest first",
        description="Estimate a StaticTrainingJob's cost per GPU model before running it.",
    )
    p.add_argument("-f", "--filename", required=True, help="the StaticTrainingJob manifest (YAML or JSON; - for stdin)")
    p.add_argument("-n", "--namespace", help="namespace (default: the manifest's, else the kubeconfig's)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default KUBECONFIG)")
    p.add_argument("--nodes", help="nodes from this file (kubectl get nodes -o json) instead of the cluster")
    p.add_argument("--catalog", action="store_true", help="every instance type of the shipped price catalog")
    p.add_argument("--region", help="with --catalog: only this region")
    p.add_argument("--offline", action="store_true", help="no API server: no validation (needs --nodes or --catalog)")
    p.add_argument("--history", type=duration, help="how far back to look for measured speed (default 30d)")
    add_prometheus_url(p)
    p.add_argument("--no-history", action="store_true", help="do not ask Prometheus for measured history")
    add_timeout(p, 30.0)
    p.set_defaults(func=run_estimate)


def _read_spec(path: str) -> dict[str, Any]:
    return manifest.one_job(load_yaml_all(path), path)


def _history_jobs(kubectl: Kubectl, doc: Mapping[str, Any], ns: str) -> list[str]:
    """This job's name and every StaticTrainingJob in the namespace with the same entrypoint."""
    names = {doc["metadata"]["name"]}
    listed, _ = kubectl_json(kubectl, ["get", labels.PLURAL, "-n", ns, "-o", "json"])
    entry = (doc.get("spec") or {}).get("entrypoint")
    items = (listed or {}).get("items")
    for item in items if isinstance(items, list) else []:
        spec, meta = (item.get("spec"), item.get("metadata")) if isinstance(item, dict) else (None, None)
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(spec, dict) and spec.get("entrypoint") == entry and isinstance(name, str):
            names.add(name)
    return sorted(names)


def _offers(listed: Any, source: str, catalog: Catalog, when: datetime) -> list[Offer]:
    """The GPU offers of a node list (``kubectl get nodes -o json``) or of one node."""
    items = listed.get("items", [listed]) if isinstance(listed, dict) else None
    try:
        if not isinstance(items, list):
            raise TypeError
        return offers_from_nodes(items, catalog, when)
    except (KeyError, TypeError, AttributeError, ValueError):
        raise ValueError(f"{source}: not a node list (kubectl get nodes -o json) or a node") from None


def _render(options: list[Option], notes: list[str], header: list[str]) -> str:
    rows = [["GPU", "CAPACITY", "$/HOUR", "HOURS", "$ TO FINISH", "$/WORK", "OFFERS", "PRICE", "TIME"]]
    for o in options:
        rows.append(
            [
                o.family,
                o.offer.capacity_type,
                f"{o.hourly_usd:.2f}",
                f"{o.hours:.2f}" if o.hours is not None else "?",
                f"{o.total_usd:.2f}" if o.total_usd is not None else "?",
                f"{o.work_usd:.2f}" if o.work_usd is not None else "?",
                str(o.nodes),
                o.price_basis.replace(f", {o.offer.capacity_type}", ""),
                o.time_basis,
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        *header,
        "order: cheapest $ to finish first; where the time is unknown (?), by $/WORK, then $/HOUR",
        "$/WORK: $/HOUR / the throughput table's per-GPU speed relative to A100 (table value), i.e. $ per A100-hour"
        " of work",
        "TIME: measured = this entrypoint's history on that GPU model; inferred = history on other models x the"
        " throughput table's ratios",
    ]
    for r in rows:
        lines.append("  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip())
    if not options:
        lines.append("no GPU model the spec allows is available here")
    lines.extend(f"note: {n}" for n in notes)
    return "\n".join(lines) + "\n"


def run_estimate(
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
    header: list[str] = []
    notes: list[str] = []
    try:
        doc = _read_spec(args.filename)
        if args.offline and not (args.nodes or args.catalog):
            raise ValueError("--offline needs --nodes FILE or --catalog")
        run = kubectl or system_kubectl(args.kubeconfig)
        ns = args.namespace or (doc.get("metadata") or {}).get("namespace") or "default"
        if args.offline:
            header.append("spec: not validated (--offline)")
        else:
            created, message = kubectl_json(
                run, ["create", "--dry-run=server", "-n", ns, "-o", "json", "-f", "-"], json.dumps(doc)
            )
            if created is None:
                print(f"the API server rejected the spec:\n{message}", file=err)
                return CliExit.FAILED
            doc = created
            header.append(f"spec: accepted by the API server (server-side dry run, namespace {ns})")
        catalog = parse_catalog(shipped_catalog_text())
        offers: list[Offer]
        if args.catalog:
            offers = offers_from_catalog(catalog, args.region)
            header.append(f"offers: shipped price catalog ({catalog.as_of}){', ' + args.region if args.region else ''}")
        else:
            if args.nodes:
                listed: Any = load_yaml(args.nodes)
                source = args.nodes
            else:
                listed, message = kubectl_json(run, ["get", "nodes", "-o", "json"])
                if listed is None:
                    raise CommandError(f"cannot list nodes: {message}")
                source = "the cluster's nodes"
            offers = _offers(listed, source, catalog, when)
            header.append(f"offers: {source} ({len(offers)} GPU nodes)")
    except CommandError as e:
        print(f"error: {e}", file=err)
        return CliExit.CANNOT_JUDGE
    except ValueError as e:  # InputError included
        print(f"error: {e}", file=err)
        return CliExit.USAGE
    shape = job_shape(doc)
    speeds = {}
    if args.no_history:
        notes.append("measured history: not asked for (--no-history)")
    else:
        try:
            jobs = [doc["metadata"]["name"]] if args.offline else _history_jobs(run, doc, ns)
        except CommandError as e:
            print(f"error: {e}", file=err)
            return CliExit.CANNOT_JUDGE
        span = (args.history or DEFAULT_HISTORY).total_seconds()
        try:
            prom = reader or HttpPrometheus(args.prometheus_url, args.timeout)
            per = query_speed(prom, {"namespace": [ns], "job_name": jobs}, when.timestamp(), span, "namespace")
            speeds = speeds_by_family(per.get(ns, {}))
            header.append(f"history: jobs {', '.join(jobs)} in {ns}, last {span / 3600:g} h, {args.prometheus_url}")
        except (PrometheusUnavailableError, PrometheusQueryError) as e:
            notes.append(f"measured history unavailable: {e}")
    options, more = estimate(shape, offers, speeds)
    ends = [f"{k} {v}" for k, v in (("maxSteps", shape.max_steps), ("maxTokens", shape.max_tokens)) if v is not None]
    header.append(f"job: {shape.replicas} replica(s) x {shape.gpus_per_replica} GPU(s); {', '.join(ends) or 'no end'}")
    out.write(_render(options, [*more, *notes], header))
    return CliExit.OK
