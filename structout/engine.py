"""The engine the SDK drives, as a dependency it receives.

:class:`structout.Model`, the decode loop and the transformers logits processor never import the
native module directly: they call an :class:`Engine`. The default, :func:`native_engine`, is the
Rust engine behind the compile cache; tests pass a reference engine (a brute-force matcher over a
finite language) through the same ``engine=`` parameter.

Invariant: every engine call the SDK makes is a method of :class:`Engine`, so an engine that
implements the protocol is all a caller must supply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from structout.bitmask import allocate_token_bitmask
from structout.masks import fill_next_token_bitmasks

if TYPE_CHECKING:  # pragma: no cover
    from structout.cache import CompileCache
    from structout.vocab import Vocabulary

__all__ = ["Engine", "NativeEngine", "TokenVocabulary", "native_engine"]


class TokenVocabulary(Protocol):
    """What the SDK reads from an engine's vocabulary (``structout.Vocabulary`` has it all)."""

    @property
    def size(self) -> int: ...

    @property
    def eos_token_ids(self) -> list[int]: ...

    def all_token_bytes(self) -> list[bytes]:
        """The bytes of every token id (special tokens: their text; the SDK blanks them)."""
        ...

    def special_token_ids(self) -> list[int]: ...


class Engine(Protocol):
    """What the SDK needs from an engine: vocabularies, schema translation, grammar compilation
    and batch masks. Grammars and matchers are the engine's own objects; the SDK calls
    ``grammar.matcher(max_rollback_tokens=...)`` and the matcher methods the native
    ``structout.Matcher`` documents."""

    def vocabulary(
        self, tokenizer: Any, vocab_size: int, eos_token_ids: Sequence[int] | None = None
    ) -> TokenVocabulary:
        """The token vocabulary of a Hugging Face tokenizer, sized to the model's logits; its
        ``eos_token_ids`` are the tokenizer's, or ``eos_token_ids`` when given."""
        ...

    def translate_schema(self, schema: Any, **options: Any) -> str:
        """KBNF text for a JSON Schema under the translator's keyword options."""
        ...

    def compile_kbnf(
        self, cache: CompileCache, kbnf: str, vocab: Any, limits: Mapping[str, Any]
    ) -> Any:
        """The grammar of ``kbnf`` compiled for ``vocab`` under the engine ``limits``."""
        ...

    def allocate_token_bitmask(self, batch: int, vocab_size: int) -> Any:
        """A zeroed ``int32[batch, ceil(vocab_size / 32)]`` bitmask."""
        ...

    def fill_next_token_bitmasks(
        self, matchers: Sequence[Any], bitmask: Any, rows: Sequence[int] | None = None
    ) -> None:
        """Fill bitmask row ``rows[i]`` (default ``i``) from ``matchers[i]``, all in one call."""
        ...


class NativeEngine:
    """The Rust engine (``structout._engine``): grammars compile through the cache's memory and
    disk layers; masks for a batch are filled by one native call with the GIL released."""

    def vocabulary(
        self, tokenizer: Any, vocab_size: int, eos_token_ids: Sequence[int] | None = None
    ) -> Vocabulary:
        from structout.vocab import Vocabulary

        return Vocabulary.from_hf(tokenizer, vocab_size=vocab_size, eos_token_ids=eos_token_ids)

    def translate_schema(self, schema: Any, **options: Any) -> str:
        from structout.schema import to_kbnf

        return to_kbnf(schema, **options)

    def compile_kbnf(
        self, cache: CompileCache, kbnf: str, vocab: Any, limits: Mapping[str, Any]
    ) -> Any:
        return cache.compiled_grammar(kbnf, vocab, limits)

    def allocate_token_bitmask(self, batch: int, vocab_size: int) -> Any:
        return allocate_token_bitmask(batch, vocab_size)

    def fill_next_token_bitmasks(
        self, matchers: Sequence[Any], bitmask: Any, rows: Sequence[int] | None = None
    ) -> None:
        # (once per decode step: the imports are at module level)
        fill_next_token_bitmasks(matchers, bitmask, rows)


_NATIVE = NativeEngine()


def native_engine() -> NativeEngine:
    """The process's native engine (stateless; its caches live in the engine module)."""
    return _NATIVE
