"""The engines ``schema_bench.py`` compares, behind one interface: structout, llguidance and
XGrammar, each compiling a JSON Schema into a matcher and filling / accepting token masks; plus
loading the MaskBench cases and grouping refusal messages. See ``schema_bench.py`` for what is
timed and how.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import re
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mask_bench.py lives next to this file
from mask_bench import REPO, EngineUnavailable, perf_ns, sample_schemas

COMPACT_SEPARATORS = (", ", ": ")
# A small schema compiled once per engine before the run (untimed): first-call costs such as
# imports, lazy initialisation and the per-vocabulary token index stay out of the compile times.
WARMUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 0},
        "name": {"type": "string", "maxLength": 20},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    },
    "required": ["id"],
}


class CompileRefused(Exception):
    """The engine refused the schema (an expected outcome, counted as "not compiled")."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _first_line(text: str, limit: int = 300) -> str:
    return (text or "").strip().split("\n", 1)[0][:limit]


# --------------------------------------------------------------------------------------------
# Data


@dataclass
class Case:
    """One sampled MaskBench schema and the valid test documents chosen for it."""

    ident: str  # "<subset>/<schema name>"
    schema: Any
    docs: list[tuple[int, Any]]  # (test index, data)


@dataclass
class Doc:
    ident: str  # "<subset>/<schema name>#<test index>"
    text: str
    tokens: list[int]
    layout: str  # "structout" (translate(schema).dumps) or "json.dumps" (fallback)


def load_cases(
    data_dir: Path, subsets: list[str] | None, n_schemas: int, docs_per_schema: int, seed: int
) -> tuple[list[Case], int]:
    """``mask_bench.sample_schemas`` (the same seed selects the same schemas and documents as
    ``mask_bench.py``), keeping the schemas."""
    sample, n_candidates = sample_schemas(data_dir, subsets, n_schemas, docs_per_schema, seed)
    return [Case(ident, schema, docs) for ident, schema, docs in sample], n_candidates


# --------------------------------------------------------------------------------------------
# Engines. ``compile(schema)`` is the timed part (schema to ready matcher) and raises
# CompileRefused for a refused schema; ``start_doc`` / ``reject_reason`` / ``end_accepting`` /
# ``bitmask`` are the interface of mask_bench.walk; ``release`` drops the schema's grammar.


class SchemaEngine:
    name = ""
    prep_s = 0.0  # vocabulary / tokenizer preparation, once
    warmup_s = 0.0  # the untimed warm-up compile

    def __init__(self, words: int) -> None:
        self.notes: list[str] = []
        self.bitmask = np.zeros((1, words), dtype=np.int32)
        self.matcher: Any = None

    def before_compile(self) -> None:
        """Untimed preparation before each compile (cache clearing)."""

    def compile(self, schema: Any) -> None:
        raise NotImplementedError

    def after_compile(self) -> str | None:
        """Untimed check after a successful compile; returns a problem description or None."""
        return None

    def start_doc(self) -> tuple[Callable[[], Any], Callable[[int], bool]]:
        raise NotImplementedError

    def reject_reason(self) -> str:
        return "token rejected"

    def end_accepting(self) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        self.matcher = None

    def grammar_bytes(self) -> int | None:
        """Heap bytes the current grammar keeps, where the engine counts them (else None)."""
        return None

    def warm_up(self) -> None:
        self.before_compile()
        t0 = perf_ns()
        self.compile(copy.deepcopy(WARMUP_SCHEMA))
        self.warmup_s = (perf_ns() - t0) / 1e9
        self.release()


