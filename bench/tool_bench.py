#!/usr/bin/env python3
"""Tool-call grammars: compile time and masks of structout, llguidance and XGrammar.

What a server does for a chat request with ``tools``: build one grammar for "free text, and
wherever ``<tool_call>`` starts, one call of one of these tools" (the Hermes / Qwen wire format,
the structural tag vLLM sends for ``tool_choice="auto"``), compile it for the model's vocabulary,
and mask every generated token with it.

For each tool count (``--tools``, default 10, 100 and 500) and each round (``--rounds``), a new
set of BFCL-style functions is generated (deterministic per seed and round: names, descriptions,
1-6 parameters of string / enum / integer with bounds / number / boolean / array / nested
object types, some required), so no engine sees a schema twice. The same structural tag goes to
every engine, in the order rotated per round:

* structout: ``structural_tag_kbnf(from_xgrammar(tag))`` + ``compile_kbnf(text, vocab)`` +
  ``matcher()``, with every cache cleared first (the schema → KBNF cache memory-only and empty,
  the engine's compiled-grammar cache empty): the cost of tools never seen before;
* XGrammar: ``GrammarCompiler(info, max_threads=1, cache_enabled=False)
  .compile_structural_tag(tag)`` + ``GrammarMatcher``;
* llguidance: one ``StructTag`` per tool (its grammar from ``grammar_from_json_schema``, compact
  separators, as vLLM's guidance backend builds it) → ``StructTag.to_grammar(tags,
  assume_special=False)`` + ``LLMatcher`` (its constructor compiles; llguidance builds lexers
  lazily, so its first masks carry part of the work: "compile + 1st doc masks" is reported too).

Then each engine walks one document: a sentence, then a call of a tool drawn from the set with
valid arguments, then a closing sentence (Llama 3 tokens); every mask fill is timed.

Everything is single-threaded in one process. Usage::

    python bench/tool_bench.py [--tools 10 100 500] [--rounds 3] [--bounds] [--clock cpu]
                               [--json out.json]

``--clock cpu`` times with the process's CPU time (all its threads) instead of wall time: on a
shared, loaded machine the time the process waits for a core then does not count (each
reading costs a system call, well under a microsecond, on every engine alike).

``--bounds``: free-text strings carry ``maxLength`` and numbers ``minimum``/``maximum``, as many
real tool schemas do.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mask_bench import REPO, find_llama3_tokenizer

sys.path.insert(0, str(REPO))

BEGIN = '<tool_call>\n{{"name": "{name}", "arguments": '
END = "}\n</tool_call>"
TRIGGER = "<tool_call>"

_VERBS = [
    "get",
    "find",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "compute",
    "convert",
    "book",
    "cancel",
    "check",
    "send",
]
_NOUNS = [
    "weather",
    "flight",
    "hotel",
    "order",
    "invoice",
    "user",
    "account",
    "stock",
    "recipe",
    "route",
    "movie",
    "song",
    "ticket",
    "meeting",
    "reminder",
    "file",
    "repo",
    "issue",
    "payment",
    "rate",
]
_FIELDS = [
    "city",
    "country",
    "date",
    "query",
    "limit",
    "unit",
    "currency",
    "amount",
    "name",
    "email",
    "id",
    "category",
    "sort",
    "page",
    "language",
    "format",
    "start",
    "end",
    "priority",
    "tags",
    "verbose",
]


# ----------------------------------------------------------------------------------- workload
def make_tools(n: int, rng: random.Random, bounds: bool = False) -> list[dict[str, Any]]:
    """``n`` BFCL-style functions with distinct names (``bounds``: string lengths and number
    bounds on their parameters)."""
    tools, names = [], set()
    while len(tools) < n:
        name = f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}_{len(tools)}"
        if name in names:
            continue
        names.add(name)
        props: dict[str, Any] = {}
        for field in rng.sample(_FIELDS, rng.randint(1, 6)):
            props[field] = _param(rng, 0, bounds)
        required = [f for f in props if rng.random() < 0.6]
        params = {"type": "object", "properties": props, "required": required}
        if rng.random() < 0.5:
            params["additionalProperties"] = False
        tools.append(
            {"name": name, "description": f"{name.replace('_', ' ')}.", "parameters": params}
        )
    return tools


def _param(rng: random.Random, depth: int, bounds: bool) -> dict[str, Any]:
    kind = rng.randrange(8 if depth == 0 else 6)
    if kind == 0:
        text = {"type": "string", "description": "free text"}
        return {**text, "maxLength": 64} if bounds else text
    if kind == 1:
        return {
            "type": "string",
            "enum": rng.sample(
                ["a", "b", "low", "high", "celsius", "fahrenheit", "asc", "desc"], 3
            ),
        }
    if kind == 2:
        return {"type": "integer", "minimum": 0, "maximum": rng.choice([10, 100, 1000])}
    if kind == 3:
        return {"type": "number", "minimum": -100, "maximum": 100} if bounds else {"type": "number"}
    if kind == 4:
        return {"type": "boolean"}
    if kind == 5:
        return {"type": "array", "items": {"type": "string"}, "maxItems": 5}
    sub = {f: _param(rng, depth + 1, bounds) for f in rng.sample(_FIELDS, 2)}
    return {"type": "object", "properties": sub, "required": list(sub)}


def valid_args(schema: dict[str, Any], rng: random.Random) -> Any:
    """A value valid against the schemas ``make_tools`` writes."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    t = schema["type"]
    if t == "object":
        props = schema["properties"]
        keep = [k for k in props if k in schema.get("required", []) or rng.random() < 0.5]
        return {k: valid_args(props[k], rng) for k in props if k in keep}
    if t == "string":
        return rng.choice(["Paris", "the report", "x", "Zürich 2026"])
    if t == "integer":
        return rng.randint(schema["minimum"], schema["maximum"])
    if t == "number":
        return rng.choice([0.5, 12, -3.25])
    if t == "boolean":
        return rng.random() < 0.5
    return [valid_args(schema["items"], rng) for _ in range(rng.randint(0, 3))]


