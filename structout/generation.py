"""Constrained decoding: schema resolution, the decode loop, sampling and jump-forward.

The loop keeps one KV cache for the whole generation (``past_key_values``): after the prompt is
prefilled, each step feeds only the new tokens. Before sampling, the matcher fills a token bitmask
(bit ``i`` set ⇔ token ``i`` may come next; EOS exactly when the grammar can finish) that is applied
to the logits in place.

**Jump-forward** (on by default): when the matcher reports *forced bytes* (the longest byte string
every valid continuation starts with, e.g. ``", "age": `` between two fixed object keys), they are
appended without sampling. The freshly sampled token has not been fed to the model yet, so its bytes
and the forced bytes are **re-tokenized together** with the model's tokenizer and the natural tokens
are fed in one forward pass (e.g. a sampled ``"`` followed by forced ``,`` becomes the single token
``",``). The last re-tokenized token is held back when some longer token that extends it is also
allowed (``" "`` could continue as ``" J"``), so the model still picks natural tokens at the
boundary.
Re-tokenization is checked byte for byte; when it does not reproduce the bytes (e.g. tokenizers that
add a prefix space) the step simply samples instead.

Heavy dependencies (torch) are imported lazily; this module imports without them.
"""

from __future__ import annotations

import bisect
import codecs
import json
import sys
import threading
import time
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from structout.errors import SchemaValidationError, StructoutError, TruncatedOutputError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch

__all__ = [
    "GenerationResult",
    "Grammar",
    "SamplingParams",
    "Target",
    "Timings",
    "TokenSpace",
    "resolve_schema",
]

T = TypeVar("T")


#: Tokens a generation's matcher can roll back. Jump-forward and the token budget roll back at
#: most one step's chunk (forced text is capped at 4 KiB, so a chunk has at most ~4k tokens);
#: a bound lets the engine release older parse history, so memory stays bounded on long outputs.
ROLLBACK_WINDOW = 1 << 14


# ------------------------------------------------------------------------------------ public types
@dataclass(frozen=True)
class Grammar:
    """A KBNF grammar used as a generation target; ``generate`` returns the matched text.

    >>> Grammar("start ::= 'yes' | 'no' ;")
    """

    text: str
    #: Shown to the model as an instruction (the grammar itself is not); ``None`` shows nothing.
    description: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Grammar text must be str, got {type(self.text).__name__}")


@dataclass
class Timings:
    """Where the time of one generation went."""

    #: Schema → KBNF → compiled grammar (near zero on a cache hit).
    compile_ms: float = 0.0
    #: The first forward pass over the prompt (and any bytes forced at the start).
    prefill_ms: float = 0.0
    #: Everything after compiling: prefill, decode steps, masks, sampling.
    total_ms: float = 0.0
    #: Mean time to fill and apply the token mask per sampled token (0 when unconstrained).
    mask_us_per_token: float = 0.0
    #: Generated tokens (sampled + jump-forward) per second of decoding after the prefill.
    tokens_per_s: float = 0.0
    #: Total time in the grammar engine and jump-forward outside the forward passes: masks,
    #: accepting tokens, forced bytes, re-tokenization (0 when unconstrained).
    grammar_ms: float = 0.0


@dataclass
class GenerationResult(Generic[T]):
    """What :meth:`structout.Model.generate` returns with ``return_result=True``."""

    value: T
    text: str
    token_ids: list[int]
    #: ``"stop"`` (grammar complete or EOS sampled) or ``"length"`` (budget used up; the output is
    #: still complete, otherwise TruncatedOutputError is raised).
    finish_reason: str
    timings: Timings
    prompt_tokens: int = 0
    #: Tokens appended by jump-forward without sampling (included in ``token_ids``).
    forced_tokens: int = 0
    #: Model forward passes (prefill included).
    forward_passes: int = 0


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 256
    #: 0 → greedy (argmax); otherwise softmax sampling at this temperature.
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    jump_forward: bool = True
    #: Unconstrained generation only: never stop at EOS (used by benchmarks).
    ignore_eos: bool = False
    #: Fill the next step's token masks in a worker thread during the forward pass (used only
    #: where that runs in parallel: accelerators, or CPUs with a core torch does not use).
    overlap: bool = True

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


