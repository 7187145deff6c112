"""Schema → KBNF → compiled grammar: the one path every caller takes.

``Model.compile``, :func:`structout.compile_json_schema`, :func:`structout.compile_type` and the
transformers and vLLM logits processors all translate through :func:`schema_kbnf` (cached by
canonical schema and translator options, in memory and on disk) and compile through
:meth:`structout.cache.CompileCache.compiled_grammar` (the engine's cache, in memory and on disk).

Invariant: the KBNF returned for a schema is the translator's output for exactly that schema and
those options; a cached entry is never reused for other options.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from structout._engine import CompiledGrammar
    from structout.cache import CompileCache
    from structout.engine import Engine
    from structout.limits import Limits
    from structout.targets import Target
    from structout.vocab import Vocabulary

__all__ = ["compile_target", "schema_grammar", "schema_kbnf", "schema_translator"]


def _translation_steps(
    options: dict[str, Any], translate: Callable[..., str] | None
) -> tuple[Callable[[Any], str], Callable[[Any], str | None] | None]:
    """``(translate, quick)`` for :meth:`CompileCache.kbnf_for_schema` under ``options`` (read
    and checked once). By default what to_kbnf does, in two steps: the engine's common shape
    first (``quick``: kept in memory only, cheaper than a disk lookup), then the Python
    translator; a custom ``translate`` alone otherwise."""
    from structout.schema import TranslatorOptions, common_shape_kbnf, translated_kbnf

    if translate is not None:
        custom = translate
        return lambda schema: custom(schema, **options), None
    checked = TranslatorOptions(**options)
    return (
        lambda schema: translated_kbnf(schema, checked),
        lambda schema: common_shape_kbnf(schema, checked),
    )


def schema_kbnf(
    schema: Any,
    translator_options: Mapping[str, Any],
    cache: CompileCache | None = None,
    *,
    translate: Callable[..., str] | None = None,
) -> str:
    """The KBNF text of a JSON Schema (dict or bool) under the translator's options, through
    ``cache`` (default: the process-wide cache); ``translate`` defaults to
    :func:`structout.schema.to_kbnf`."""
    from structout.cache import get_default_cache

    options = dict(translator_options)
    run, quick = _translation_steps(options, translate)
    cache = cache if cache is not None else get_default_cache()
    text, _ = cache.kbnf_for_schema(schema, run, options or None, quick=quick)
    return text


def schema_translator(
    translator_options: Mapping[str, Any],
    cache: CompileCache | None = None,
    *,
    translate: Callable[..., str] | None = None,
) -> Callable[[Any], str]:
    """A function from a JSON Schema or a Python type to its KBNF, through the same steps as
    :func:`schema_kbnf` (for grammars that embed schemas: structural tags, tool calls).

    The options are read once, not once per schema (a tool grammar translates hundreds), and
    the cache keys share one salt."""
    from structout.cache import get_default_cache, schema_key_function
    from structout.schema import json_schema_of

    options = dict(translator_options)
    run, quick = _translation_steps(options, translate)
    key_of = schema_key_function(options or None)

    def translate_one(schema: Any) -> str:
        target = cache if cache is not None else get_default_cache()
        text, _ = target.kbnf_for_schema(json_schema_of(schema)[0], run, quick=quick, key=key_of)
        return text

    return translate_one


def schema_grammar(
    schema: Any,
    translator_options: Mapping[str, Any],
    vocab: Vocabulary | Any,
    engine_limits: Mapping[str, Any],
    cache: CompileCache | None = None,
) -> CompiledGrammar:
    """The compiled grammar of a JSON Schema (dict or bool) for ``vocab``: translated through
    :func:`schema_kbnf`, compiled through ``cache`` (default: the process-wide cache)."""
    from structout.cache import get_default_cache

    cache = cache if cache is not None else get_default_cache()
    return cache.compiled_grammar(
        schema_kbnf(schema, translator_options, cache), vocab, engine_limits
    )


def compile_target(
    cache: CompileCache,
    target: Target[Any],
    vocab: Vocabulary | Any,
    limits: Limits,
    engine: Engine,
    *,
    property_order: str = "schema",
) -> tuple[str, CompiledGrammar]:
    """``(kbnf, compiled grammar)`` for a resolved non-text target: translated by ``engine``
    through ``cache``'s schema layer, compiled by ``engine`` under ``limits`` (the options that
    are set become part of the cache keys). ``property_order`` is the translator's (``"any"``:
    object properties in any order)."""
    kbnf = target.kbnf
    if kbnf is None:
        options: dict[str, Any] = dict(limits.translator_options())
        if property_order != "schema":
            options["property_order"] = property_order
        kbnf = schema_kbnf(target.json_schema, options, cache, translate=engine.translate_schema)
    return kbnf, engine.compile_kbnf(cache, kbnf, vocab, limits.engine_options())
