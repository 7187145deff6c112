"""A process-wide cache of string-regex terminal texts, shared across translations."""

from __future__ import annotations

from collections import OrderedDict

from .. import _regex as rx


class TextCache:
    """Terminal texts of string regexes across translations, least recently used first out.

    Formats such as ``date-time`` take tens of milliseconds to encode and print; schemas of one
    service repeat them. Bounded by the total text held (the keys, regex ASTs, are of the same
    order) and by the number of entries.
    """

    def __init__(self, max_entries: int = 256, max_chars: int = 1 << 19) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.chars = 0
        self.map: OrderedDict[tuple[rx.Node, bool], str] = OrderedDict()

    def get(self, key: tuple[rx.Node, bool]) -> str | None:
        text = self.map.get(key)
        if text is not None:
            self.map.move_to_end(key)
        return text

    def put(self, key: tuple[rx.Node, bool], text: str) -> None:
        if len(text) > self.max_chars // 8 or key in self.map:
            return
        self.map[key] = text
        self.chars += len(text)
        while self.chars > self.max_chars or len(self.map) > self.max_entries:
            _, old = self.map.popitem(last=False)
            self.chars -= len(old)

    def clear(self) -> None:
        self.map.clear()
        self.chars = 0


TERMINAL_TEXTS = TextCache()
