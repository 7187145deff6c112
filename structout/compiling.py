"""Schema → KBNF → compiled grammar: the one path every caller takes.

``Model.compile``, :func:`structout.compile_json_schema`, :func:`structout.compile_type` and the
transformers logits processor all translate through :func:`schema_kbnf` (cached by canonical
schema and translator options, in memory and on disk) and compile through the engine's cache.

Invariant: the KBNF returned for a schema is the translator's output for exactly that schema and
those options; a cached entry is never reused for other options.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from structout._engine import CompiledGrammar
    from structout.cache import CompileCache
    from structout.limits import Limits
    from structout.targets import Target
    from structout.vocab import Vocabulary

__all__ = ["compile_target", "schema_kbnf"]


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
    from structout.schema import to_kbnf

    run = translate if translate is not None else to_kbnf
    options = dict(translator_options)
    cache = cache if cache is not None else get_default_cache()
    text, _ = cache.kbnf_for_schema(schema, lambda s: run(s, **options), options or None)
    return text


def compile_target(
    cache: CompileCache,
    target: Target[Any],
    vocab: Vocabulary | Any,
    limits: Limits,
    *,
    translate: Callable[..., str] | None = None,
    compile_kbnf: Callable[..., CompiledGrammar] | None = None,
) -> tuple[str, CompiledGrammar]:
    """``(kbnf, compiled grammar)`` for a resolved non-text target, through ``cache``, under
    ``limits`` (the options that are set become part of the cache keys). ``translate`` and
    ``compile_kbnf`` default to the translator and :func:`structout.compile_kbnf`."""
    engine_compile: Callable[..., CompiledGrammar]
    if compile_kbnf is None:
        from structout.masks import compile_kbnf as engine_compile
    else:
        engine_compile = compile_kbnf
    kbnf = target.kbnf
    if kbnf is None:
        kbnf = schema_kbnf(
            target.json_schema, limits.translator_options(), cache, translate=translate
        )
    engine_limits = limits.engine_options()
    grammar = cache.compiled_grammar(
        kbnf, vocab, lambda text, v: engine_compile(text, v, **engine_limits), engine_limits
    )
    return kbnf, grammar