def find_memo_tables(package: str) -> list[tuple[str, Callable[[], Any]]]:
    """Module-level memo tables of ``package``'s loaded modules, as ``(name, clear)``: functions
    wrapped in ``functools.lru_cache`` (except zero-argument ones: constant tables such as the
    Unicode category table, computed once per process), objects of a class whose name contains
    "Cache" or is "LRU" (``structout.lru.LRU``, e.g. the terminal-text cache) with a ``clear()``
    method, and dicts whose module-level name contains "cache"."""
    found: list[tuple[str, Callable[[], Any]]] = []
    seen: set[int] = set()
    for mod_name, mod in sorted(sys.modules.items()):
        if mod is None or not (mod_name == package or mod_name.startswith(package + ".")):
            continue
        for attr, obj in list(vars(mod).items()):
            if id(obj) in seen or isinstance(obj, type) or inspect.ismodule(obj):
                continue
            kind = type(obj).__name__.lower()
            cache_object = ("cache" in kind or kind == "lru") and callable(
                getattr(obj, "clear", None)
            )
            cache_dict = isinstance(obj, dict) and "cache" in attr.lower()
            clear = None
            if callable(getattr(obj, "cache_clear", None)) and hasattr(obj, "cache_info"):
                try:
                    constant = not inspect.signature(obj).parameters
                except (TypeError, ValueError):
                    constant = False
                if not constant:  # a zero-argument memo is a process-wide constant table
                    clear = obj.cache_clear
            elif cache_object or cache_dict:
                clear = obj.clear
            if clear is not None:
                seen.add(id(obj))
                found.append((f"{mod_name.rsplit('.', 1)[-1]}.{attr}", clear))
    return found


