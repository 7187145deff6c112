"""MaskBench coverage of the JSON Schema translator (structout.schema + the engine).

For every schema in ``tests/data/maskbench/*.jsonl.gz`` (the MaskBench development share, see
tests/data/README.md): translate it to KBNF, compile it, serialize every test document in the
grammar's layout and check that the grammar accepts the valid ones and refuses the invalid ones. A
schema is *fully correct* when it compiles, every valid document is accepted and every invalid
document is refused.

Usage::

    python bench/maskbench_coverage.py [--subset NAME ...] [--every N] [--layout compact|indent2|
        flexible] [--timeout S] [--json OUT] [--failures N] [--property-order schema|any]
        [--doc-order schema|given]

``--property-order`` is the translator's option; ``--doc-order given`` writes each document's
keys in the order the test data has them (default ``schema``: in the grammar's order, so that
only the values are tested).

Prints a per-subset table (fully correct / total and the failure reasons) and the overall rate.
"""

from __future__ import annotations

import argparse
import gzip
import json
import signal
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "maskbench"

LAYOUTS: dict[str, dict[str, Any]] = {
    "compact": {},
    "indent2": {"indent": 2},
    "flexible": {"whitespace": "flexible"},
}

# Failure reasons, in the order the table prints them.
REASONS = ("unsupported", "schema_error", "limit", "grammar_error", "timeout", "fn", "fp")


