"""One bounded, thread-safe least-recently-used map for every cache in structout.

Bounded by the number of entries and, optionally, by a total weight (e.g. characters of text
held): after each :meth:`LRU.put` both bounds hold, the least recently used entries leaving first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Callable, Generic, TypeVar

__all__ = ["LRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


_MISSING = object()


class LRU(Generic[K, V]):
    """A thread-safe LRU map holding at most ``max_entries`` entries (and, with ``weigh``, at
    most ``max_weight`` total weight; a single entry heavier than ``max_weight`` is not kept)."""

    def __init__(
        self,
        max_entries: int,
        *,
        weigh: Callable[[V], int] | None = None,
        max_weight: int | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        if (weigh is None) != (max_weight is None):
            raise ValueError("weigh and max_weight go together")
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weigh = weigh
        self._weight = 0
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        # Two lookups, not three: keys can be large trees whose hash is not cached.
        with self._lock:
            value = self._data.get(key, _MISSING)
            if value is _MISSING:
                return None
            self._data.move_to_end(key)
            return value  # type: ignore[return-value]

    def put(self, key: K, value: V) -> None:
        weight = self._weigh(value) if self._weigh is not None else 0
        with self._lock:
            if self.max_weight is not None and weight > self.max_weight:
                return
            old = self._data.pop(key, None)
            if old is not None and self._weigh is not None:
                self._weight -= self._weigh(old)
            self._data[key] = value
            self._weight += weight
            while len(self._data) > self.max_entries or (
                self.max_weight is not None and self._weight > self.max_weight
            ):
                _, evicted = self._data.popitem(last=False)
                if self._weigh is not None:
                    self._weight -= self._weigh(evicted)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._weight = 0

    @property
    def weight(self) -> int:
        """Total weight of the entries held (0 without ``weigh``)."""
        return self._weight

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)
