"""Compile statistics read from torch._dynamo's process-wide counters."""

from __future__ import annotations

from dataclasses import dataclass

from torch._dynamo import utils as dynamo_utils


@dataclass(frozen=True)
class CompileStats:
    """Counts since the process started."""

    graph_breaks: int
    """Graph breaks dynamo took (all reasons)."""
    recompiles: int
    """Frames compiled again after a guard failed."""
    unique_graphs: int
    """Graphs dynamo produced."""
    fx_cache_hits: int
    """Inductor FX graph cache hits (local or loaded from the shared cache)."""
    fx_cache_misses: int
    """Inductor FX graph cache misses (a real compile)."""
    compile_seconds: float
    """Dynamo's own total of forward and backward compile wall time."""

    def compiled_since(self, earlier: CompileStats) -> bool:
        """Whether anything was traced or compiled between the two readings."""
        return (
            self.unique_graphs != earlier.unique_graphs
            or self.fx_cache_hits != earlier.fx_cache_hits
            or self.fx_cache_misses != earlier.fx_cache_misses
        )


def read() -> CompileStats:
    counters = dynamo_utils.counters
    failures = getattr(dynamo_utils, "guard_failures", {})
    spent = dynamo_utils.calculate_time_spent() if hasattr(dynamo_utils, "calculate_time_spent") else {}
    return CompileStats(
        graph_breaks=sum(counters["graph_break"].values()),
        recompiles=sum(len(v) for v in failures.values()),
        unique_graphs=int(counters["stats"]["unique_graphs"]),
        fx_cache_hits=int(counters["inductor"]["fxgraph_cache_hit"]),
        fx_cache_misses=int(counters["inductor"]["fxgraph_cache_miss"]),
        compile_seconds=float(spent.get("total_wall_time", 0.0)),
    )
