"""structout: guaranteed structured output from language models.

Grammars (KBNF), JSON Schemas and Python types are compiled by a Rust Earley engine into exact
per-token masks.
"""

from __future__ import annotations

from structout import errors
from structout._engine import builtin_grammar, compile_grammar
from structout.masks import (
    CompiledGrammar,
    Matcher,
    allocate_token_bitmask,
    apply_token_bitmask_,
    cache_stats,
    compile_kbnf,
    configure_cache,
    fill_next_token_bitmasks,
)
from structout.vocab import Vocabulary
from structout.errors import (
    GrammarError,
    LimitExceededError,
    SchemaError,
    SchemaValidationError,
    StructoutError,
    TruncatedOutputError,
    UnsupportedSchemaError,
    VocabularyError,
)

__version__ = "0.1.0"

__all__ = [
    "CompiledGrammar",
    "Matcher",
    "Vocabulary",
    "allocate_token_bitmask",
    "apply_token_bitmask_",
    "cache_stats",
    "compile_kbnf",
    "configure_cache",
    "fill_next_token_bitmasks",
    "builtin_grammar",
    "compile_grammar",
    "errors",
    "GrammarError",
    "LimitExceededError",
    "SchemaError",
    "SchemaValidationError",
    "StructoutError",
    "TruncatedOutputError",
    "UnsupportedSchemaError",
    "VocabularyError",
]