# ------------------------------------------------------------------------------- native engine API
def _engine_api() -> Any:
    """The module exposing Vocabulary, compile_kbnf and the bitmask functions (``structout``).

    Imported lazily so this module imports before the native extension is built; tests replace it.
    """
    import structout

    missing = [
        name
        for name in (
            "compile_kbnf",
            "allocate_token_bitmask",
            "fill_next_token_bitmasks",
            "apply_token_bitmask_",
        )
        if not hasattr(structout, name)
    ]
    if missing:
        raise ImportError(
            "structout's native engine is not available (missing "
            + ", ".join(missing)
            + "); build it with `pip install -e .` (needs a Rust toolchain)"
        )
    return structout


# --------------------------------------------------------------------------------- schema targets
@dataclass
class Target:
    """A resolved generation target: how to constrain, how to describe, how to parse."""

    kind: str  # "type" | "json_schema" | "grammar" | "text"
    #: JSON Schema (``type``/``json_schema``), else None.
    json_schema: dict[str, Any] | None
    #: KBNF text for ``grammar``; for schemas it comes from the translator via the cache.
    kbnf: str | None
    parse: Callable[[str], Any]
    #: Instruction appended to the prompt so the model sees fields and descriptions.
    instruction: str | None


_type_targets: dict[Any, Target] = {}
_type_targets_lock = threading.Lock()


def resolve_schema(schema: Any) -> Target:
    """Turn what users pass as ``schema=`` into a :class:`Target`.

    * ``None`` → unconstrained text.
    * :class:`Grammar` → KBNF text, returns the text.
    * ``dict`` → a JSON Schema; returns the parsed JSON value (checked with ``jsonschema`` when
      it is installed).
    * anything ``pydantic.TypeAdapter`` accepts (BaseModel subclasses, dataclasses, TypedDicts,
      ``Literal[...]``, ``list[...]``, ...) → its JSON Schema; returns a validated instance.
    """
    if schema is None:
        return Target("text", None, None, lambda text: text, None)
    if isinstance(schema, Grammar):
        return Target("grammar", None, schema.text, lambda text: text, schema.description or None)
    if isinstance(schema, str):
        raise TypeError(
            "schema= got a str; wrap KBNF grammar text in structout.Grammar(...), or pass a JSON "
            "Schema as a dict (json.loads(...)), or a Python type"
        )
    if isinstance(schema, dict):
        return _json_schema_target(schema)
    try:
        with _type_targets_lock:
            cached = _type_targets.get(schema)
    except TypeError:  # unhashable annotation (e.g. Annotated with unhashable metadata)
        cached = None
    if cached is not None:
        return cached
    target = _type_target(schema)
    try:
        with _type_targets_lock:
            if len(_type_targets) > 512:
                _type_targets.clear()
            _type_targets[schema] = target
    except TypeError:
        pass
    return target


def _json_schema_target(schema: dict[str, Any]) -> Target:
    validator: Any | None = None
    try:
        import jsonschema
    except ImportError:  # optional: the grammar already enforces what it can express
        jsonschema = None
    if jsonschema is not None:
        validator = jsonschema.validators.validator_for(schema)(schema)

    def parse(text: str) -> Any:
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise SchemaValidationError(
                f"generated text is not valid JSON: {exc}", text=text, errors=[str(exc)]
            ) from exc
        if validator is not None:
            errors = [e.message for e in validator.iter_errors(value)]
            if errors:
                raise SchemaValidationError(
                    "generated JSON does not validate against the schema: " + "; ".join(errors),
                    text=text,
                    errors=errors,
                )
        return value

    return Target("json_schema", schema, None, parse, _schema_instruction(schema))


def _type_target(tp: Any) -> Target:
    try:
        from pydantic import TypeAdapter, ValidationError
    except ImportError as exc:  # pragma: no cover - pydantic is a dependency of typed schemas
        raise ImportError("typed schemas need pydantic >= 2: pip install pydantic") from exc
    try:
        adapter = TypeAdapter(tp)
        schema = _json_schema_of_type(tp, adapter)
    except Exception as exc:
        from structout.errors import UnsupportedSchemaError

        raise UnsupportedSchemaError(
            f"cannot derive a JSON Schema from {tp!r}: {exc}", keyword="type", pointer=""
        ) from exc

    def parse(text: str) -> Any:
        try:
            return adapter.validate_json(text)
        except ValidationError as exc:
            raise SchemaValidationError(
                f"generated output failed validation for {getattr(tp, '__name__', tp)}: "
                f"{exc.error_count()} error(s): {exc}",
                text=text,
                errors=exc.errors(),
            ) from exc

    return Target("type", schema, None, parse, _schema_instruction(schema))


