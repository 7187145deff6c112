"""Choices scored as wholes: where the grammar allows one of a few fixed values (an ``enum``, a
``Literal``, a ``bool``), pick by the model's probability of each complete option.

Greedy decoding picks a choice by its first token alone, which favours whichever option shares
its first token with a likely word (and, through the instruction, whichever is listed first).
Here, at the first step of such a value, every option the grammar accepts from that point is
scored by the sum of the model's log-probabilities of all its tokens (one batched forward pass
over the options), and the best is written (sampled by those scores at temperature > 0).

Small models also favour whichever option the instruction lists first. The decoder therefore
scores each option after the prompt with the options listed in both orders, and subtracts the
same scores after a content-free prompt (the user's messages replaced by ``N/A``): what remains
is what the content says, not where an option stood (contextual calibration, Zhao et al. 2021).

A value is a choice point when every token the grammar allows there is consistent with one of
the schema's option sets (a prefix of an option, or an option followed by what comes after it)
and at least two options of that set are accepted by the matcher from there.

Invariant: the written option's tokens were accepted by the matcher before they are used, so
scoring never leaves the grammar's language.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from structout._engine import Matcher
    from structout.tokens import TokenSpace

__all__ = ["ChoiceScorer", "choice_sets"]

#: Option sets larger than this are left to the model token by token.
MAX_OPTIONS = 64
#: Options longer than this many tokens are not scored.
MAX_OPTION_TOKENS = 32
#: A position with more allowed tokens than this is not a choice point (checked first: cheap).
MAX_ALLOWED = 512
#: Schema nesting followed when collecting option sets.
MAX_DEPTH = 64

_SEPARATORS = (", ", ": ")


def choice_sets(schema: Any) -> tuple[tuple[bytes, ...], ...]:
    """The option sets of ``schema`` (a JSON Schema): for every subschema whose values are a
    finite set of at least two (``enum``, ``const`` unions, ``boolean``, optional variants with
    ``null``), the JSON texts of its values, sorted; no set twice."""
    found: dict[tuple[bytes, ...], None] = {}
    defs: dict[str, Any] = {}
    if isinstance(schema, dict):
        for key in ("$defs", "definitions"):
            if isinstance(schema.get(key), dict):
                defs.update(schema[key])
    _collect(schema, defs, found, 0, set())
    return tuple(found)


def _collect(
    node: Any,
    defs: dict[str, Any],
    found: dict[tuple[bytes, ...], None],
    depth: int,
    seen: set[int],
) -> None:
    if depth > MAX_DEPTH or not isinstance(node, dict) or id(node) in seen:
        return
    seen.add(id(node))
    values = _finite_values(node, defs, 0)
    if values is not None:
        texts = sorted(
            {
                json.dumps(v, ensure_ascii=False, separators=_SEPARATORS).encode("utf-8")
                for v in values
            }
        )
        if 2 <= len(texts) <= MAX_OPTIONS:
            found[tuple(texts)] = None
    for value in node.values():
        subs: list[Any] = []
        if isinstance(value, dict):
            subs = [value, *value.values()]
        elif isinstance(value, list):
            subs = value
        for sub in subs:
            _collect(sub, defs, found, depth + 1, seen)


def _finite_values(node: Any, defs: dict[str, Any], depth: int) -> list[Any] | None:
    """Every value ``node`` allows, when that is a small finite set (a superset is fine: the
    matcher decides which options are possible), else None."""
    if depth > MAX_DEPTH or not isinstance(node, dict):
        return None
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        target = defs.get(ref.rsplit("/", 1)[1])
        return _finite_values(target, defs, depth + 1)
    if "const" in node:
        return [node["const"]]
    if isinstance(node.get("enum"), list):
        return list(node["enum"])
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list) and branches:
            out: list[Any] = []
            for branch in branches:
                part = _finite_values(branch, defs, depth + 1)
                if part is None:
                    return None
                out.extend(part)
            return out
    kinds = node.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if isinstance(kinds, list) and kinds and all(k in ("boolean", "null") for k in kinds):
        return [v for k in kinds for v in ([True, False] if k == "boolean" else [None])]
    return None


class ChoiceScorer:
    """Finds choice points in one row and scores their options with the model."""

    def __init__(self, hf_model: Any, tokens: TokenSpace, pad_token_id: int) -> None:
        self.model = hf_model
        self.tokens = tokens
        self.pad = pad_token_id
        #: Options scored, per call (for tests and results).
        self.calls = 0

    def options_here(
        self,
        sets: Sequence[tuple[bytes, ...]],
        prefix: bytes,
        logits: np.ndarray,
        matcher: Matcher,
    ) -> list[list[int]] | None:
        """Token sequences of the options the grammar accepts here, when the position is a choice
        point of one of ``sets`` (``prefix``: the value's bytes written so far; ``logits``: this
        row's masked logits), else None."""
        import numpy as np

        allowed = np.flatnonzero(np.isfinite(logits))
        if not 0 < len(allowed) <= MAX_ALLOWED:
            return None
        tb = self.tokens.token_bytes
        written = [prefix + tb[t] for t in allowed.tolist() if t < len(tb)]
        if not prefix:
            written = [w.lstrip(b" \t\r\n") for w in written]
        for options in sets:
            live = [o for o in options if o.startswith(prefix) and len(o) > len(prefix)]
            if len(live) < 2:
                continue
            if not all(any(o.startswith(w) or w.startswith(o) for o in live) for w in written):
                continue
            seqs = [s for s in (self._accepted(o[len(prefix) :], matcher) for o in live) if s]
            if len(seqs) >= 2:
                return seqs
        return None

    def _accepted(self, rest: bytes, matcher: Matcher) -> list[int] | None:
        """The tokenizer's tokens for ``rest`` when the matcher accepts them here (left as it
        was), else None."""
        toks = self.tokens.spell(rest)
        if not toks or len(toks) > MAX_OPTION_TOKENS:
            return None
        accepted = 0
        for t in toks:
            if not matcher.accept_token(t):
                break
            accepted += 1
        if accepted:
            matcher.rollback(accepted)
        return toks if accepted == len(toks) else None

    def scores(
        self, contexts: Sequence[Sequence[int]], options: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """Sum of the model's log-probabilities of each option's tokens after each context
        (``[context][option]``), in one batched forward pass: every (context, option) row
        left-padded, so all rows end together and the last positions hold the options."""
        import torch

        self.calls += 1
        longest = max(len(o) for o in options)
        seqs = [list(c) + list(o) for c in contexts for o in options]
        width = max(len(q) for q in seqs)
        rows = [[self.pad] * (width - len(q)) + q for q in seqs]
        mask = [[0] * (width - len(q)) + [1] * len(q) for q in seqs]
        positions = [[0] * (width - len(q)) + list(range(len(q))) for q in seqs]
        device = next(self.model.parameters()).device
        kwargs: dict[str, Any] = {"use_cache": False}
        keep = _logits_to_keep_name(self.model)
        if keep is not None:
            kwargs[keep] = longest + 1
        with torch.inference_mode():
            out = self.model(
                input_ids=torch.tensor(rows, dtype=torch.long, device=device),
                attention_mask=torch.tensor(mask, dtype=torch.long, device=device),
                position_ids=torch.tensor(positions, dtype=torch.long, device=device),
                **kwargs,
            )
        logp = torch.log_softmax(out.logits[:, -(longest + 1) :, :].float(), dim=-1)
        result: list[list[float]] = []
        k = 0
        for _ in contexts:
            row = []
            for o in options:
                # The window's last len(o) + 1 positions: each predicts the next option token.
                idx = torch.tensor(list(o), dtype=torch.long, device=logp.device)
                pos = torch.arange(longest - len(o), longest, device=logp.device)
                row.append(float(logp[k, pos, idx].sum()))
                k += 1
            result.append(row)
        return result


def _logits_to_keep_name(model: Any) -> str | None:
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError, AttributeError):
        return None
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return name
    return None
