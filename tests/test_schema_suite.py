"""JSON Schema Test Suite (draft 2020-12) through the translator and the engine.

Every test group's schema is translated to KBNF and compiled; every instance is serialized in
the grammar's layout and fed to the recognizer. Each case is classified as ``pass``, ``fn``
(valid instance refused), ``fp`` (invalid instance accepted) or ``unsupported`` (the schema did
not translate). The classification is compared with ``tests/data/jsts_baseline.json``:

* any false positive fails,
* a case the baseline expects to pass that no longer passes fails (regression),
* a case that now passes but is listed as failing in the baseline fails too, until the
  baseline is rewritten in the same commit: ``python tests/test_schema_suite.py
  --update-baseline`` (or run pytest with ``STRUCTOUT_UPDATE_BASELINE=1``).

Documented deviations (docs/json_schema.md, "Deviations") are marked in the baseline: a valid
instance refused only because it holds an integral float such as ``1.0`` where the schema says
``integer`` (the grammar admits plain integers only) is ``fn`` with ``deviation:
integer-spelling``.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "tests" / "data" / "json-schema-test-suite"
BASELINE = REPO / "tests" / "data" / "jsts_baseline.json"

PARTS = {"main": "draft2020-12/*.json", "format": "draft2020-12/optional/format/*.json"}
TARGETS = {"main": 1000, "format": 600}


def _remotes() -> dict[str, Any]:
    """Documents under ``remotes/`` as the suite serves them (http://localhost:1234/...)."""
    reg: dict[str, Any] = {}
    root = SUITE / "remotes"
    for path in sorted(root.rglob("*.json")):
        rel = path.relative_to(root).as_posix()
        reg[f"http://localhost:1234/{rel}"] = json.loads(path.read_text(encoding="utf-8"))
    return reg


def run_suite(parts: dict[str, str] = PARTS, **layout: Any) -> dict[str, dict[str, Any]]:
    """Classify every case. Returns ``{case_id: {"status", "part", "what"}}``."""
    from structout._engine import compile_grammar
    from structout.errors import StructoutError
    from structout.schema import translate

    registry = _remotes()
    out: dict[str, dict[str, Any]] = {}
    for part, pattern in parts.items():
        for path in sorted(SUITE.glob(pattern)):
            rel = path.relative_to(SUITE / "draft2020-12").as_posix()
            groups = json.loads(path.read_text(encoding="utf-8"))
            for gi, group in enumerate(groups):
                error = None
                try:
                    tr = translate(group["schema"], registry=registry, **layout)
                    grammar = compile_grammar(tr.kbnf)
                except StructoutError as e:
                    error = f"{type(e).__name__}: {e}"
                for ti, test in enumerate(group["tests"]):
                    what = f"{group['description']} / {test['description']}"
                    if error is not None:
                        status = "unsupported"
                    else:
                        doc = tr.dumps(test["data"])
                        accepted = grammar.accepts(doc.encode("utf-8"))
                        if accepted == test["valid"]:
                            status = "pass"
                        else:
                            status = "fp" if accepted else "fn"
                    entry = {"status": status, "part": part, "what": what}
                    if status == "fn" and _integer_spelling_deviation(tr, test["data"]):
                        entry["deviation"] = INTEGER_SPELLING
                    if error is not None:
                        entry["error"] = error[:200]
                    out[f"{rel}#{gi}/{ti}"] = entry
    return out


#: A valid instance refused because it writes an integer as ``N.0`` (see the module docstring).
INTEGER_SPELLING = "integer-spelling"


def _integer_spelling_deviation(tr: Any, data: Any) -> bool:
    """Whether ``data`` holds an integral float and becomes acceptable when every integral
    float is written as a plain integer (so the refusal is the documented deviation only)."""
    found = False

    def plain(v: Any) -> Any:
        nonlocal found
        if isinstance(v, float) and v.is_integer():
            found = True
            return int(v)
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    converted = plain(data)
    if not found:
        return False
    from structout._engine import compile_grammar

    return bool(compile_grammar(tr.kbnf).accepts(tr.dumps(converted).encode("utf-8")))


def summarize(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    summary: dict[str, Counter[str]] = {}
    for r in results.values():
        summary.setdefault(r["part"], Counter())[r["status"]] += 1
    return {
        part: {k: c.get(k, 0) for k in ("pass", "fn", "fp", "unsupported")}
        | {"total": sum(c.values())}
        for part, c in sorted(summary.items())
    }


def baseline_of(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "about": "JSON Schema Test Suite draft2020-12 through structout.schema + engine; "
        "cases not listed pass. Rewrite with: python tests/test_schema_suite.py "
        "--update-baseline",
        "summary": summarize(results),
        "failing": {
            cid: [r["status"], r["what"]]
            + ([f"deviation: {r['deviation']}"] if r.get("deviation") else [])
            for cid, r in sorted(results.items())
            if r["status"] != "pass"
        },
    }


def write_baseline(results: dict[str, dict[str, Any]]) -> None:
    BASELINE.parent.mkdir(parents=True, exist_ok=True)
    BASELINE.write_text(
        json.dumps(baseline_of(results), indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def _engine_available() -> bool:
    try:
        from structout._engine import compile_grammar  # noqa: F401
    except ImportError:
        return False
    return True


needs_data = pytest.mark.skipif(
    not SUITE.is_dir() or not _engine_available(),
    reason="needs tests/data/json-schema-test-suite and the built engine",
)


@pytest.fixture(scope="module")
def compact_results() -> dict[str, dict[str, Any]]:
    return run_suite()


@needs_data
def test_suite_against_baseline(compact_results: dict[str, dict[str, Any]]) -> None:
    results = compact_results
    if os.environ.get("STRUCTOUT_UPDATE_BASELINE"):
        write_baseline(results)
    fps = [f"{cid}: {r['what']}" for cid, r in results.items() if r["status"] == "fp"]
    assert not fps, "false positives (invalid instances accepted):\n" + "\n".join(fps)
    base = json.loads(BASELINE.read_text(encoding="utf-8"))
    failing = base["failing"]
    regressions = [
        f"{cid}: {r['status']} ({r['what']}) {r.get('error', '')}"
        for cid, r in results.items()
        if r["status"] != "pass" and cid not in failing
    ]
    assert not regressions, "regressions against the baseline:\n" + "\n".join(regressions)
    improved = [cid for cid, r in results.items() if r["status"] == "pass" and cid in failing]
    changed = [
        cid
        for cid, r in results.items()
        if cid in failing and r["status"] != "pass" and r["status"] != failing[cid][0]
    ]
    assert not improved and not changed, (
        f"{len(improved)} cases now pass and {len(changed)} changed failure kind; update the "
        "baseline in the same commit (python tests/test_schema_suite.py --update-baseline)"
    )
    # documented deviations are recorded as such, and only those
    deviations = {cid for cid, r in results.items() if r.get("deviation")}
    recorded = {cid for cid, f in failing.items() if len(f) > 2 and f[2].startswith("deviation")}
    assert deviations == recorded, (sorted(deviations ^ recorded), "update the baseline")
    summary = summarize(results)
    for part, target in TARGETS.items():
        assert summary[part]["pass"] >= target, (part, summary[part])


@needs_data
@pytest.mark.parametrize(
    "layout", [{"indent": 2}, {"whitespace": "flexible"}], ids=["indent2", "flexible"]
)
def test_suite_other_layouts(
    layout: dict[str, Any], compact_results: dict[str, dict[str, Any]]
) -> None:
    """Other layouts classify every case like the compact one (and never accept invalid)."""
    results = run_suite({"main": PARTS["main"]}, **layout)
    fps = [cid for cid, r in results.items() if r["status"] == "fp"]
    assert not fps, fps
    differ = [
        f"{cid}: {r['status']} vs compact {compact_results[cid]['status']} ({r['what']})"
        for cid, r in results.items()
        if r["status"] != compact_results[cid]["status"]
    ]
    assert not differ, "\n".join(differ[:50])


if __name__ == "__main__":
    res = run_suite()
    print(json.dumps(summarize(res), indent=1))
    if "--update-baseline" in sys.argv:
        write_baseline(res)
        print(f"wrote {BASELINE}")