class StructoutSchemaEngine(SchemaEngine):
    name = "structout"

    def __init__(
        self,
        tok: Any,
        vocab_size: int,
        eos: int,
        words: int,
        layout: str,
        cold: bool,
        default_path: bool = False,
    ) -> None:
        super().__init__(words)
        if str(REPO) not in sys.path:
            # this checkout's structout, even where another checkout is installed editable
            sys.path.insert(0, str(REPO))
        try:
            so: Any = importlib.import_module("structout")
            cache_mod: Any = importlib.import_module("structout.cache")
            schema_mod: Any = importlib.import_module("structout.schema")
        except ImportError as e:
            raise EngineUnavailable(f"structout not importable ({e})") from e
        self.so = so
        self.schema_mod = schema_mod
        self.notes.append(f"structout imported from {Path(so.__file__).parent}")
        self.refusals = (
            so.UnsupportedSchemaError,
            so.SchemaError,
            so.LimitExceededError,
            so.GrammarError,
        )
        # default_path: what a user's process pays, compile_json_schema through the process-wide
        # cache on a fresh directory (disk lookups and writes included), nothing cleared between
        # compiles. Otherwise a memory-only schema -> KBNF cache, cleared before each compile.
        self.default_path = default_path
        if default_path:
            self.cache_dir = tempfile.mkdtemp(prefix="structout-bench-cache-")
            self.cache = cache_mod.CompileCache(directory=self.cache_dir)
        else:
            self.cache = cache_mod.CompileCache(disk=False)
        cache_mod._default_cache = self.cache
        self.options: dict[str, Any] = {"whitespace": "flexible"} if layout == "flexible" else {}
        t0 = perf_ns()
        self.vocab = so.Vocabulary.from_hf(tok, vocab_size, eos_token_ids=[eos])
        self.prep_s = (perf_ns() - t0) / 1e9
        self.bitmask = np.ascontiguousarray(so.allocate_token_bitmask(1, self.vocab.size))
        self.grammar: Any = None
        self.keep_alive: Any = None
        # The translator's memo tables (regex / format automata): cleared before each compile
        # unless --warm-translator-caches (found after the warm-up, when all modules are loaded).
        self.cold = cold
        self.memo_tables: list[tuple[str, Callable[[], Any]]] = []
        self.layout = "flexible" if layout == "flexible" else "compact"

    def before_compile(self) -> None:
        if self.default_path:
            return
        self.cache.clear()
        self.so.configure_cache(clear=True)  # also resets the engine's counters
        for _name, clear in self.memo_tables:
            clear()
        self._misses = self.cache.stats().schema_misses

    def compile(self, schema: Any) -> None:
        # compile_json_schema's two steps, timed apart: schema -> KBNF (through the schema cache,
        # a miss here) and KBNF -> compiled grammar (the engine).
        sm = self.schema_mod
        self.split = None
        if self.default_path:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.grammar = self.so.compile_json_schema(schema, self.vocab, **self.options)
            except self.refusals as e:
                raise CompileRefused(type(e).__name__, str(e)) from None
            self.matcher = self.grammar.matcher()
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SchemaSubsetWarning etc.
                t0 = perf_ns()
                plain, _ = sm.json_schema_of(schema)
                text, _ = self.cache.kbnf_for_schema(
                    plain, lambda s: sm.to_kbnf(s, **self.options), self.options
                )
                t1 = perf_ns()
                grammar = self.so.compile_kbnf(text, self.vocab)
                t2 = perf_ns()
        except self.refusals as e:
            raise CompileRefused(type(e).__name__, str(e)) from None
        self.grammar = grammar
        self.matcher = grammar.matcher()
        self.split = {
            "translate_ms": (t1 - t0) / 1e6,
            "engine_ms": (t2 - t1) / 1e6,
            "kbnf_bytes": len(text.encode("utf-8")),
            "grammar_bytes": grammar.memory_usage,
        }
        self.last_kbnf = (plain, text)

    def after_compile(self) -> str | None:
        if self.default_path:
            return None
        misses = self.cache.stats().schema_misses - self._misses
        engine = self.so.grammar_cache_stats()
        if misses != 1 or engine["hits"] != 0 or engine["misses"] != 1:
            return f"cache not bypassed: schema misses {misses}, engine {engine}"
        return None

    def warm_up(self) -> None:
        self.before_compile()
        t0 = perf_ns()
        self.compile(copy.deepcopy(WARMUP_SCHEMA))
        self.warmup_s = (perf_ns() - t0) / 1e9
        # Engine builds before 98fa6c5 kept the per-vocabulary token index only while a grammar
        # used it (the next compile rebuilt it otherwise); holding one grammar keeps runs against
        # those builds (A/B in a worktree) comparable. Newer builds keep it with the vocabulary.
        self.keep_alive = self.grammar
        self.release()
        if self.cold:
            self.memo_tables = find_memo_tables("structout.schema")
        if self.default_path:
            self.notes.append(
                f"layout: whitespace={self.layout}; default path: compile_json_schema through "
                f"the process-wide cache on a fresh directory ({self.cache_dir}), nothing cleared"
            )
            return
        self.notes.append(
            f"layout: whitespace={self.layout}; schema->KBNF cache memory-only, it and the "
            "engine's compiled-grammar cache cleared before each compile; "
            + (
                f"{len(self.memo_tables)} translator memo tables cleared too: "
                + ", ".join(name for name, _ in self.memo_tables)
                if self.cold
                else "translator memo tables kept warm (--warm-translator-caches)"
            )
        )

    def release(self) -> None:
        self.matcher = None
        self.grammar = None

    def grammar_bytes(self) -> int | None:
        return None if self.grammar is None else int(self.grammar.memory_usage)

    def start_doc(self) -> tuple[Callable[[], Any], Callable[[int], bool]]:
        self.matcher.reset()
        m = self.matcher
        return functools.partial(m.fill_next_token_bitmask, self.bitmask, row=0), m.accept_token

    def end_accepting(self) -> bool:
        return bool(self.matcher.can_finish())


