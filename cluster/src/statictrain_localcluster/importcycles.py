"""The import-cycle check, for `make lint`: no module of the project's packages reaches itself through imports.

import-linter's contracts hold chosen edges (layers, forbidden imports); this check holds every edge: it builds
the import graph with grimp (import-linter's own graph builder; imports under ``if TYPE_CHECKING`` count, as they
do for the contracts) and reports each circle as its strongly connected component, the modules that reach one
another, with one loop through them and the line of each import in it, so the fix (which import to move) is in
the report.

    python -m statictrain_localcluster.importcycles [PACKAGE ...]   # default: the project's packages

Exit status: 0 no cycle; 1 cycles found (each printed); 2 a package named is not importable.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["PROJECT_PACKAGES", "GraphError", "cycle_through", "find_cycles", "import_edges", "main", "report"]

PROJECT_PACKAGES = (
    "statictrain",
    "statictrain_operator",
    "statictrain_cli",
    "statictrain_sidecar",
    "statictrain_trainer",
    "statictrain_extender",
    "statictrain_localcluster",
)
"""The packages the check covers by default: every distribution of the repository."""


class GraphError(Exception):
    """The import graph cannot be built (a package not importable, a module that does not parse)."""


Edges = Mapping[str, Iterable[str]]
"""Module -> the modules it imports directly."""


def find_cycles(edges: Edges) -> list[list[str]]:
    """Every import circle: each strongly connected component of more than one module, or a module importing
    itself; modules sorted within a component, components sorted by their first module.

    Tarjan's algorithm, iterative (a deep import chain must not hit Python's recursion limit).
    """
    succ = {m: sorted(set(ts)) for m, ts in edges.items()}
    for targets in list(succ.values()):
        for t in targets:
            succ.setdefault(t, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(succ):
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(succ[node]):
                work.append((node, i + 1))
                nxt = succ[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:  # node is done: its caller takes its low link
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in succ[node]:
                    found.append(sorted(component))
    return sorted(found)


def cycle_through(component: Sequence[str], edges: Edges) -> list[str]:
    """One shortest loop from the component's first module back to it, inside the component:
    ``[a, b, ..., a]``."""
    start = component[0]
    inside = set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(set(edges.get(node, ()))):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if nxt in inside and nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise ValueError(f"{start} is in no cycle of the modules given")


def import_edges(packages: Sequence[str]) -> tuple[dict[str, set[str]], dict[tuple[str, str], list[int]]]:
    """The project's import graph (grimp; no cache written) and the line numbers of each import.

    Raises GraphError when a package is not a top-level package of this environment or a module does not parse."""
    import grimp  # noqa: PLC0415 - only the check needs it, not the rest of the dev tooling

    dotted = [p for p in packages if "." in p]
    if dotted:
        raise GraphError(f"{', '.join(dotted)}: name top-level packages (no dots)")
    try:
        graph = grimp.build_graph(*packages, cache_dir=None)
    except (grimp.exceptions.GrimpException, ValueError) as e:  # ValueError: a package not found
        raise GraphError(str(e) or type(e).__name__) from e
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    lines = {
        (a, b): sorted({d["line_number"] for d in graph.get_import_details(importer=a, imported=b)})
        for a, targets in edges.items()
        for b in targets
    }
    return edges, lines


def report(cycles: list[list[str]], edges: Edges, lines: Mapping[tuple[str, str], list[int]]) -> list[str]:
    """The lines printed for the cycles found: the modules of each, then one loop through them."""
    out = []
    for component in cycles:
        out.append(f"import cycle among {len(component)} module(s): {', '.join(component)}")
        loop = cycle_through(component, edges)
        for a, b in itertools.pairwise(loop):
            at = ", ".join(str(n) for n in lines.get((a, b), [])) or "?"
            out.append(f"  {a} imports {b} (line {at})")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m statictrain_localcluster.importcycles", description=__doc__)
    parser.add_argument("packages", nargs="*", default=list(PROJECT_PACKAGES), help="top-level packages to check")
    args = parser.parse_args(argv)
    try:
        edges, lines = import_edges(args.packages)
    except GraphError as e:
        print(f"importcycles: cannot build the import graph of {', '.join(args.packages)}: {e}", file=sys.stderr)
        return 2
    cycles = find_cycles(edges)
    for line in report(cycles, edges, lines):
        print(line)
    if cycles:
        print(f"importcycles: {len(cycles)} import cycle(s); move the import that points back up", file=sys.stderr)
        return 1
    print(f"importcycles: no import cycle among {len(edges)} modules of {', '.join(args.packages)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
