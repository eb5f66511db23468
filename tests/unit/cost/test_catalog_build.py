"""The shipped catalog is exactly what tools/build_price_catalog.py makes of the shared price data."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from statictrain.pricing import shipped_catalog_text

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "build_price_catalog.py"


def test_shipped_catalog_is_rebuilt_from_the_shared_snapshot() -> None:
    spec = importlib.util.spec_from_file_location("build_price_catalog", TOOL)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    src = tool.DEFAULT_SRC / "gpu_instances.csv"
    if not src.exists():
        pytest.skip(f"{src} is not in this checkout (the shared data folder sits next to the repository)")
    assert tool.build(src) == shipped_catalog_text()