def structural_tag(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """XGrammar's structural tag for Hermes-style calls to ``tools`` (tool_choice "auto")."""
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": [TRIGGER],
            "tags": [
                {
                    "type": "tag",
                    "begin": BEGIN.format(name=t["name"]),
                    "content": {"type": "json_schema", "json_schema": t["parameters"]},
                    "end": END,
                }
                for t in tools
            ],
        },
    }


def document(tools: list[dict[str, Any]], rng: random.Random) -> str:
    tool = rng.choice(tools)
    args = json.dumps(valid_args(tool["parameters"], rng), ensure_ascii=False)
    return f"Let me check that for you.{BEGIN.format(name=tool['name'])}{args}{END} Done."


# ------------------------------------------------------------------------------------- engines
class Engine:
    name = ""

    def compile(self, tag: dict[str, Any], tools: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def fill(self) -> None:
        """Fill the next token's mask."""
        raise NotImplementedError

    def accept(self, token: int) -> bool:
        raise NotImplementedError

    def walk(self, tokens: list[int]) -> list[float]:
        """Mask time (us) before each token and after the last; raises if a token is refused."""
        out = []
        for t in [*tokens, None]:
            t0 = clock_ns()
            self.fill()
            out.append((clock_ns() - t0) / 1e3)
            if t is not None and not self.accept(t):
                raise RuntimeError(f"{self.name} refused token {t}")
        return out


class Structout(Engine):
    name = "structout"

    def __init__(self, tok: Any, vocab_size: int, eos: int) -> None:
        import structout
        import structout.cache as cache_mod
        from structout.structural_tag import from_xgrammar, structural_tag_kbnf

        self.so = structout
        self.cache = cache_mod.CompileCache(disk=False)
        cache_mod._default_cache = self.cache  # memory-only, cleared before each compile
        self.from_xgrammar, self.kbnf = from_xgrammar, structural_tag_kbnf
        self.vocab = structout.Vocabulary.from_hf(tok, vocab_size, eos_token_ids=[eos])
        self.bitmask = np.ascontiguousarray(structout.allocate_token_bitmask(1, self.vocab.size))
        self.keep = self.so.compile_kbnf("start ::= 'x';", self.vocab)  # token index, untimed

    def compile(self, tag: dict[str, Any], tools: list[dict[str, Any]]) -> None:
        self.cache.clear()
        self.so.configure_cache(clear=True)
        text = self.kbnf(self.from_xgrammar(tag))
        self.matcher = self.so.compile_kbnf(text, self.vocab).matcher()

    def fill(self) -> None:
        self.matcher.fill_next_token_bitmask(self.bitmask, 0)

    def accept(self, token: int) -> bool:
        return bool(self.matcher.accept_token(token))


class XGrammar(Engine):
    name = "xgrammar"

    def __init__(self, tok: Any, vocab_size: int, eos: int) -> None:
        import xgrammar as xgr
        from transformers import PreTrainedTokenizerFast

        self.xgr = xgr
        hf = PreTrainedTokenizerFast(tokenizer_object=tok)
        info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=vocab_size, stop_token_ids=[eos])
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)

    def compile(self, tag: dict[str, Any], tools: list[dict[str, Any]]) -> None:
        self.matcher = self.xgr.GrammarMatcher(
            self.compiler.compile_structural_tag(json.dumps(tag))
        )

    def fill(self) -> None:
        self.matcher.fill_next_token_bitmask(self.bitmask, 0)

    def accept(self, token: int) -> bool:
        return bool(self.matcher.accept_token(token))


