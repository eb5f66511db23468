"""Layering of the operator: only kube/ imports `kubernetes`; the pure modules import neither kopf nor kubernetes."""

from __future__ import annotations

import ast
import pathlib

import pytest
import statictrain_operator

PACKAGE = pathlib.Path(statictrain_operator.__file__).parent
PURE = [
    *sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "children").glob("*.py")),
    *["status.py", "reconcile.py", "progress/__init__.py", "settings.py", "kube/events.py"],
]


def imported_roots(path: pathlib.Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_only_the_kube_layer_imports_kubernetes() -> None:
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "kubernetes" in imported_roots(p) and p.parent.name != "kube"
    ]
    assert offenders == []


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_do_no_io(module: str) -> None:
    assert imported_roots(PACKAGE / module).isdisjoint({"kopf", "kubernetes", "requests", "aiohttp", "urllib3"})


def test_the_check_sees_imports() -> None:
    assert {"kopf", "statictrain"} <= imported_roots(PACKAGE / "handlers.py")