class LLGuidanceSchemaEngine(SchemaEngine):
    name = "llguidance"

    def __init__(self, tok: Any, vocab_size: int, eos: int, words: int, layout: str) -> None:
        super().__init__(words)
        try:
            import llguidance
        except ImportError as e:
            raise EngineUnavailable(
                f"llguidance not installed ({e}); pip install llguidance"
            ) from e
        self._llg = llguidance
        t0 = perf_ns()
        self.lltok = llguidance.LLTokenizer(tok.to_str(), n_vocab=vocab_size, eos_token=eos)
        self.prep_s = (perf_ns() - t0) / 1e9
        if layout == "flexible":
            self.defaults: dict[str, Any] = {"whitespace_flexible": True}
        else:
            self.defaults = {
                "whitespace_flexible": False,
                "item_separator": COMPACT_SEPARATORS[0],
                "key_separator": COMPACT_SEPARATORS[1],
            }
        self.grammar: str | None = None
        row = self.bitmask[0]
        self._ptr = row.ctypes.data
        self._nbytes = row.nbytes
        self.notes.append(
            f"grammar_from_json_schema defaults {self.defaults} (otherwise llguidance's defaults: "
            "not lenient, no coerce_one_of); x-guidance keys in a schema apply on top"
        )
        self.notes.append("mask via LLMatcher.unsafe_compute_mask_ptr (as in mask_bench.py)")

    def compile(self, schema: Any) -> None:
        llg = self._llg
        try:
            grammar = llg.LLMatcher.grammar_from_json_schema(schema, defaults=self.defaults)
        except (ValueError, TypeError) as e:  # not a JSON object, etc.
            raise CompileRefused(type(e).__name__, str(e)) from None
        matcher = llg.LLMatcher(self.lltok, grammar, log_level=0)
        if matcher.is_error():
            raise CompileRefused("grammar error", matcher.get_error())
        self.grammar = grammar
        self.matcher = matcher

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
        return _first_line(self.matcher.get_error() or "token rejected")

    def end_accepting(self) -> bool:
        return bool(self.matcher.is_accepting())

    def release(self) -> None:
        self.matcher = None
        self.grammar = None


class XGrammarSchemaEngine(SchemaEngine):
    name = "xgrammar"

    def __init__(
        self, tok: Any, vocab_size: int, eos: int, words: int, layout: str, strict: bool
    ) -> None:
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

        self.xgr = xgr
        hf = PreTrainedTokenizerFast(tokenizer_object=tok)
        t0 = perf_ns()
        info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab_size, stop_token_ids=[eos])
        self.prep_s = (perf_ns() - t0) / 1e9
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        if layout == "flexible":
            self.kwargs: dict[str, Any] = {"any_whitespace": True, "strict_mode": strict}
        else:
            self.kwargs = {
                "any_whitespace": False,
                "separators": COMPACT_SEPARATORS,
                "strict_mode": strict,
            }
        self.notes.append(
            f"compile_json_schema({', '.join(f'{k}={v!r}' for k, v in self.kwargs.items())}); "
            "GrammarCompiler(max_threads=1, cache_enabled=False); the schema is passed as JSON "
            "text (json.dumps outside the timed call)"
        )
        self.notes.append("mask into a numpy int32 row via DLPack (as in mask_bench.py)")

    def compile(self, schema: Any) -> None:
        try:
            compiled = self.compiler.compile_json_schema(schema, **self.kwargs)
        except Exception as e:  # noqa: BLE001 -- XGrammar raises RuntimeError/ValueError/...
            raise CompileRefused(type(e).__name__, str(e)) from None
        self.matcher = self.xgr.GrammarMatcher(compiled)

    def start_doc(self) -> tuple[Callable[[], Any], Callable[[int], bool]]:
        self.matcher.reset()
        m = self.matcher
        return functools.partial(m.fill_next_token_bitmask, self.bitmask, 0), m.accept_token

    def end_accepting(self) -> bool:
        return bool(self.matcher.is_completed())


# --------------------------------------------------------------------------------------------
# Statistics


_XGR_PREFIX = re.compile(r"^\[[\d:]+\] \S+:\d+: ")


def refusal_group(engine: str, kind: str, message: str) -> str:
    """A short label to group refusals by (class and keyword / first words of the message)."""
    msg = _first_line(message)
    if engine == "structout":
        m = re.search(r"\(keyword '([^']*)' at ", msg)
        return f"{kind}: {m.group(1)}" if m else kind
    if engine == "xgrammar":
        msg = _XGR_PREFIX.sub("", msg)
    if msg.startswith("Unimplemented keys:"):  # llguidance: the keyword names are the reason
        return msg[:90]
    msg = re.sub(r'"[^"]*"', '"…"', msg)
    msg = re.sub(r"\d+", "N", msg)
    return (f"{kind}: {msg}" if engine == "xgrammar" else msg)[:90]
