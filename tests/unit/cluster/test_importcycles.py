"""The import-cycle check (`make lint`): the cycle finder on edges given by hand, and the whole check on small
packages written to tmp_path and read back by grimp, as `make lint` reads the project's."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from statictrain_localcluster import importcycles


def test_each_circle_is_reported_once_with_all_its_modules_and_nothing_outside_it() -> None:
    edges = {
        "p.a": ["p.b"],
        "p.b": ["p.c", "p.x"],
        "p.c": ["p.a"],  # a -> b -> c -> a
        "p.d": ["p.a", "p.e"],  # reaches the circle, is not in it
        "p.e": ["p.f"],
        "p.f": ["p.e"],  # a second circle
        "p.g": ["p.g"],  # a module importing itself
        "p.x": [],
    }
    assert importcycles.find_cycles(edges) == [["p.a", "p.b", "p.c"], ["p.e", "p.f"], ["p.g"]]


def test_a_graph_without_circles_has_none_even_where_paths_join() -> None:
    diamond = {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}
    assert importcycles.find_cycles(diamond) == []


def test_a_long_chain_closed_at_its_end_is_one_circle_without_hitting_the_recursion_limit() -> None:
    n = 5000
    edges = {f"m{i:05}": [f"m{i + 1:05}"] for i in range(n - 1)}
    edges[f"m{n - 1:05}"] = ["m00000"]
    (component,) = importcycles.find_cycles(edges)
    assert component == sorted(edges)


def test_the_loop_shown_is_a_shortest_one_through_the_component() -> None:
    edges = {"a": ["b", "c"], "b": ["c"], "c": ["a"]}
    assert importcycles.cycle_through(["a", "b", "c"], edges) == ["a", "c", "a"]


def write_package(root: Path, files: dict[str, str]) -> str:
    name = f"cyc_{uuid.uuid4().hex[:8]}"
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    for module, source in files.items():
        (root / name / f"{module}.py").write_text(source.replace("PKG", name))
    return name


def test_a_circle_in_a_real_package_fails_the_check_and_names_each_import_and_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = write_package(
        tmp_path,
        {
            "a": "from PKG import b\n",
            "b": '"""Doc."""\n\nfrom . import c\n',
            "c": "import PKG.a\n",
            "d": "from PKG import a\n",  # imports into the circle, is not part of it
            "e": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from PKG import f\n",
            "f": "from PKG import e\n",  # a circle through a TYPE_CHECKING import counts
        },
    )
    assert importcycles.main([pkg]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"import cycle among 3 module(s): {pkg}.a, {pkg}.b, {pkg}.c",
        f"  {pkg}.a imports {pkg}.b (line 1)",
        f"  {pkg}.b imports {pkg}.c (line 3)",
        f"  {pkg}.c imports {pkg}.a (line 1)",
        f"import cycle among 2 module(s): {pkg}.e, {pkg}.f",
        f"  {pkg}.e imports {pkg}.f (line 4)",
        f"  {pkg}.f imports {pkg}.e (line 1)",
    ]
    assert err == "importcycles: 2 import cycle(s); move the import that points back up\n"


def test_a_package_without_circles_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = write_package(tmp_path, {"a": "from PKG import b\n", "b": "import json\n", "c": "from PKG import a, b\n"})
    assert importcycles.main([pkg]) == 0
    assert capsys.readouterr().out == f"importcycles: no import cycle among 4 modules of {pkg}\n"


@pytest.mark.parametrize(
    ("name", "says"),
    [("cyc_not_installed_anywhere", "Could not find package"), ("statictrain.labels", "no dots")],
)
def test_a_package_that_cannot_be_read_is_one_line_and_exit_2(
    name: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert importcycles.main([name]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(f"importcycles: cannot build the import graph of {name}: ")
    assert says in err


def test_a_module_that_does_not_parse_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    pkg = write_package(tmp_path, {"broken": "def (:\n"})
    assert importcycles.main([pkg]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "broken" in err
