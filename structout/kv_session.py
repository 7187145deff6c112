"""The language-model side of the decode loop: one KV cache fed token chunks, step by step.

Invariant: after each :meth:`KVSession.feed`, the last position of every row holds its newest
real token, so the returned logits are that row's next-token distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch

__all__ = ["KVSession"]


class KVSession:
    """Feeds token chunks to a causal LM, keeping one KV cache for the whole batch.

    Rows advance by different numbers of tokens per step (jump-forward); each step's chunks are
    left-padded to the same length with masked pad tokens and explicit position ids, so the last
    position of every active row holds its newest real token. A single row needs no padding.
    """

    def __init__(self, hf_model: Any, pad_token_id: int, batch_size: int) -> None:
        import inspect

        import torch

        self.torch = torch
        self.model = hf_model
        self.device = next(hf_model.parameters()).device
        self.pad = pad_token_id
        self.batch = batch_size
        self.cache: Any = None
        self.attn: torch.Tensor | None = None
        self.next_pos = [0] * batch_size
        self.forward_passes = 0
        params: Any
        try:
            params = inspect.signature(hf_model.forward).parameters
        except (TypeError, ValueError):
            params = {}
        self._keep_kw = "logits_to_keep" in params or "num_logits_to_keep" in params
        self._keep_name = "logits_to_keep" if "logits_to_keep" in params else "num_logits_to_keep"
        # transformers 5 names the KV cache ``cache`` (``past_key_values`` is deprecated there);
        # older versions only know ``past_key_values``.
        self._cache_name = "cache" if "cache" in params else "past_key_values"
        if self._cache_name == "past_key_values":
            # transformers 4.x returns (and deprecates) legacy tuples unless given a Cache object.
            from transformers import DynamicCache

            self.cache = DynamicCache()

    def feed(self, chunks: Sequence[Sequence[int]]) -> np.ndarray:
        """Run one forward pass; return float32 logits ``[B, V]`` (numpy, host memory) at each
        row's last position."""
        torch = self.torch
        kwargs: dict[str, Any] = {self._cache_name: self.cache, "use_cache": True}
        if self._keep_kw:
            kwargs[self._keep_name] = 1
        if self.batch == 1:
            ids = torch.tensor([list(chunks[0])], dtype=torch.long, device=self.device)
        else:
            width = max(len(c) for c in chunks)
            rows, mask, pos = [], [], []
            for i, chunk in enumerate(chunks):
                padn = width - len(chunk)
                start = self.next_pos[i]
                rows.append([self.pad] * padn + list(chunk))
                mask.append([0] * padn + [1] * len(chunk))
                pos.append([start] * padn + list(range(start, start + len(chunk))))
                self.next_pos[i] = start + len(chunk)
            ids = torch.tensor(rows, dtype=torch.long, device=self.device)
            new_mask = torch.tensor(mask, dtype=torch.long, device=self.device)
            self.attn = new_mask if self.attn is None else torch.cat([self.attn, new_mask], 1)
            kwargs["attention_mask"] = self.attn
            kwargs["position_ids"] = torch.tensor(pos, dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self.model(input_ids=ids, **kwargs)
        self.cache = out.cache if self._cache_name == "cache" else out.past_key_values
        self.forward_passes += 1
        logits: np.ndarray = out.logits[:, -1, :].float().cpu().numpy()
        return logits
