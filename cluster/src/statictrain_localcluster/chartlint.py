"""The chart's checkers, for `make lint`: helm lint --strict, kubeconform (strict, Kubernetes schemas) and
checkov's Kubernetes checks, on the chart rendered with its defaults and with every option on
(charts/statictrain/ci/all-options-values.yaml).

Tools are installed once into ``<cache>/tools/<tool>-<version>`` (kubeconform with ``go install`` from the Go
module proxy, checkov with pip into its own venv); later runs take seconds. kubeconform's default schema host
(raw.githubusercontent.com) is not reachable everywhere, so its schemas are made here from the OpenAPI
document the Kubernetes release publishes in its own module (k8s.io/kubernetes api/openapi-spec/swagger.json,
fetched and verified by ``go mod download``: the API the local kube-apiserver serves), the way kubeconform's
openapi2jsonschema makes them: one file per kind, objects closed (strict), int-or-string and quantities as
either. The Prometheus Operator kinds are checked against the minimal CRDs the tests use.

    python -m statictrain_localcluster.chartlint
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from statictrain_localcluster.cluster import build_binaries
from statictrain_localcluster.paths import REPO_FILES, cache_root

__all__ = ["CHECKOV_TRIAGE", "LintError", "crd_copy_problems", "kind_schemas", "main"]

KUBE_VERSION = "v1.34.4"
KUBECONFORM_VERSION = "v0.7.0"
CHECKOV_VERSION = "3.3.30"
CHART = REPO_FILES / "charts" / "statictrain"
ALL_OPTIONS = CHART / "ci" / "all-options-values.yaml"
MONITORING_CRDS = REPO_FILES / "tests" / "integration" / "operator" / "monitoring-crds.yaml"

_OP, _EXT, _SCHED = (f"Deployment.statictrain-system.st-statictrain-{c}" for c in ("operator", "extender", "scheduler"))
_TEST = "Pod.statictrain-system.st-statictrain-test"
CHECKOV_TRIAGE: dict[str, tuple[set[str], str]] = {
    "CKV_K8S_11": ({_OP, _EXT, _SCHED, _TEST}, "no CPU limits by default (CPU requests are set): a limit throttles "
                   "the operator's and the scheduler's bursts; `resources` values can add one"),
    "CKV_K8S_15": ({_OP, _EXT, _SCHED, _TEST}, "pullPolicy IfNotPresent by default (a value): tags are pinned "
                   "(the chart's appVersion, the Kubernetes version)"),
    "CKV_K8S_43": ({_OP, _EXT, _SCHED, _TEST}, "images by tag, not digest (a tag value may carry one: "
                   "`0.1.0@sha256:...`)"),
    "CKV_K8S_38": ({_OP, _EXT, _SCHED}, "the operator, the extender and the kube-scheduler call the API server "
                   "(the test pod mounts no token)"),
    "CKV_K8S_9": ({_OP, _TEST}, "the operator serves no requests (its liveness probe restarts it on a dead "
                  "watch); the test pod runs once"),
    "CKV_K8S_8": ({_TEST}, "the test pod runs once, for seconds"),
    "CKV_K8S_114": ({_SCHED}, "profiling is off in the KubeSchedulerConfiguration (enableProfiling: false); "
                    "checkov reads only a --profiling flag, which --config makes kube-scheduler ignore"),
    "CKV_K8S_115": ({_SCHED}, "the kube-scheduler serves /livez, /readyz and /metrics on the pod IP for the "
                    "kubelet's probes and Prometheus; its NetworkPolicy admits only Prometheus"),
}
"""Checkov findings on the rendered chart (defaults and every option on) that are by design: check -> (the
resources it flags, why). Any other finding, or a triaged one that no longer fires, fails `make lint`; the
README's triage table says the same."""


class LintError(RuntimeError):
    """A checker found a problem, or could not run; the message says which and why."""