class LLGuidance(Engine):
    name = "llguidance"

    def __init__(self, tok: Any, vocab_size: int, eos: int) -> None:
        import llguidance

        self.llg = llguidance
        self.lltok = llguidance.LLTokenizer(tok.to_str(), n_vocab=vocab_size, eos_token=eos)
        self.row = np.zeros((1, (vocab_size + 31) // 32), dtype=np.int32)
        self.ptr, self.nbytes = self.row.ctypes.data, self.row.nbytes  # outside the timed call
        self.defaults = {
            "whitespace_flexible": False,
            "item_separator": ", ",
            "key_separator": ": ",
        }

    def compile(self, tag: dict[str, Any], tools: list[dict[str, Any]]) -> None:
        llg = self.llg
        tags = [
            llg.StructTag(
                trigger=TRIGGER,
                begin=BEGIN.format(name=t["name"]),
                grammar=llg.LLMatcher.grammar_from_json_schema(
                    t["parameters"], defaults=self.defaults
                ),
                end=END,
            )
            for t in tools
        ]
        grammar = llg.StructTag.to_grammar(tags, assume_special=False)
        self.matcher = llg.LLMatcher(self.lltok, grammar, log_level=0)
        if self.matcher.is_error():
            raise RuntimeError(self.matcher.get_error())

    def fill(self) -> None:
        self.matcher.unsafe_compute_mask_ptr(self.ptr, self.nbytes)

    def accept(self, token: int) -> bool:
        return bool(self.matcher.consume_token(token))


# ----------------------------------------------------------------------------------------- run
#: The clock of every measurement: wall time, or (``--clock cpu``) the process's CPU time.
clock_ns: Callable[[], int] = time.perf_counter_ns


def _timed(fn: Callable[[], None]) -> float:
    t0 = clock_ns()
    fn()
    return (clock_ns() - t0) / 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tools", type=int, nargs="+", default=[10, 100, 500])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", default="structout,llguidance,xgrammar")
    ap.add_argument("--bounds", action="store_true", help="maxLength and number bounds")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or the process's CPU time (all its threads: on a shared machine, "
        "time the process waited for a core is not counted)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    global clock_ns
    clock_ns = time.process_time_ns if args.clock == "cpu" else time.perf_counter_ns

    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(find_llama3_tokenizer()))
    vocab_size = tok.get_vocab_size()
    eos = tok.token_to_id("<|eot_id|>")
    makers = {"structout": Structout, "llguidance": LLGuidance, "xgrammar": XGrammar}
    engines = [makers[n](tok, vocab_size, eos) for n in args.engines.split(",")]

    # warm-up (untimed): imports, lazy initialisation
    warm = make_tools(2, random.Random(-1))
    for e in engines:
        e.compile(structural_tag(warm), warm)

    results: dict[str, Any] = {}
    for n in args.tools:
        per: dict[str, dict[str, list[float]]] = {
            e.name: {"compile_ms": [], "first_doc_ms": [], "masks_us": []} for e in engines
        }
        for r in range(args.rounds):
            rng = random.Random(f"{args.seed}/{n}/{r}")
            tools = make_tools(n, rng, args.bounds)
            tag = structural_tag(tools)
            tokens = tok.encode(document(tools, rng), add_special_tokens=False).ids
            order = engines[r % len(engines) :] + engines[: r % len(engines)]
            for e in order:
                ms = _timed(lambda e=e, tag=tag, tools=tools: e.compile(tag, tools))
                masks = e.walk(tokens)
                row = per[e.name]
                row["compile_ms"].append(ms)
                row["first_doc_ms"].append(ms + sum(masks) / 1e3)
                row["masks_us"].extend(masks)
        results[str(n)] = {
            name: {
                "compile_ms_median": statistics.median(v["compile_ms"]),
                "compile_plus_doc_ms_median": statistics.median(v["first_doc_ms"]),
                "mask_mean_us": statistics.fmean(v["masks_us"]),
                "mask_p99_us": float(np.percentile(v["masks_us"], 99)),
                "masks": len(v["masks_us"]),
            }
            for name, v in per.items()
        }
        _print(n, results[str(n)])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def _print(n: int, res: dict[str, dict[str, float]]) -> None:
    print(f"\n{n} tools")
    header = f"{'engine':<11} {'compile ms':>11} {'+1st doc ms':>12} {'mask mean us':>13}"
    print(f"  {header} {'p99 us':>9}")
    for name, r in res.items():
        print(
            f"  {name:<11} {r['compile_ms_median']:>11.2f} {r['compile_plus_doc_ms_median']:>12.2f}"
            f" {r['mask_mean_us']:>13.1f} {r['mask_p99_us']:>9.1f}"
        )
    if "structout" in res:
        s = res["structout"]
        for other in ("llguidance", "xgrammar"):
            if other in res:
                o = res[other]
                compile_x = s["compile_ms_median"] / o["compile_ms_median"]
                doc_x = s["compile_plus_doc_ms_median"] / o["compile_plus_doc_ms_median"]
                print(
                    f"  structout/{other}: compile {compile_x:.2f}x, compile+doc {doc_x:.2f}x,"
                    f" mask mean {s['mask_mean_us'] / o['mask_mean_us']:.2f}x,"
                    f" p99 {s['mask_p99_us'] / o['mask_p99_us']:.2f}x"
                )


if __name__ == "__main__":
    raise SystemExit(main())
