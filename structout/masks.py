"""Token masks: compile a KBNF grammar, JSON Schema or Python type for a vocabulary, and fill
bitmasks from matchers (allocating and applying them lives in :mod:`structout.bitmask`).

Bitmask layout (the one XGrammar and llguidance use): ``int32[batch, ceil(vocab_size / 32)]``;
bit ``i % 32`` of word ``i // 32`` is set when token ``i`` is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

from structout import _engine
from structout.bitmask import allocate_token_bitmask, apply_token_bitmask_, as_numpy_bitmask
from structout.compiling import schema_grammar
from structout.limits import split_options

if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import TypeAlias

    from structout.vocab import Vocabulary

__all__ = [
    "CompiledGrammar",
    "Matcher",
    "allocate_token_bitmask",
    "apply_token_bitmask_",
    "compile_json_schema",
    "compile_kbnf",
    "compile_type",
    "configure_cache",
    "fill_next_token_bitmasks",
    "grammar_cache_stats",
]

CompiledGrammar = _engine.CompiledGrammar
Matcher = _engine.Matcher
#: Counters of the engine's compiled-grammar cache (every path, ``compile_kbnf`` included).
grammar_cache_stats = _engine.cache_stats
configure_cache = _engine.configure_cache

#: What the compile functions accept as a vocabulary: the public wrapper or the native class.
AnyVocabulary: TypeAlias = Union["Vocabulary", _engine.Vocabulary]


def compile_kbnf(
    text: str,
    vocab: AnyVocabulary,
    *,
    start: str = "start",
    cache_dir: str | os.PathLike[str] | None = None,
    **limits: int | None,
) -> CompiledGrammar:
    """Compile KBNF ``text`` for ``vocab`` (cached by text, options and vocabulary fingerprint in
    the engine's memory cache, and on disk under ``cache_dir`` when given: a later process then
    loads the compiled grammar instead of compiling it).

    ``limits`` are the engine limits (:data:`structout.limits.ENGINE_LIMITS`:
    ``dfa_size_limit``, ``max_repetition``, ``max_grammar_symbols``, ``max_items_per_set``,
    ``max_total_items``, ``max_work_per_byte``, ``mask_cache_bytes``). Raises
    :class:`structout.errors.GrammarError` (with line:col) or ``LimitExceededError``.
    """
    if not isinstance(text, str):
        raise TypeError(f"grammar text must be str, not {type(text).__name__}")
    return _engine.compile_kbnf(text, vocab, start, cache_dir, **limits)


def fill_next_token_bitmasks(
    matchers: Sequence[Matcher],
    bitmask: Any,
    rows: Sequence[int] | None = None,
    num_threads: int | None = None,
) -> None:
    """Fill one row per matcher with the GIL released: the calling thread and up to
    ``num_threads - 1`` persistent native helpers (default: one thread per CPU) take the rows one
    at a time."""
    arr = as_numpy_bitmask(bitmask)
    _engine.fill_next_token_bitmasks(
        list(matchers), arr, None if rows is None else list(rows), num_threads
    )


def compile_json_schema(
    schema: dict[str, Any] | bool | str | bytes, vocab: AnyVocabulary, **options: Any
) -> CompiledGrammar:
    """Translate a JSON Schema (dict or JSON text) to KBNF and compile it for ``vocab``.

    ``options`` are the translator's (``whitespace``, ``indent``, ``lenient``, ``max_schema_depth``,
    ...) and the engine limits (``dfa_size_limit``, ``max_items_per_set``, ...). The translation
    and the compiled grammar are cached in memory and on disk by the process-wide
    :class:`structout.cache.CompileCache`. Raises ``UnsupportedSchemaError`` / ``SchemaError``.
    """
    from structout.schema import json_schema_of

    if isinstance(schema, bytes):
        schema = schema.decode("utf-8")
    if not isinstance(schema, (dict, bool, str)):
        raise TypeError(f"schema must be a dict, bool or JSON text, not {type(schema).__name__}")
    document, _ = json_schema_of(schema)  # parses JSON text; too deep → LimitExceededError
    translator_options, limits = split_options(options)
    return schema_grammar(document, translator_options, vocab, limits)


def compile_type(tp: Any, vocab: AnyVocabulary, **options: Any) -> CompiledGrammar:
    """Compile any Python type a ``pydantic.TypeAdapter`` accepts (models, dataclasses, ...).

    Extra keys are generated only where the type allows them. ``options`` as for
    :func:`compile_json_schema` (plus ``by_alias``: use field aliases as property names).
    """
    from structout.schema import json_schema_of

    translator_options, limits = split_options(options)
    by_alias = translator_options.pop("by_alias", True)
    document, _ = json_schema_of(tp, by_alias=by_alias)
    return schema_grammar(document, translator_options, vocab, limits)
