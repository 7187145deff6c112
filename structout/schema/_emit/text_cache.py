"""A process-wide cache of string-regex terminal texts, shared across translations.

Formats such as ``date-time`` take tens of milliseconds to encode and print; schemas of one
service repeat them. Bounded by the number of entries and by the total text held (the keys,
regex ASTs, are of the same order).
"""

from __future__ import annotations

from ...lru import LRU
from .. import _regex as rx

TERMINAL_TEXTS: LRU[tuple[rx.Node, bool], str] = LRU(256, weigh=len, max_weight=1 << 19)