def _run(cmd: list[str], what: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    if proc.returncode != 0:
        raise LintError(f"{what} failed:\n{(proc.stdout + proc.stderr).strip()[-6000:]}")
    return proc


def _tools() -> Path:
    return cache_root() / "tools"


def _install_once(target: Path, install: Any) -> Path:
    """`target` (a folder keyed by version) made by install(tmp) into a temporary folder, then renamed."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        install(Path(tmp))
        os.replace(tmp, target)
        Path(tmp).mkdir()  # for TemporaryDirectory's cleanup
    return target


def _go_env() -> dict[str, str]:
    if not shutil.which("go"):
        raise LintError("kubeconform is installed with `go install`: install Go >= 1.25 (https://go.dev/dl)")
    return {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}


def kubeconform() -> Path:
    def install(tmp: Path) -> None:
        _run(["go", "install", f"github.com/yannh/kubeconform/cmd/kubeconform@{KUBECONFORM_VERSION}"],
             "go install kubeconform", env={**_go_env(), "GOBIN": str(tmp)})
    return _install_once(_tools() / f"kubeconform-{KUBECONFORM_VERSION}", install) / "kubeconform"


def checkov() -> list[str]:
    """The command that runs checkov (its venv's python: the venv's scripts name the folder it was made in)."""
    def install(tmp: Path) -> None:
        _run([sys.executable, "-m", "venv", str(tmp)], "python -m venv (for checkov)")
        _run([str(tmp / "bin" / "pip"), "install", "-q", f"checkov=={CHECKOV_VERSION}"], "pip install checkov")
    venv = _install_once(_tools() / f"checkov-{CHECKOV_VERSION}", install)
    return [str(venv / "bin" / "python"), "-m", "checkov.main"]


# ---- kubeconform's schemas -------------------------------------------------------------------------------------

_EITHER = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
}


def _strict(schema: Any) -> Any:
    """A JSON Schema from an OpenAPI one: objects with properties closed; `format` dropped (OpenAPI's int32,
    byte... are not JSON Schema's); x-kubernetes-int-or-string as either."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("properties", "enum", "required") else _strict(v)) for k, v in schema.items()
           if k != "format" and not k.startswith("x-kubernetes")}
    if "properties" in out:
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
        if "additionalProperties" not in out and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["oneOf"] = [{"type": "string"}, {"type": "integer"}]
    return out


def _refs(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield ref.removeprefix("#/definitions/")
        for v in schema.values():
            yield from _refs(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from _refs(v)


def kind_schemas(swagger: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """kubeconform's file name ({kind}-{group prefix}-{version}.json, lower case) -> a standalone strict schema
    (the kind's definition and every definition it reaches)."""
    defs = {name: _EITHER.get(name) or _strict(d) for name, d in swagger["definitions"].items()}
    out: dict[str, dict[str, Any]] = {}
    for name, d in swagger["definitions"].items():
        for gvk in d.get("x-kubernetes-group-version-kind", []):
            reach, todo = set(), [name]
            while todo:
                n = todo.pop()
                if n not in reach:
                    reach.add(n)
                    todo.extend(_refs(defs[n]))
            group = gvk["group"].split(".")[0]
            file = f"{gvk['kind'].lower()}{'-' + group if group else ''}-{gvk['version']}.json"
            out[file] = {**defs[name], "definitions": {n: defs[n] for n in sorted(reach)}}
    return out


def crd_schemas(crds: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The same for custom resources, from their CRDs' openAPIV3Schema."""
    out: dict[str, dict[str, Any]] = {}
    for crd in crds:
        spec = crd["spec"]
        for v in spec["versions"]:
            file = f"{spec['names']['kind'].lower()}-{spec['group'].split('.')[0]}-{v['name']}.json"
            out[file] = _strict(v["schema"]["openAPIV3Schema"])
    return out


def schemas() -> Path:
    def install(tmp: Path) -> None:
        proc = _run(["go", "mod", "download", "-json", f"k8s.io/kubernetes@{KUBE_VERSION}"],
                    f"go mod download k8s.io/kubernetes@{KUBE_VERSION} (its OpenAPI document)", env=_go_env(),
                    cwd=tmp)
        swagger = json.loads((Path(json.loads(proc.stdout)["Dir"]) / "api/openapi-spec/swagger.json").read_text())
        for file, schema in kind_schemas(swagger).items():
            (tmp / file).write_text(json.dumps(schema))
    return _install_once(_tools() / f"kubeconform-schemas-{KUBE_VERSION}", install)


# ---- the checks -----------------------------------------------------------------------------------------------

def crd_copy_problems() -> list[str]:
    """The chart's files/crds/ must be crds/, byte for byte (`make chart-crds` copies them)."""
    source = {p.name: p.read_bytes() for p in (REPO_FILES / "crds").glob("*.yaml")}
    copy = {p.name: p.read_bytes() for p in (CHART / "files" / "crds").glob("*.yaml")}
    return [f"charts/statictrain/files/crds/{n} differs from crds/{n}: run `make chart-crds`"
            for n in sorted(set(source) | set(copy)) if source.get(n) != copy.get(n)]


def render(helm: Path, out: Path) -> list[Path]:
    files = []
    for name, extra in (("defaults", []), ("all-options", ["-f", str(ALL_OPTIONS)])):
        proc = _run([str(helm), "template", "st", str(CHART), "--namespace", "statictrain-system",
                     "--kube-version", KUBE_VERSION, *extra], f"helm template ({name})")
        path = out / name / "chart.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(proc.stdout)
        files.append(path)
    return files


def checkov_findings(rendered: list[Path]) -> set[tuple[str, str]]:
    """(check, resource) of every failed checkov Kubernetes check on the rendered files."""
    proc = subprocess.run([*checkov(), "--framework", "kubernetes", "--skip-download", "--output", "json",
                           *(a for p in rendered for a in ("-f", str(p)))], capture_output=True, text=True,
                          check=False)
    try:
        reports = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise LintError(f"checkov printed no report:\n{(proc.stdout + proc.stderr).strip()[-4000:]}") from None
    reports = reports if isinstance(reports, list) else [reports]
    return {(f["check_id"], f["resource"]) for r in reports for f in r["results"]["failed_checks"]}


def main() -> int:
    try:
        problems = crd_copy_problems()
        if problems:
            raise LintError("\n".join(problems))
        helm = build_binaries(log=sys.stderr) / "helm"
        for extra in ([], ["-f", str(ALL_OPTIONS)]):
            _run([str(helm), "lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART), *extra],
                 "helm lint --strict")
        print("helm lint --strict: clean (defaults, every option on)")
        monitoring = [d for d in yaml.safe_load_all(MONITORING_CRDS.read_text()) if d]
        with tempfile.TemporaryDirectory() as tmp:
            rendered = render(helm, Path(tmp))
            crd_dir = Path(tmp) / "crd-schemas"
            crd_dir.mkdir()
            for file, schema in crd_schemas(monitoring).items():
                (crd_dir / file).write_text(json.dumps(schema))
            location = "{{ .ResourceKind }}{{ .KindSuffix }}.json"
            _run([str(kubeconform()), "-strict", "-summary", "-kubernetes-version", KUBE_VERSION.removeprefix("v"),
                  "-schema-location", f"{schemas()}/{location}", "-schema-location", f"{crd_dir}/{location}",
                  *map(str, rendered)], "kubeconform -strict")
            print(f"kubeconform -strict (Kubernetes {KUBE_VERSION} schemas): clean")
            findings = checkov_findings(rendered)
            untriaged = {f for f in findings if f[1] not in CHECKOV_TRIAGE.get(f[0], ((), ""))[0]}
            stale = {(c, r) for c, (rs, _) in CHECKOV_TRIAGE.items() for r in rs} - findings
            if untriaged or stale:
                raise LintError("checkov: " + "; ".join(
                    [f"{c} on {r}: fix it, or triage it in chartlint.CHECKOV_TRIAGE and the README" for c, r in
                     sorted(untriaged)] + [f"{c} on {r} no longer fires: drop it from the triage" for c, r in
                                           sorted(stale)]))
            print(f"checkov {CHECKOV_VERSION} (Kubernetes checks): {len(findings)} findings, each triaged "
                  "in the README")
    except LintError as e:
        print(f"chartlint: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
