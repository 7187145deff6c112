"""IR nodes → KBNF rules, in one of three layouts.

* ``compact``: ``{"a": 1, "b": [1, 2]}``: one space after ``:`` and ``,``, none elsewhere.
* ``flexible``: any JSON whitespace (runs of at most ``max_whitespace`` characters) between
  tokens and around the document.
* ``indent``: what ``json.dumps(value, indent=n)`` writes (empty containers as ``{}``/``[]``);
  rules depend on the nesting depth, so nesting is limited to ``max_depth``.

Lexical things (strings, numbers, keys) become regex terminals; structure becomes rules. Objects
follow the schema's property order: named properties first (required ones always present,
optional ones may be left out), then the other allowed keys. A final pass drops unproductive
rules (e.g. recursion that can never end).

Modules: ``emitter`` (dispatch per IR node kind), ``layout``, ``rules`` (naming, rendering,
pruning), ``regex_rules`` (regex → terminals), ``strings``, ``regex_format``, ``numbers``,
``generic`` (any JSON), ``arrays``, ``objects``, ``text_cache``.
"""

from .emitter import Emitter
from .layout import Layout, kbnf_literal

__all__ = ["Emitter", "Layout", "kbnf_literal"]