def _json_schema_of_type(tp: Any, adapter: Any) -> Any:
    """The translator's JSON Schema for a type (objects of models, dataclasses and TypedDicts
    closed with ``additionalProperties: false``), else Pydantic's."""
    try:
        from structout.schema import json_schema_of
    except ImportError:
        return adapter.json_schema(mode="validation")
    return json_schema_of(tp)[0]


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _without_titles(node: Any) -> Any:
    """A copy of a schema without ``title`` keywords (Pydantic repeats every field name)."""
    if isinstance(node, list):
        return [_without_titles(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k == "title" and isinstance(v, str):
            continue
        if k in _SCHEMA_MAPS and isinstance(v, dict):
            out[k] = {name: _without_titles(sub) for name, sub in v.items()}
        elif k in ("enum", "const", "default", "examples"):
            out[k] = v
        else:
            out[k] = _without_titles(v)
    return out


def _schema_instruction(schema: Any) -> str:
    """What the model is told about the expected output: a plain-language field list for object
    schemas (small models follow it much better than raw JSON Schema), else the JSON Schema."""
    try:
        text = _describe_root(schema)
    except (KeyError, TypeError, ValueError, RecursionError):
        text = None
    if text is not None:
        return text
    try:
        shown = json.dumps(_without_titles(schema), ensure_ascii=False)
    except RecursionError:  # deeper than Python can print (only with raised depth limits)
        return "Respond only with JSON that matches the required JSON Schema."
    return "Respond only with JSON that matches this JSON Schema:\n" + shown


def _describe_root(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return None
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    node = _resolve(schema, defs)
    if node.get("type") == "object" and isinstance(node.get("properties"), dict):
        lines = _describe_fields(node, defs, 0, set())
        head = "Respond only with a JSON object with these fields:"
        if node.get("description"):
            head = f"{node['description'].strip()}\n{head}"
        return head + "\n" + "\n".join(lines)
    phrase = _describe(node, defs, 0, set())
    return f"Respond only with JSON: {phrase}."


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 32:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith(("#/$defs/", "#/definitions/")):
            raise ValueError("non-local $ref")
        target = defs[ref.rsplit("/", 1)[1]]
        extra = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **extra}
        seen += 1
    return node


def _describe_fields(
    node: dict[str, Any], defs: dict[str, Any], depth: int, stack: set[str]
) -> list[str]:
    required = set(node.get("required", []))
    pad = "  " * depth
    lines = []
    for name, sub in node["properties"].items():
        sub_r = _resolve(sub, defs) if isinstance(sub, dict) else {}
        opt = "" if name in required else " (optional)"
        desc = sub_r.get("description") if isinstance(sub_r, dict) else None
        is_obj = sub_r.get("type") == "object" and isinstance(sub_r.get("properties"), dict)
        ref = sub.get("$ref") if isinstance(sub, dict) else None
        if is_obj and depth < 3 and ref not in stack:
            line = f"{pad}- {json.dumps(name)}{opt}: an object"
            if desc:
                line += f" ({desc.strip()})"
            lines.append(line + " with these fields:")
            lines.extend(_describe_fields(sub_r, defs, depth + 1, stack | {ref} if ref else stack))
            continue
        line = f"{pad}- {json.dumps(name)}{opt}: {_describe(sub_r, defs, depth, stack)}"
        if desc:
            line += f" — {desc.strip()}"
        lines.append(line)
    return lines


def _describe(node: Any, defs: dict[str, Any], depth: int, stack: set[str]) -> str:
    if node is True or node == {}:
        return "any JSON value"
    if not isinstance(node, dict):
        raise TypeError("schema node")
    node = _resolve(node, defs)
    if depth > 6:
        return "a JSON value"
    if "const" in node:
        return json.dumps(node["const"], ensure_ascii=False)
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            parts = [_describe(v, defs, depth + 1, stack) for v in node[key]]
            return " or ".join(parts)
    t = node.get("type")
    if isinstance(t, list):
        return " or ".join(_describe({**node, "type": x}, defs, depth, stack) for x in t)
    if t == "null":
        return "null"
    if t == "boolean":
        return "true or false"
    if t == "string":
        bits = []
        if "maxLength" in node:
            bits.append(f"at most {node['maxLength']} characters")
        if node.get("minLength", 0) > 1:
            bits.append(f"at least {node['minLength']} characters")
        if "format" in node:
            bits.append(f"format {node['format']}")
        if "pattern" in node:
            bits.append(f"matching {node['pattern']}")
        return "a string" + (f" ({', '.join(bits)})" if bits else "")
    if t in ("integer", "number"):
        word = "an integer" if t == "integer" else "a number"
        lo = node.get("minimum", node.get("exclusiveMinimum"))
        hi = node.get("maximum", node.get("exclusiveMaximum"))
        if lo is not None and hi is not None:
            return f"{word} from {lo} to {hi}"
        if lo is not None:
            return f"{word}, at least {lo}"
        if hi is not None:
            return f"{word}, at most {hi}"
        return word
    if t == "array":
        items = node.get("items", True)
        inner = _describe(items, defs, depth + 1, stack) if items is not False else "nothing"
        bits = []
        if "minItems" in node and node["minItems"] > 0:
            bits.append(f"at least {node['minItems']}")
        if "maxItems" in node:
            bits.append(f"at most {node['maxItems']}")
        count = f" ({' and '.join(bits)} items)" if bits else ""
        return f"a list{count}, each {inner}"
    if t == "object":
        props = node.get("properties")
        if isinstance(props, dict) and props:
            fields = ", ".join(
                f"{json.dumps(k)}: {_describe(v, defs, depth + 1, stack)}" for k, v in props.items()
            )
            return "an object {" + fields + "}"
        extra = node.get("additionalProperties", True)
        if isinstance(extra, dict):
            return f"an object mapping strings to {_describe(extra, defs, depth + 1, stack)}"
        return "a JSON object"
    raise ValueError("cannot describe this schema in words")


# ---------------------------------------------------------------------------------- token space
class TokenSpace:
    """Per-model token facts the loop needs: token bytes, EOS ids, prefix-extension index."""

    def __init__(
        self,
        token_bytes: Sequence[bytes],
        eos_token_ids: Sequence[int],
        vocab_size: int,
        encode: Callable[[str], list[int]],
    ) -> None:
        # Ids at or beyond the model's vocabulary size can never be sampled; ids the tokenizer
        # lacks (padding rows of the embedding matrix) produce no bytes.
        self.token_bytes = list(token_bytes)[:vocab_size]
        if len(self.token_bytes) < vocab_size:
            self.token_bytes.extend(b"" for _ in range(vocab_size - len(self.token_bytes)))
        self.eos_token_ids = frozenset(int(t) for t in eos_token_ids)
        self.vocab_size = vocab_size
        self.encode = encode
        self._sorted: tuple[list[bytes], Any] | None = None
        self._ext_cache: dict[int, Any] = {}
        self._lock = threading.Lock()

    def bytes_of(self, ids: Sequence[int]) -> bytes:
        tb = self.token_bytes
        return b"".join(tb[i] for i in ids)

    def extensions(self, token: int) -> Any:
        """numpy int64 array of token ids whose bytes strictly extend ``token``'s bytes."""
        import numpy as np

        hit = self._ext_cache.get(token)
        if hit is not None:
            return hit
        with self._lock:
            if self._sorted is None:
                order = sorted(
                    (i for i, b in enumerate(self.token_bytes) if b),
                    key=self.token_bytes.__getitem__,
                )
                keys = [self.token_bytes[i] for i in order]
                self._sorted = (keys, np.asarray(order, dtype=np.int64))
        keys, ids = self._sorted
        prefix = self.token_bytes[token]
        lo = bisect.bisect_right(keys, prefix)  # skips tokens with exactly these bytes
        upper = _prefix_upper_bound(prefix)
        hi = bisect.bisect_left(keys, upper) if upper is not None else len(keys)
        ext = ids[lo:hi]
        if len(self._ext_cache) < 65536:
            self._ext_cache[token] = ext
        return ext


def _prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)


# ------------------------------------------------------------------------------------ the LM side
class _KVSession:
    """Feeds token chunks to a causal LM, keeping one KV cache for the whole batch.

    Rows advance by different numbers of tokens per step (jump-forward); each step's chunks are
    left-padded to the same length with masked pad tokens and explicit position ids, so the last
    position of every active row holds its newest real token. A single row needs no padding.
    """

    def __init__(self, hf_model: Any, pad_token_id: int, batch_size: int) -> None:
        import inspect

        import torch

        self.torch = torch
        self.model = hf_model
        self.device = next(hf_model.parameters()).device
        self.pad = pad_token_id
        self.batch = batch_size
        self.cache: Any = None
        self.attn: torch.Tensor | None = None
        self.next_pos = [0] * batch_size
        self.forward_passes = 0
        params: Any
        try:
            params = inspect.signature(hf_model.forward).parameters
        except (TypeError, ValueError):
            params = {}
        self._keep_kw = "logits_to_keep" in params or "num_logits_to_keep" in params
        self._keep_name = "logits_to_keep" if "logits_to_keep" in params else "num_logits_to_keep"

    def feed(self, chunks: Sequence[Sequence[int]]) -> np.ndarray:
        """Run one forward pass; return float32 logits ``[B, V]`` (numpy, host memory) at each
        row's last position."""
        torch = self.torch
        kwargs: dict[str, Any] = {"past_key_values": self.cache, "use_cache": True}
        if self._keep_kw:
            kwargs[self._keep_name] = 1
        if self.batch == 1:
            ids = torch.tensor([list(chunks[0])], dtype=torch.long, device=self.device)
        else:
            width = max(len(c) for c in chunks)
            rows, mask, pos = [], [], []
            for i, chunk in enumerate(chunks):
                padn = width - len(chunk)
                start = self.next_pos[i]
                rows.append([self.pad] * padn + list(chunk))
                mask.append([0] * padn + [1] * len(chunk))
                pos.append([start] * padn + list(range(start, start + len(chunk))))
                self.next_pos[i] = start + len(chunk)
            ids = torch.tensor(rows, dtype=torch.long, device=self.device)
            new_mask = torch.tensor(mask, dtype=torch.long, device=self.device)
            self.attn = new_mask if self.attn is None else torch.cat([self.attn, new_mask], 1)
            kwargs["attention_mask"] = self.attn
            kwargs["position_ids"] = torch.tensor(pos, dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self.model(input_ids=ids, **kwargs)
        self.cache = out.past_key_values
        self.forward_passes += 1
        return out.logits[:, -1, :].float().cpu().numpy()


# ---------------------------------------------------------------------------------------- sampling
# Masking and sampling run in numpy on the host: single-threaded and cheap (tens of µs for a
# 50k-150k vocabulary). torch's intra-op thread pool is left to the forward pass; on a busy CPU,
# a multi-threaded torch masked_fill over the vocabulary can stall for milliseconds.


def _sample(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> list[int]:
    """Greedy when temperature is 0, else temperature + nucleus (top-p) sampling, per row.

    ``logits`` is float32 ``[B, V]`` with disallowed tokens at ``-inf``.
    """
    import numpy as np

    if params.temperature == 0:
        return [int(t) for t in logits.argmax(axis=-1)]
    out = []
    for row in logits:
        ids = np.flatnonzero(row > -np.inf)
        if len(ids) == 0:
            raise StructoutError("every token is masked out; nothing can be sampled")
        x = row[ids].astype(np.float64) / params.temperature
        p = np.exp(x - x.max())
        p /= p.sum()
        if params.top_p < 1.0:
            order = np.argsort(-p, kind="stable")
            cumulative = np.cumsum(p[order])
            # The smallest prefix whose mass reaches top_p (always at least the top token).
            keep = order[: int(np.searchsorted(cumulative, params.top_p)) + 1]
            ids, p = ids[keep], p[keep] / p[keep].sum()
        out.append(int(ids[rng.choice(len(ids), p=p)]))
    return out


def _apply_bitmask_np(logits: np.ndarray, bitmask: np.ndarray) -> None:
    """Set logits of disallowed tokens to -inf in place (float ``[B, V]`` array).

    ``np.unpackbits`` on the little-endian int32 words puts bit ``i`` of word ``j`` at
    ``32 j + i``; columns beyond the bitmask (padding ids) are disallowed.
    """
    import numpy as np

    words = np.ascontiguousarray(bitmask[: logits.shape[0]])
    if sys.byteorder != "little":
        words = words.byteswap()
    bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
    vocab = logits.shape[-1]
    if bits.shape[-1] < vocab:
        bits = np.pad(bits, ((0, 0), (0, vocab - bits.shape[-1])))
    np.copyto(logits, -np.inf, where=bits[:, :vocab] == 0)


def _apply_bitmask_cpu(logits: torch.Tensor, bitmask: Any) -> None:
    """In-place mask for a CPU float32 torch tensor (through a shared numpy view)."""
    _apply_bitmask_np(logits.numpy(), bitmask)


# ---------------------------------------------------------------------------------- decode loop
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _mask_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="structout-mask")
        return _pool


def _overlap_helps(hf_model: Any) -> bool:
    """Whether filling masks during the forward pass can run in parallel with it: on an
    accelerator, or when torch leaves a CPU core free (otherwise the two compete for cores and
    torch's thread pool stalls)."""
    import os

    import torch

    try:
        device = next(hf_model.parameters()).device
    except (StopIteration, AttributeError):
        return False
    if device.type != "cpu":
        return True
    return torch.get_num_threads() < (os.cpu_count() or 1)


@dataclass
class RowRequest:
    """One sequence to generate."""

    prompt_ids: list[int]
    #: A compiled grammar (``.matcher()``) or None for unconstrained text.
    grammar: Any
    max_new_tokens: int


@dataclass
class RowOutcome:
    token_ids: list[int]
    data: bytes
    finish_reason: str  # "stop" | "length"
    complete: bool  # the grammar accepted the output as a whole sentence (True if unconstrained)
    forced_tokens: int
    sampled_tokens: int


@dataclass
class RunStats:
    prefill_ns: int = 0
    total_ns: int = 0
    mask_ns: int = 0
    #: Accepting tokens, forced bytes, re-tokenization, finish checks (after sampling).
    grammar_ns: int = 0
    masked_steps: int = 0
    forward_passes: int = 0


@dataclass
class _Row:
    req: RowRequest
    matcher: Any
    generated: list[int] = field(default_factory=list)
    feed: list[int] = field(default_factory=list)
    done: bool = False
    finish_reason: str = ""
    forced: int = 0
    sampled: int = 0


class _Decoder:
    def __init__(
        self,
        hf_model: Any,
        tokens: TokenSpace,
        requests: Sequence[RowRequest],
        params: SamplingParams,
        pad_token_id: int,
    ) -> None:
        self.hf_model = hf_model
        self.tokens = tokens
        self.params = params
        self.rows = [
            _Row(
                req,
                req.grammar.matcher(max_rollback_tokens=ROLLBACK_WINDOW)
                if req.grammar is not None
                else None,
            )
            for req in requests
        ]
        self.pad = pad_token_id
        self.stats = RunStats()
        self.api: Any = _engine_api() if any(r.matcher is not None for r in self.rows) else None
        self._bitmask: Any = None
        self._scratch: Any = None
        self._overlap = self.api is not None and params.overlap and _overlap_helps(hf_model)

    # ---- masks
    def _alloc(self, n: int) -> Any:
        return self.api.allocate_token_bitmask(n, self.tokens.vocab_size)

    def _scratch_mask(self, matcher: Any) -> Any:
        if self._scratch is None:
            self._scratch = self._alloc(1)
        matcher.fill_next_token_bitmask(self._scratch, 0)
        return self._scratch

    def _fill_masks(self, active: list[int]) -> tuple[Any, list[int], int]:
        """Fill the bitmask rows of the constrained rows among ``active``.

        Returns ``(bitmask, constrained rows, nanoseconds)``. Safe to run in a worker thread while
        the main thread runs the forward pass: nothing else touches the matchers meanwhile, and
        the native fill releases the GIL.
        """
        t0 = time.perf_counter_ns()
        constrained = [i for i in active if self.rows[i].matcher is not None]
        if not constrained:
            return None, constrained, 0
        n_rows = len(self.rows)
        if self._bitmask is None:
            self._bitmask = self._alloc(n_rows)
        bm = self._bitmask
        if n_rows == 1:
            self.rows[0].matcher.fill_next_token_bitmask(bm, 0)
        else:
            # One native call fills every constrained row in parallel (GIL released); rows of
            # unconstrained requests allow everything.
            self.api.fill_next_token_bitmasks(
                [self.rows[i].matcher for i in constrained], bm, rows=constrained
            )
            for i in active:
                if self.rows[i].matcher is None:
                    bm[i] = -1
        return bm, constrained, time.perf_counter_ns() - t0

    def _mask_logits(self, logits: np.ndarray, filled: tuple[Any, list[int], int]) -> None:
        """Apply filled bitmasks to ``logits`` in place (rows that are done are never sampled)."""
        bm, constrained, fill_ns = filled
        if not constrained:
            return
        t0 = time.perf_counter_ns()
        for i in constrained:
            if not bm[i].any():
                raise StructoutError(
                    f"no token can continue the output in row {i} (generated so far: "
                    f"{self.tokens.bytes_of(self.rows[i].generated)!r}); the vocabulary cannot "
                    "produce the bytes the grammar requires next"
                )
        _apply_bitmask_np(logits, bm)
        self.stats.mask_ns += fill_ns + time.perf_counter_ns() - t0
        self.stats.masked_steps += len(constrained)

    # ---- jump-forward
    def _jump(self, row: _Row, pending: list[int]) -> list[int] | None:
        """Tokens to feed instead of ``pending`` covering its bytes plus forced bytes, or None.

        On success the matcher has accepted exactly the returned tokens (``pending`` rolled back).
        """
        m = row.matcher
        forced = m.forced_bytes()
        if not forced:
            return None
        tokens = self.tokens
        head = tokens.bytes_of(pending)
        data = head + bytes(forced)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start <= len(head):
                return None
            data = data[: exc.start]
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                return None
        try:
            toks = [int(t) for t in tokens.encode(text)]
        except Exception:  # noqa: BLE001 - any tokenizer failure just means "sample instead"
            return None
        if not toks or tokens.bytes_of(toks) != data:
            return None
        if pending and toks[: len(pending)] == pending and len(toks) == len(pending):
            return None
        if pending:
            m.rollback(len(pending))
        accepted = 0
        for t in toks:
            if not m.accept_token(t):
                break
            accepted += 1
        if accepted < len(toks):
            self._restore(m, accepted, pending)
            return None
        # Hold back the last token when a longer token extending it is also allowed here.
        last = toks[-1]
        ext = tokens.extensions(last)
        if len(ext):
            m.rollback(1)
            mask = self._scratch_mask(m)[0]
            words = mask[ext >> 5]
            if ((words >> (ext & 31)) & 1).any():
                toks.pop()
            else:
                m.accept_token(last)
        if len(tokens.bytes_of(toks)) <= len(head):
            self._restore(m, len(toks), pending)
            return None
        return toks

    @staticmethod
    def _restore(m: Any, accepted: int, pending: list[int]) -> None:
        if accepted:
            m.rollback(accepted)
        for t in pending:
            if not m.accept_token(t):
                raise StructoutError(f"matcher rejected token {t} it had accepted before rollback")

    # ---- main loop
    def run(self) -> Generator[tuple[int, bytes], None, list[RowOutcome]]:
        import numpy as np

        params = self.params
        tokens = self.tokens
        rows = self.rows
        session = _KVSession(self.hf_model, self.pad, len(rows))
        rng = np.random.default_rng(params.seed)
        t_start = time.perf_counter_ns()

        # Bytes forced at the very start go into the prefill.
        first: list[list[int]] = []
        t_grammar = time.perf_counter_ns()
        for row in rows:
            chunk: list[int] = []
            if row.matcher is not None and params.jump_forward:
                chunk = self._fit_budget(row, self._jump(row, []) or [])
                row.generated.extend(chunk)
                row.forced += len(chunk)
            first.append(list(row.req.prompt_ids) + chunk)
            self._check_done(row)
        self.stats.grammar_ns += time.perf_counter_ns() - t_grammar
        for i, row in enumerate(rows):
            if row.generated:
                yield i, tokens.bytes_of(row.generated)
        if all(r.done for r in rows):
            return self._finish(t_start, t_start, session)
        logits = session.feed(first)
        prefilled: Future[tuple[Any, list[int], int]] | None = None
        t_prefill = time.perf_counter_ns()
        self.stats.prefill_ns = t_prefill - t_start

        while True:
            active = [i for i, r in enumerate(rows) if not r.done]
            filled = prefilled.result() if prefilled is not None else self._fill_masks(active)
            prefilled = None
            self._mask_logits(logits, filled)
            if params.ignore_eos:
                for eos in tokens.eos_token_ids:
                    if eos < logits.shape[-1]:
                        logits[:, eos] = -np.inf
            sampled = _sample(logits, params, rng)
            deltas: list[tuple[int, bytes]] = []
            t_grammar = time.perf_counter_ns()
            for i in active:
                row = rows[i]
                t = int(sampled[i])
                row.feed = []
                if t in tokens.eos_token_ids and not params.ignore_eos:
                    row.done, row.finish_reason = True, "stop"
                    continue
                if row.matcher is not None and not row.matcher.accept_token(t):
                    raise StructoutError(
                        f"internal error: sampled token {t} ({tokens.token_bytes[t]!r}) was "
                        "allowed by the mask but rejected by the matcher"
                    )
                row.sampled += 1
                chunk = [t]
                if row.matcher is not None and params.jump_forward:
                    chunk = self._jump(row, [t]) or chunk
                chunk = self._fit_budget(row, chunk)
                row.forced += len(chunk) - 1  # tokens appended without sampling
                row.generated.extend(chunk)
                row.feed = chunk
                deltas.append((i, tokens.bytes_of(chunk)))
                self._check_done(row)
            self.stats.grammar_ns += time.perf_counter_ns() - t_grammar
            yield from deltas
            if all(r.done for r in rows):
                break
            if self._overlap:
                # The next masks depend only on the tokens just accepted: fill them in a worker
                # thread while the forward pass runs.
                prefilled = _mask_pool().submit(
                    self._fill_masks, [i for i, r in enumerate(rows) if not r.done]
                )
            try:
                logits = session.feed([r.feed if not r.done else [] for r in rows])
            except BaseException:
                if prefilled is not None:
                    prefilled.exception()  # wait for the worker; the forward's error wins
                raise
        return self._finish(t_start, t_prefill, session)

    def _fit_budget(self, row: _Row, chunk: list[int]) -> list[int]:
        room = row.req.max_new_tokens - len(row.generated)
        if len(chunk) <= room:
            return chunk
        extra = len(chunk) - room
        if row.matcher is not None:
            row.matcher.rollback(extra)
        return chunk[:room]

    def _check_done(self, row: _Row) -> None:
        if row.done:
            return
        m = row.matcher
        if m is not None and m.is_finished():  # complete, and nothing but EOS may follow
            row.done, row.finish_reason = True, "stop"
        elif len(row.generated) >= row.req.max_new_tokens:
            row.done, row.finish_reason = True, "length"

    def _finish(self, t_start: int, t_prefill: int, session: _KVSession) -> list[RowOutcome]:
        t_end = time.perf_counter_ns()
        self.stats.total_ns = t_end - t_start
        self.stats.forward_passes = session.forward_passes
        out = []
        for row in self.rows:
            complete = row.matcher is None or bool(row.matcher.can_finish())
            out.append(
                RowOutcome(
                    token_ids=list(row.generated),
                    data=self.tokens.bytes_of(row.generated),
                    finish_reason=row.finish_reason or "stop",
                    complete=complete,
                    forced_tokens=row.forced,
                    sampled_tokens=row.sampled,
                )
            )
        return out


def decode(
    hf_model: Any,
    tokens: TokenSpace,
    requests: Sequence[RowRequest],
    params: SamplingParams,
    pad_token_id: int,
) -> Generator[tuple[int, bytes], None, tuple[list[RowOutcome], RunStats]]:
    """Run the decode loop; yields ``(row, appended bytes)`` and returns outcomes and stats."""
    dec = _Decoder(hf_model, tokens, requests, params, pad_token_id)
    outcomes = yield from dec.run()
    return outcomes, dec.stats


def finalize(
    outcome: RowOutcome,
    target: Target,
    stats: RunStats,
    compile_ms: float,
    prompt_tokens: int,
    return_result: bool,
) -> Any:
    """Turn a row outcome into the user's value (or a GenerationResult), raising typed errors."""
    text = outcome.data.decode("utf-8", errors="replace")
    if not outcome.complete:
        raise TruncatedOutputError(
            f"the output was cut off after {len(outcome.token_ids)} tokens (max_new_tokens) "
            f"before the {target.kind.replace('_', ' ')} could be completed; raise "
            f"max_new_tokens or simplify the schema. Partial output: {text[-200:]!r}",
            partial=text,
        )
    value = target.parse(text)
    if not return_result:
        return value
    decode_s = max(stats.total_ns - stats.prefill_ns, 1) / 1e9
    timings = Timings(
        compile_ms=compile_ms,
        prefill_ms=stats.prefill_ns / 1e6,
        total_ms=stats.total_ns / 1e6,
        mask_us_per_token=(stats.mask_ns / 1e3 / stats.masked_steps) if stats.masked_steps else 0.0,
        tokens_per_s=len(outcome.token_ids) / decode_s if outcome.token_ids else 0.0,
        grammar_ms=(stats.mask_ns + stats.grammar_ns) / 1e6 if stats.masked_steps else 0.0,
    )
    return GenerationResult(
        value=value,
        text=text,
        token_ids=outcome.token_ids,
        finish_reason=outcome.finish_reason,
        timings=timings,
        prompt_tokens=prompt_tokens,
        forced_tokens=outcome.forced_tokens,
        forward_passes=stats.forward_passes,
    )


class IncrementalText:
    """Turns appended bytes into text chunks without splitting UTF-8 sequences."""

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, data: bytes) -> str:
        return self._dec.decode(data)

    def flush(self) -> str:
        return self._dec.decode(b"", final=True)
