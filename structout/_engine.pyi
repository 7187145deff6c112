"""Type stubs for ``structout._engine``, the native (Rust, pyo3) engine module.

Errors raised by the engine are the classes of :mod:`structout.errors` (``GrammarError``,
``LimitExceededError``, ``VocabularyError``, ``StructoutError`` for internal errors), plus the
built-in ``TypeError`` / ``ValueError`` / ``IndexError`` / ``KeyError`` for invalid arguments.
"""

import os
from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypedDict, final

import numpy as np
import numpy.typing as npt
from typing_extensions import TypeAlias

__version__: str

_Bitmask: TypeAlias = npt.NDArray[np.int32]
_TokenBytes: TypeAlias = bytes | bytearray | str | None

class _HasNative(Protocol):
    """``structout.Vocabulary``: a wrapper keeping the native vocabulary in ``_native``."""

    @property
    def _native(self) -> Vocabulary: ...

class _CacheStats(TypedDict):
    """Counters of the compiled-grammar cache (:func:`cache_stats`)."""

    hits: int
    misses: int
    disk_hits: int
    disk_writes: int
    disk_errors: int
    entries: int
    capacity: int

# --------------------------------------------------------------------------- byte level
@final
class Grammar:
    """A compiled KBNF grammar (byte level, no vocabulary). Immutable and thread-safe."""

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is a complete sentence of the grammar."""
    def recognizer(self) -> Recognizer:
        """A fresh incremental recognizer."""
    def lnf(self) -> str:
        """The normalized grammar (LNF), printed."""
    @property
    def memory_usage(self) -> int:
        """Approximate heap bytes held by the grammar."""

@final
class Recognizer:
    """An incremental byte-level recognizer (Earley)."""

    def feed(self, data: bytes) -> bool:
        """Feeds bytes atomically; False (state unchanged) if they cannot continue a sentence.

        Raises ``LimitExceededError`` when an engine limit is hit."""
    def feed_byte(self, byte: int) -> bool:
        """Feeds one byte (0..255); same contract as :meth:`feed`."""
    def is_complete(self) -> bool:
        """Whether the input so far is a complete sentence."""
    def is_dead(self) -> bool:
        """Whether no byte can follow."""
    def allowed_bytes(self) -> bytes:
        """The bytes that may come next, ascending."""
    def rollback_to(self, length: int) -> None:
        """Restores the state after the first ``length`` bytes (no-op if ``length`` is not
        shorter than the input)."""
    def reset(self) -> None:
        """Back to the empty input."""
    def __len__(self) -> int:
        """Bytes fed so far."""

#: Every engine limit (the keyword arguments of :func:`compile_kbnf`) and its default;
#: ``mask_cache_bytes`` applies to :func:`compile_kbnf` only.
ENGINE_LIMITS: dict[str, int]

def compile_grammar(text: str, start: str = "start", **limits: int | None) -> Grammar:
    """Compiles KBNF text into a byte-level grammar; ``limits`` are :data:`ENGINE_LIMITS` but
    ``mask_cache_bytes`` (``None`` keeps a default, an unknown name is a ``TypeError``).

    Raises ``GrammarError`` (line:col, excerpt, hint) or ``LimitExceededError``."""

def byte_level_alphabet() -> str:
    """The GPT-2 byte-level alphabet: character ``i`` spells byte ``i`` in byte-level BPE token
    strings (``"Ġ"`` for a space)."""

#: Regex terminals whose automata the engine builds once per process: the JSON lexemes the
#: schema translator writes (number, integer, string body, non-empty string), in its spelling. A
#: grammar whose terminal is spelled exactly so skips building it; any other spelling of the same
#: language is built as usual (only speed depends on the spelling).
PREBUILT_PATTERNS: tuple[str, ...]

def minimal_partition_of(
    classes: int, transitions: bytes, accepting: bytes, start: int
) -> list[int]:
    """The states of the minimal automaton of a complete DFA (Hopcroft's partition refinement):
    ``transitions`` holds ``states * classes`` native-endian 4-byte targets row by row (e.g.
    ``array('I', ...).tobytes()``), ``accepting`` one byte per state (non-zero: accepting).
    Returns each state's state in the minimal automaton, numbered breadth-first from the
    start's (``0``) over the classes in order. ``ValueError`` for a malformed table."""

#: The keywords that assert something or locate schemas in JSON Schema drafts 3 to 2020-12: the
#: engine's schema translation handles six and declines the others (and ignores any keyword not
#: listed, as the Python translator does).
ASSERTING_SCHEMA_KEYWORDS: list[str]

#: The rule names the engine's schema translation takes before any other (those the Python
#: translator writes without choosing them in the compact layout).
COMMON_SCHEMA_FIXED_NAMES: list[str]

@final
class SharedRules:
    """Grammars embedded in one larger grammar with every rule written once up to renaming (see
    ``structout.kbnf_text.SharedRules``)."""

    def __init__(self) -> None: ...
    def add(self, kbnf: str, prefix: str) -> tuple[list[str], str] | None:
        """The rule lines to write for ``kbnf`` under ``prefix`` and its start rule's name;
        ``None`` when ``kbnf`` is not one rule per line (every name it uses defined once,
        ``start`` among them)."""
    def add_common_schema(
        self, schema: object, prefix: str, max_number_length: int | None = None
    ) -> tuple[list[str], str] | None:
        """:meth:`add` of the KBNF ``translate_common_schema(schema, max_number_length)``
        returns, in one call; ``None`` when the schema is outside the common shape or ``add``
        would return ``None`` for its text."""

def translate_common_schema(schema: object, max_number_length: int | None = None) -> str | None:
    """The KBNF of a JSON Schema given as plain data (``dict``/``list``/``str``/numbers/``bool``/
    ``None``) in the compact layout with the default limits, exactly as
    ``structout.schema.to_kbnf`` prints it, when the schema is of the common shape the engine
    translates (typed properties, ``required``, ``additionalProperties``, ``items``, type lists,
    ``anyOf`` of different kinds, string enums, local ``$ref``, annotations); ``None`` for any
    other schema."""

def builtin_grammar(name: str) -> str:
    """The KBNF text of a grammar bundled with the engine (e.g. ``"json"``); ``KeyError`` if
    there is none of that name."""

# --------------------------------------------------------------------------- vocabulary
@final
class Vocabulary:
    """A model vocabulary: token id -> bytes, special flags, EOS ids, fingerprint, token trie.

    Immutable and thread-safe. The public wrapper is :class:`structout.Vocabulary`."""

    @staticmethod
    def from_bytes(
        tokens: Sequence[_TokenBytes],
        eos_token_ids: Sequence[int] = ...,
        vocab_size: int | None = None,
    ) -> Vocabulary:
        """Builds from explicit token bytes (``str`` = its UTF-8; ``None`` = special/unused)."""
    @staticmethod
    def from_hf_tokens(
        tokens: Sequence[str | None],
        kind: str,
        added_tokens: Sequence[tuple[int, str, bool]] = ...,
        eos_token_ids: Sequence[int] = ...,
        vocab_size: int | None = None,
        byte_fallback: bool = True,
    ) -> Vocabulary:
        """Builds from Hugging Face token strings by id spelled in ``kind`` (``"byte_level"``,
        ``"sentencepiece"`` or ``"raw"``) plus added tokens ``(id, content, special)``."""
    @staticmethod
    def from_tiktoken(
        data: bytes,
        special_tokens: Sequence[tuple[str, int]] = ...,
        eos_token_ids: Sequence[int] = ...,
        vocab_size: int | None = None,
    ) -> Vocabulary:
        """Builds from the contents of a tiktoken rank file and special tokens ``(text, id)``."""
    @property
    def size(self) -> int:
        """Number of token ids (the model's vocabulary size; bitmask width)."""
    @property
    def eos_token_ids(self) -> list[int]:
        """EOS token ids, sorted."""
    @property
    def fingerprint(self) -> int:
        """Stable 64-bit hash of the vocabulary (cache key)."""
    @property
    def num_text_tokens(self) -> int:
        """Number of tokens grammar text may produce (non-special, non-empty)."""
    @property
    def trie_nodes(self) -> int:
        """Nodes of the token trie (root included)."""
    @property
    def max_token_len(self) -> int:
        """Length in bytes of the longest text token."""
    @property
    def heap_bytes(self) -> int:
        """Heap memory used by the vocabulary and its trie, in bytes."""
    def token_bytes(self, token_id: int) -> bytes:
        """Bytes of a token (a special token's text; empty for padding); ``IndexError`` if out of
        range."""
    def all_token_bytes(self) -> list[bytes]:
        """Bytes of every id (index = id)."""
    def decode(self, token_ids: Sequence[int]) -> bytes:
        """Concatenated bytes of a token sequence."""
    def is_special(self, token_id: int) -> bool:
        """Whether the id is never produced by grammar text (special, EOS or padding)."""
    def is_padding(self, token_id: int) -> bool:
        """Whether the id lies beyond the tokenizer or is undefined."""
    def is_text_token(self, token_id: int) -> bool:
        """Whether grammar text may produce the id."""
    def special_token_ids(self) -> list[int]:
        """Ids of all special, EOS and padding tokens, ascending."""
    def __len__(self) -> int: ...

# --------------------------------------------------------------------------- token masks
@final
class CompiledGrammar:
    """A grammar compiled for one vocabulary. Immutable, thread-safe, cached by the engine."""

    def matcher(self, *, max_rollback_tokens: int | None = None) -> Matcher:
        """A new matcher (one per generated sequence). ``max_rollback_tokens`` bounds how many of
        the last tokens :meth:`Matcher.rollback` can undo (None: all); with a bound the engine
        releases older parse history, so memory stays bounded on long generations."""
    @property
    def vocab_size(self) -> int:
        """The vocabulary size (bits per bitmask row that matter)."""
    @property
    def mask_words(self) -> int:
        """32-bit words per bitmask row: ``ceil(vocab_size / 32)``."""
    @property
    def eos_token_ids(self) -> list[int]:
        """EOS token ids of the vocabulary."""
    def lnf(self) -> str:
        """The normalized grammar (LNF), printed."""
    @property
    def memory_usage(self) -> int:
        """Heap bytes this grammar holds now (approximate): automata, rules, the slice tables
        built so far and its mask cache (not the vocabulary's token index, which its grammars
        share)."""
    def mask_cache_stats(self) -> dict[str, int]:
        """This grammar's mask cache: ``hits``, ``misses``, ``entries``, ``bytes`` (keys and
        masks held, never more than ``limit``) and ``limit`` (``mask_cache_bytes``)."""
    def __eq__(self, value: object, /) -> bool:
        """Whether both are the same native compiled grammar (the engine's cache returns one
        object per text, options and vocabulary)."""
    def __hash__(self) -> int: ...

@final
class Matcher:
    """The parse state of one generated sequence. Not thread-safe; fork it instead."""

    def fill_next_token_bitmask(self, bitmask: _Bitmask, row: int = 0) -> None:
        """Fills row ``row`` of a C-contiguous ``int32[batch, words]`` bitmask (bit ``i`` of word
        ``i // 32`` set when token ``i`` is allowed). Releases the GIL."""
    def accept_token(self, token_id: int) -> bool:
        """Accepts a token id; False (state unchanged) if it is not allowed. EOS is accepted
        exactly when :meth:`can_finish`. ``IndexError`` for ids outside the vocabulary."""
    def accept_bytes(self, data: bytes) -> bool:
        """Accepts raw bytes as one step; False (state unchanged) if they do not fit."""
    def rollback(self, num_tokens: int = 1) -> None:
        """Undoes the last ``num_tokens`` accepted steps. Without ``max_rollback_tokens`` a larger
        number undoes all of them; with it, more than :attr:`rollback_window` raises
        ``RollbackError`` and changes nothing."""
    @property
    def rollback_window(self) -> int:
        """How many of the last steps :meth:`rollback` can undo now."""
    @property
    def memory_usage(self) -> int:
        """Heap bytes held by this matcher's parse state (the compiled grammar is shared)."""
    @property
    def max_rollback_tokens(self) -> int | None:
        """The rollback bound set when the matcher was created (None: unbounded)."""
    def reset(self) -> None:
        """Back to the start of the grammar."""
    def is_finished(self) -> bool:
        """True once EOS was accepted, or the output is complete and nothing can follow."""
    def can_finish(self) -> bool:
        """True when the output so far is complete (EOS allowed now)."""
    def forced_bytes(self) -> bytes:
        """The longest byte string every valid continuation starts with (jump-forward)."""
    def fork(self) -> Matcher:
        """An independent copy of this matcher."""
    def __copy__(self) -> Matcher: ...
    @property
    def num_tokens(self) -> int:
        """Steps accepted (tokens, ``accept_bytes`` calls and EOS count one each)."""
    @property
    def num_bytes(self) -> int:
        """Bytes accepted so far."""

def compile_kbnf(
    text: str,
    vocab: Vocabulary | _HasNative,
    start: str = "start",
    cache_dir: str | os.PathLike[str] | None = None,
    **limits: int | None,
) -> CompiledGrammar:
    """Compiles KBNF text for ``vocab`` (a :class:`Vocabulary` or ``structout.Vocabulary``)
    through the engine's cache (keyed by text, options and vocabulary fingerprint), with a disk
    layer under ``cache_dir`` when given (entries of other builds, corrupt or truncated ones are
    recompiled and replaced); ``limits`` are :data:`ENGINE_LIMITS` (``None`` keeps a default, an
    unknown name is a ``TypeError``).

    Raises ``TypeError`` for a vocabulary of the wrong type, ``GrammarError`` or
    ``LimitExceededError``."""

def load_or_compile(
    text: str,
    vocab: Vocabulary | _HasNative,
    start: str = "start",
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    defer_write: bool = False,
    **limits: int | None,
) -> tuple[CompiledGrammar, Literal["memory", "disk", "compiled"]]:
    """:func:`compile_kbnf`, also saying where the grammar came from: the memory cache, the disk
    cache, or compiled now. With ``defer_write``, a grammar compiled now is not written under
    ``cache_dir``: the caller writes it with :func:`store_compiled` (off the request's path)."""

def store_compiled(text: str, grammar: CompiledGrammar, cache_dir: str | os.PathLike[str]) -> bool:
    """Writes ``grammar``, compiled from ``text``, under ``cache_dir`` where
    :func:`load_or_compile` looks for it (GIL released). False when the write failed or ``text``
    is not the grammar's (counted in ``cache_stats()["disk_errors"]``)."""

def store_compiled_later(
    text: str,
    grammar: CompiledGrammar,
    cache_dir: str | os.PathLike[str],
    unless_removed: str | os.PathLike[str] | None = None,
) -> None:
    """Queues on the writer thread what :func:`store_compiled` does, skipped if ``unless_removed``
    names a directory that is gone by then."""

@final
class DiskWrites:
    """One cache's files written in the background by the engine's writer thread (one per
    process, never holding the GIL), and their outcomes."""

    def __init__(self) -> None: ...
    def write_later(
        self,
        path: str | os.PathLike[str],
        data: bytes,
        unless_removed: str | os.PathLike[str] | None = None,
    ) -> None:
        """Queues an atomic write of ``data`` to ``path`` (a temporary file in the same
        directory, created with its parents, renamed over ``path``), skipped if
        ``unless_removed`` names a directory that is gone by then."""
    @property
    def written(self) -> int:
        """Files written."""
    @property
    def failed(self) -> int:
        """Writes that failed."""
    def take_error(self) -> str | None:
        """The first failure's message not taken yet, else None."""

def flush_disk_writes(timeout_s: float | None = None) -> bool:
    """Waits (GIL released) until the writes queued so far are done; False when ``timeout_s``
    seconds passed first."""

def pause_disk_writes(timeout_s: float | None = None, *, start: bool = True) -> bool:
    """Holds the writer thread between jobs: True once no write is running, False when
    ``timeout_s`` passed first (paused all the same), until as many
    :func:`resume_disk_writes` calls. ``start=False`` (before a fork) pauses only a writer this
    process has started."""

def resume_disk_writes() -> None:
    """Ends one :func:`pause_disk_writes` (the writer goes on after the last)."""

def apply_token_bitmask_inplace(logits: npt.NDArray[Any], bitmask: _Bitmask) -> bool:
    """Sets the logits whose bit is clear (and columns beyond the bitmask) to ``-inf`` in place,
    GIL released: ``logits`` a writeable C-contiguous float32/float64 ``[rows, vocab]`` array,
    ``bitmask`` int32 ``[1 or >= rows, words]``. False (nothing done) for other dtypes/layouts."""

def fill_next_token_bitmasks(
    matchers: Sequence[Matcher],
    bitmask: _Bitmask,
    rows: Sequence[int] | None = None,
    num_threads: int | None = None,
) -> None:
    """Fills one bitmask row per matcher (rows ``0..n`` or ``rows``) with the GIL released, on the
    calling thread and up to ``num_threads - 1`` persistent helper threads (default: one per
    CPU), rows handed out one at a time. Rows must be distinct and in range; a matcher may
    appear once."""

def cache_stats() -> _CacheStats:
    """Hit/miss counters, entries and capacity of the compiled-grammar cache."""

def configure_cache(capacity: int = ..., clear: bool = False) -> None:
    """Sets how many compiled grammars the cache keeps (default 128; the oldest are evicted);
    ``clear=True`` empties it and resets the counters."""

__all__ = [
    "ASSERTING_SCHEMA_KEYWORDS",
    "COMMON_SCHEMA_FIXED_NAMES",
    "ENGINE_LIMITS",
    "PREBUILT_PATTERNS",
    "CompiledGrammar",
    "DiskWrites",
    "Grammar",
    "Matcher",
    "Recognizer",
    "SharedRules",
    "Vocabulary",
    "__version__",
    "apply_token_bitmask_inplace",
    "builtin_grammar",
    "byte_level_alphabet",
    "cache_stats",
    "compile_grammar",
    "compile_kbnf",
    "configure_cache",
    "fill_next_token_bitmasks",
    "flush_disk_writes",
    "load_or_compile",
    "minimal_partition_of",
    "pause_disk_writes",
    "resume_disk_writes",
    "store_compiled",
    "store_compiled_later",
    "translate_common_schema",
]
