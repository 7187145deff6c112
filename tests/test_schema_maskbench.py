"""A deterministic MaskBench sample through the translator and the engine.

Every 40th schema of every subset (about 210 schemas) is translated, compiled and checked
against its test documents (see ``bench/maskbench_coverage.py`` for the full run). The grammar
must never accept a document labelled invalid, and the share of fully correct schemas must stay
above a floor set a little under the measured value.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import maskbench_coverage as mb

EVERY = 40
COVERAGE_FLOOR = 0.95


def _available() -> bool:
    try:
        from structout._engine import compile_grammar  # noqa: F401
    except ImportError:
        return False
    return mb.DATA.is_dir()


@pytest.mark.skipif(not _available(), reason="needs tests/data/maskbench and the engine")
def test_maskbench_sample() -> None:
    results = mb.run(mb.subsets(), {}, every=EVERY, timeout=30.0)
    rows = [r for rs in results.values() for r in rs]
    fps = [
        f"{name} #{r['index']}: {r.get('fp_docs')}"
        for name, rs in results.items()
        for r in rs
        if r["fp"]
    ]
    assert not fps, "grammar accepted documents labelled invalid:\n" + "\n".join(fps)
    ok = sum(1 for r in rows if r["outcome"] == "ok")
    rate = ok / len(rows)
    assert rate >= COVERAGE_FLOOR, f"{ok}/{len(rows)} fully correct\n{mb.table(results)}"
