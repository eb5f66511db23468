"""``statictrain estimate -f job.yaml``: what a job will cost on each GPU model before it runs.

    statictrain estimate -f job.yaml                 # cluster nodes, API dry run, Prometheus history
    statictrain estimate -f job.yaml --offline --catalog --region us-east-1

The spec is first created with a server-side dry run against the API server
(``kubectl create --dry-run=server``), so the CRD's validation and admission
policies judge it and its defaults are filled in; a rejected spec prints the
API server's message and exits 1. ``--offline`` skips the API server (nodes
from ``--nodes`` or ``--catalog``) and says the spec was not validated.
Exit status: 0 estimate printed; 1 spec rejected; 2 bad input or the cluster
could not be reached.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

import yaml
from statictrain import labels, manifest
from statictrain.pricing import parse_catalog, shipped_catalog_text

from statictrain_operator.cli_args import add_prometheus_url
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

Kubectl = Callable[[Sequence[str], str | None], subprocess.CompletedProcess[str]]
DEFAULT_HISTORY = timedelta(days=30)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from statictrain_operator.cli import _duration  # noqa: PLC0415  (cli registers this module)

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
    p.add_argument("--history", type=_duration, help="how far back to look for measured speed (default 30d)")
    add_prometheus_url(p)
    p.add_argument("--no-history", action="store_true", help="do not ask Prometheus for measured history")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per Prometheus query")
    p.set_defaults(func=run_estimate)


class CommandError(RuntimeError):
    pass


def system_kubectl(kubeconfig: str | None) -> Kubectl:
    def run(args: Sequence[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        cmd = ["kubectl", *(["--kubeconfig", kubeconfig] if kubeconfig else []), *args]
        try:
            return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60, check=False)
        except FileNotFoundError:
            raise CommandError(
                "kubectl not found on PATH; install it or use --offline with --nodes/--catalog"
            ) from None

    return run


def _read_spec(path: str) -> dict[str, Any]:
    doc = manifest.read_job(path, yaml.safe_load_all)
    return doc


def _kubectl_json(kubectl: Kubectl, args: Sequence[str], stdin: str | None = None) -> tuple[Any, str]:
    proc = kubectl(args, stdin)
    if proc.returncode != 0:
        return None, proc.stderr.strip() or proc.stdout.strip()
    return json.loads(proc.stdout), ""


def _history_jobs(kubectl: Kubectl, doc: Mapping[str, Any], ns: str) -> list[str]:
    """This job's name and every StaticTrainingJob in the namespace with the same entrypoint."""
    names = {doc["metadata"]["name"]}
    listed, _ = _kubectl_json(kubectl, ["get", labels.PLURAL, "-n", ns, "-o", "json"])
    entry = (doc.get("spec") or {}).get("entrypoint")
    for item in (listed or {}).get("items", []):
        if (item.get("spec") or {}).get("entrypoint") == entry:
            names.add(item["metadata"]["name"])
    return sorted(names)


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
            created, message = _kubectl_json(
                run, ["create", "--dry-run=server", "-n", ns, "-o", "json", "-f", "-"], json.dumps(doc)
            )
            if created is None:
                print(f"the API server rejected the spec:\n{message}", file=err)
                return 1
            doc = created
            header.append(f"spec: accepted by the API server (server-side dry run, namespace {ns})")
        catalog = parse_catalog(shipped_catalog_text())
        offers: list[Offer]
        if args.catalog:
            offers = offers_from_catalog(catalog, args.region)
            header.append(f"offers: shipped price catalog ({catalog.as_of}){', ' + args.region if args.region else ''}")
        else:
            if args.nodes:
                with open(args.nodes, encoding="utf-8") as f:
                    listed: Any = yaml.safe_load(f)
                source = args.nodes
            else:
                listed, message = _kubectl_json(run, ["get", "nodes", "-o", "json"])
                if listed is None:
                    raise CommandError(f"cannot list nodes: {message}")
                source = "the cluster's nodes"
            items = listed.get("items", [listed]) if isinstance(listed, dict) else []
            offers = offers_from_nodes(items, catalog, when)
            header.append(f"offers: {source} ({len(offers)} GPU nodes)")
    except (ValueError, OSError, CommandError) as e:
        print(f"error: {e}", file=err)
        return 2
    shape = job_shape(doc)
    speeds = {}
    if args.no_history:
        notes.append("measured history: not asked for (--no-history)")
    else:
        jobs = [doc["metadata"]["name"]] if args.offline else _history_jobs(run, doc, ns)
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
    return 0
