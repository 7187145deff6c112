"""structout: guaranteed structured output from language models.

Grammars (KBNF), JSON Schemas and Python types are compiled by a Rust Earley engine into exact
per-token masks.
"""

from __future__ import annotations

# _bootstrap comes first: it makes `structout._engine` importable, or says how to build it.
from structout import _bootstrap, errors  # noqa: F401
from structout._engine import Grammar, __version__, builtin_grammar, compile_grammar
from structout.cache import cache_stats
from structout.errors import (
    GrammarError,
    LimitExceededError,
    RollbackError,
    SchemaError,
    SchemaValidationError,
    StructoutError,
    TruncatedOutputError,
    UnsupportedSchemaError,
    VocabularyError,
)
from structout.limits import Limits
from structout.loop_guard import LoopGuard
from structout.masks import (
    CompiledGrammar,
    Matcher,
    allocate_token_bitmask,
    apply_token_bitmask_,
    compile_json_schema,
    compile_kbnf,
    compile_type,
    configure_cache,
    fill_next_token_bitmasks,
    grammar_cache_stats,
)
from structout.model import Model, Stream
from structout.partial import Partial
from structout.partial_stream import PartialStream, Snapshot
from structout.reasoning import Reasoned
from structout.results import GenerationResult, Timings
from structout.schema import TranslatorOptions, to_kbnf
from structout.structured import current_model, structured, use_model
from structout.targets import KBNF
from structout.tools import AssistantTurn, Tool, ToolCall, ToolFormat, tool
from structout.vocab import Vocabulary

__all__ = [
    "KBNF",
    "AssistantTurn",
    "CompiledGrammar",
    "GenerationResult",
    "Grammar",
    "GrammarError",
    "LimitExceededError",
    "Limits",
    "LoopGuard",
    "Matcher",
    "Model",
    "Partial",
    "PartialStream",
    "Reasoned",
    "RollbackError",
    "SchemaError",
    "SchemaValidationError",
    "Snapshot",
    "Stream",
    "StructoutError",
    "Timings",
    "Tool",
    "ToolCall",
    "ToolFormat",
    "TranslatorOptions",
    "TruncatedOutputError",
    "UnsupportedSchemaError",
    "Vocabulary",
    "VocabularyError",
    "__version__",
    "allocate_token_bitmask",
    "apply_token_bitmask_",
    "builtin_grammar",
    "cache_stats",
    "compile_grammar",
    "compile_json_schema",
    "compile_kbnf",
    "compile_type",
    "configure_cache",
    "current_model",
    "errors",
    "fill_next_token_bitmasks",
    "grammar_cache_stats",
    "structured",
    "to_kbnf",
    "tool",
    "use_model",
]