class _Timeout(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Timeout()


def load_rows(subset: str) -> list[dict[str, Any]]:
    with gzip.open(DATA / f"{subset}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def subsets() -> list[str]:
    return sorted(p.name[: -len(".jsonl.gz")] for p in DATA.glob("*.jsonl.gz"))


def check_schema(row: dict[str, Any], layout: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Classify one MaskBench row: ``{"outcome", "detail", "fn", "fp", "docs", "seconds"}``."""
    from structout._engine import compile_grammar
    from structout.errors import (
        GrammarError,
        LimitExceededError,
        SchemaError,
        UnsupportedSchemaError,
    )
    from structout.schema import translate

    t0 = time.perf_counter()
    layout = dict(layout)
    given_order = layout.pop("doc_order", "schema") == "given"
    res: dict[str, Any] = {"outcome": "ok", "detail": "", "fn": 0, "fp": 0, "docs": 0}
    use_alarm = timeout > 0 and hasattr(signal, "SIGALRM")
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tr = translate(row["schema"], **layout)
            if caught:
                res["warnings"] = [str(w.message)[:200] for w in caught]
        except UnsupportedSchemaError as e:
            res.update(outcome="unsupported", detail=f"{e.keyword or '-'}: {e}")
            return res
        except SchemaError as e:
            res.update(outcome="schema_error", detail=str(e))
            return res
        except LimitExceededError as e:
            res.update(outcome="limit", detail=str(e))
            return res
        try:
            grammar = compile_grammar(tr.kbnf)
        except LimitExceededError as e:
            res.update(outcome="limit", detail=f"engine: {str(e).splitlines()[0]}")
            return res
        except GrammarError as e:
            res.update(outcome="grammar_error", detail=str(e)[:300])
            return res
        for test in row["tests"]:
            doc = tr.layout.dumps(test["data"]) if given_order else tr.dumps(test["data"])
            ok = grammar.accepts(doc.encode("utf-8"))
            res["docs"] += 1
            if ok and not test["valid"]:
                res["fp"] += 1
                res.setdefault("fp_docs", []).append(doc[:300])
            elif not ok and test["valid"]:
                res["fn"] += 1
                res.setdefault("fn_docs", []).append(doc[:300])
        if res["fp"]:
            res["outcome"] = "fp"
        elif res["fn"]:
            res["outcome"] = "fn"
    except _Timeout:
        res.update(outcome="timeout", detail=f"over {timeout}s")
    except RecursionError:
        res.update(outcome="limit", detail="recursion depth")
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        res["seconds"] = time.perf_counter() - t0
    return res


def iter_sample(rows: list[dict[str, Any]], every: int, offset: int = 0) -> Iterator[int]:
    return iter(range(offset % every, len(rows), every)) if every > 1 else iter(range(len(rows)))


def run_subset(
    name: str,
    layout: dict[str, Any],
    every: int = 1,
    timeout: float = 30.0,
    progress: bool = False,
) -> list[dict[str, Any]]:
    rows = load_rows(name)
    results = []
    for i in iter_sample(rows, every):
        r = check_schema(rows[i], layout, timeout)
        r["index"] = i
        r["name"] = rows[i].get("name", "")
        results.append(r)
        if progress and len(results) % 100 == 0:
            print(f"  {name}: {len(results)} schemas", file=sys.stderr, flush=True)
    return results


def _run_subset_star(args: tuple[str, dict[str, Any], int, float, bool]) -> list[dict[str, Any]]:
    return run_subset(*args)


def run(
    names: list[str],
    layout: dict[str, Any],
    every: int = 1,
    timeout: float = 30.0,
    progress: bool = False,
    jobs: int = 0,
) -> dict[str, list[dict[str, Any]]]:
    """Results per subset. ``jobs > 0``: each subset in a fresh worker process (bounded memory)."""
    if jobs <= 0:
        return {name: run_subset(name, layout, every, timeout, progress) for name in names}
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    with ctx.Pool(processes=jobs, maxtasksperchild=1) as pool:
        args = [(name, layout, every, timeout, progress) for name in names]
        return dict(zip(names, pool.map(_run_subset_star, args, chunksize=1)))


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    head = ["subset", "schemas", "fully correct", "%"] + list(REASONS)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    tot: Counter[str] = Counter()
    n_all = 0
    for name, rs in results.items():
        c = Counter(r["outcome"] for r in rs)
        n = len(rs)
        n_all += n
        tot.update(c)
        pct = 100.0 * c["ok"] / n if n else 0.0
        lines.append(
            "| "
            + " | ".join([name, str(n), str(c["ok"]), f"{pct:.1f}"] + [str(c[k]) for k in REASONS])
            + " |"
        )
    pct = 100.0 * tot["ok"] / n_all if n_all else 0.0
    lines.append(
        "| "
        + " | ".join(
            ["**all**", str(n_all), str(tot["ok"]), f"{pct:.1f}"] + [str(tot[k]) for k in REASONS]
        )
        + " |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--subset", action="append", help="subset name (repeatable); default all")
    ap.add_argument("--every", type=int, default=1, help="take every N-th schema (sampling)")
    ap.add_argument("--layout", choices=sorted(LAYOUTS), default="compact")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per schema (0: none)")
    ap.add_argument("--json", help="write per-schema results to this file")
    ap.add_argument("--failures", type=int, default=0, help="print N failure details")
    ap.add_argument("--property-order", choices=["schema", "any"], default="schema")
    ap.add_argument(
        "--doc-order",
        choices=["schema", "given"],
        default="schema",
        help="documents' keys in the grammar's order (default) or as the data has them",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="worker processes, one fresh process per subset (0: run in this process)",
    )
    args = ap.parse_args(argv)
    names = args.subset or subsets()
    t0 = time.time()
    options = {
        **LAYOUTS[args.layout],
        "property_order": args.property_order,
        "doc_order": args.doc_order,
    }
    results = run(names, options, args.every, args.timeout, progress=True, jobs=args.jobs)
    print(table(results))
    secs = [r["seconds"] for rs in results.values() for r in rs]
    docs = sum(r["docs"] for rs in results.values() for r in rs)
    print(
        f"\n{len(secs)} schemas, {docs} documents, {time.time() - t0:.0f}s "
        f"(median {sorted(secs)[len(secs) // 2] * 1000:.0f} ms/schema)"
    )
    reasons: Counter[str] = Counter()
    for rs in results.values():
        for r in rs:
            if r["outcome"] in ("unsupported", "schema_error", "limit", "grammar_error"):
                reasons[f"{r['outcome']}: {r['detail'][:110]}"] += 1
    if reasons:
        print("\nmost common reasons:")
        for k, c in reasons.most_common(25):
            print(f"  {c:5d}  {k}")
    if args.failures:
        shown = 0
        for name, rs in results.items():
            for r in rs:
                if r["outcome"] != "ok" and shown < args.failures:
                    shown += 1
                    print(f"\n[{name} #{r['index']}] {r['outcome']} {r['detail'][:300]}")
                    for d in r.get("fp_docs", [])[:2]:
                        print("   FP doc:", d)
                    for d in r.get("fn_docs", [])[:2]:
                        print("   FN doc:", d)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
