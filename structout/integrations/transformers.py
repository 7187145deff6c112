"""``StructuredLogitsProcessor``: structout masks inside ``transformers``' own ``generate``.

.. code-block:: python

    from structout.integrations.transformers import StructuredLogitsProcessor

    proc = StructuredLogitsProcessor(tokenizer, Person)          # type, JSON Schema or KBNF
    out = hf_model.generate(**inputs, logits_processor=[proc], max_new_tokens=200)
    people = proc.parse(tokenizer.batch_decode(out[:, inputs["input_ids"].shape[1]:],
                                               skip_special_tokens=True))

Batch-aware: one matcher per row, all masks filled by one native call per step, applied in place on
the logits' device. Rows may be reordered between steps (beam search): each row's matcher is kept
in sync with its tokens by rolling back to the common prefix. A row that produced EOS is left alone.
Use one processor per ``generate`` call (or call :meth:`reset`); a shorter input than the previous
call's also starts afresh.
"""

from __future__ import annotations

from typing import Any

from transformers import LogitsProcessor

from structout.bitmask import apply_token_bitmask_
from structout.cache import CompileCache, get_default_cache
from structout.compiling import compile_target, schema_kbnf
from structout.engine import Engine, native_engine
from structout.errors import StructoutError
from structout.limits import Limits
from structout.targets import resolve_schema

__all__ = ["StructuredLogitsProcessor"]


class StructuredLogitsProcessor(LogitsProcessor):
    """Constrain ``transformers`` generation to a schema or grammar.

    ``vocab_or_tokenizer``: a ``structout.Vocabulary`` or a Hugging Face tokenizer (the vocabulary
    is then built at the first call, sized to the logits, so padding rows of the model are masked).
    ``schema_or_grammar``: anything ``Model.generate(schema=...)`` accepts except ``None``.
    """

    def __init__(
        self,
        vocab_or_tokenizer: Any,
        schema_or_grammar: Any,
        *,
        cache: CompileCache | None = None,
        limits: Limits | None = None,
        engine: Engine | None = None,
    ) -> None:
        if schema_or_grammar is None:
            raise ValueError("StructuredLogitsProcessor needs a schema or a structout.KBNF grammar")
        self.target = resolve_schema(schema_or_grammar)
        self._cache = cache if cache is not None else get_default_cache()
        self.limits = limits if limits is not None else Limits()
        self.engine: Engine = engine if engine is not None else native_engine()
        if self.target.kbnf is not None:
            self.kbnf = self.target.kbnf
        else:  # translate now, so schema errors surface at construction
            self.kbnf = schema_kbnf(
                self.target.json_schema,
                self.limits.translator_options(),
                self._cache,
                translate=self.engine.translate_schema,
            )
        is_vocab = hasattr(vocab_or_tokenizer, "eos_token_ids") and hasattr(
            vocab_or_tokenizer, "size"
        )
        self._vocab: Any = vocab_or_tokenizer if is_vocab else None
        self._tokenizer: Any = None if is_vocab else vocab_or_tokenizer
        self.grammar: Any = None
        self.reset()

    def reset(self) -> None:
        """Forget all rows; the next call starts a new generation."""
        self._prompt_len: int | None = None
        self._last_len = 0
        self._matchers: list[Any] = []
        self._history: list[list[int]] = []
        self._done: list[bool] = []
        self._bitmask: Any = None

    @property
    def vocab(self) -> Any:
        if self._vocab is None:
            raise RuntimeError(
                "the vocabulary is built at the first call (its size is the logits')"
            )
        return self._vocab

    def _ensure_grammar(self, vocab_size: int) -> None:
        if self._vocab is None:
            self._vocab = self.engine.vocabulary(self._tokenizer, vocab_size)
        if int(self._vocab.size) != vocab_size:
            raise StructoutError(
                f"the vocabulary has {self._vocab.size} tokens but the logits have {vocab_size} "
                "columns; build it with Vocabulary.from_hf(tokenizer, vocab_size=<model size>)"
            )
        if self.grammar is None:
            _, self.grammar = compile_target(
                self._cache, self.target, self._vocab, self.limits, self.engine
            )
        self._eos = {int(t) for t in self._vocab.eos_token_ids}

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        batch, length = int(input_ids.shape[0]), int(input_ids.shape[1])
        self._ensure_grammar(int(scores.shape[-1]))
        if self._prompt_len is None or length <= self._last_len or batch != len(self._matchers):
            self.reset()
            self._prompt_len = length
            self._matchers = [self.grammar.matcher() for _ in range(batch)]
            self._history = [[] for _ in range(batch)]
            self._done = [False] * batch
            self._bitmask = self.engine.allocate_token_bitmask(batch, int(scores.shape[-1]))
        self._last_len = length
        new = (
            input_ids[:, self._prompt_len :].tolist() if length > self._prompt_len else [[]] * batch
        )
        for row in range(batch):
            self._sync(row, new[row])
        self.engine.fill_next_token_bitmasks(self._matchers, self._bitmask)
        return apply_token_bitmask_(scores, self._bitmask)  # any device and dtype

    def _sync(self, row: int, tokens: list[int]) -> None:
        """Bring row ``row``'s matcher to the state after ``tokens`` (its generated tokens)."""
        hist = self._history[row]
        m = self._matchers[row]
        common = 0
        limit = min(len(hist), len(tokens))
        while common < limit and hist[common] == tokens[common]:
            common += 1
        if common < len(hist):  # beams were reordered: roll back to the shared prefix
            m.rollback(len(hist) - common)
            del hist[common:]
            self._done[row] = False
        for pos in range(common, len(tokens)):
            if self._done[row]:
                break
            t = tokens[pos]
            if t in self._eos and m.can_finish():
                self._done[row] = True
                break
            if not m.accept_token(t):
                raise StructoutError(
                    f"row {row}: generated token {t} at position {pos} is not allowed by the "
                    "grammar; was this processor reused for another generate call? (call reset())"
                )
            hist.append(t)

    def parse(self, texts: str | list[str]) -> Any:
        """Parse decoded outputs into values (``SchemaValidationError`` when one fails)."""
        if isinstance(texts, str):
            return self.target.parse(texts)
        return [self.target.parse(t) for t in texts]
