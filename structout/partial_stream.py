"""Streaming typed partial objects: ``Model.stream(prompt, schema=T, partial=True)``.

Each decode step yields a :class:`Snapshot`: the object under construction as a ``Partial[T]``
(:mod:`structout.partial`), plus the JSON pointers (RFC 6901, over the JSON keys) of the values
that became **final** at that step. A value is final exactly when the grammar guarantees it will
not change; the decision is read from the engine's state after each chunk, never guessed from
the text:

* The matcher's *forced bytes* (the longest byte string every valid continuation starts with) are
  certain to follow, so the builder reads them ahead of the model: every value they close (a
  string's quote, a container's bracket, the delimiter after a number) is final now, with its
  final content (e.g. an enum's remaining letters).
* A number or literal that the forced bytes leave open is final when the next-token mask (at the
  state after the forced bytes) allows no token starting with a byte that would extend it
  (``0-9 + - . e E`` and the literals' letters), e.g. ``"level": 20`` when the schema says
  ``le=20``.

* A member of an object under a key that may come again (``additionalProperties``,
  ``patternProperties``: the translator writes declared properties once each) is final only when
  that object is, since a repeated key replaces it (:class:`_Schemas`).

Nothing else can make a value final early: structout's JSON grammars write fixed separators (no
optional whitespace), so wherever two bytes may follow, one of them extends the innermost open
string or container (a string's next character, a container's ``,``), which is then not final,
nor is anything around it; only a number or a literal can stop growing at such a branch.

Values appear in the partial object once closed (numbers and literals included); the one string
still being written is shown with its text so far (``Snapshot.open`` names it; it is never final).
Containers appear as soon as they open. The last snapshot has ``done=True`` and ``value``: the
validated ``T`` that ``generate`` returns for the same call (same decoding).

Invariant (the :class:`_Builder`): it has read the output so far followed by ``ahead``, a prefix of
the forced bytes at that point, so every value it has closed keeps its content in every
completion of the output.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from structout.errors import StructoutError
from structout.json_track import SCALAR_BYTES
from structout.partial import Partial, partial_adapter
from structout.results import GenerationResult, IncrementalText, finalize

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Generator

    from structout._engine import Matcher
    from structout.model import CompiledTarget
    from structout.results import RowOutcome, RunStats
    from structout.tokens import TokenSpace

__all__ = ["PartialStream", "Snapshot"]

T = TypeVar("T")

_OBJECT, _ARRAY, _STRING, _KEY, _SCALAR = range(5)
_STRING_STOP = re.compile(rb'["\\]')
_WHITESPACE = frozenset(b" \t\r\n")


def _pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class _Frame:
    """An open value: its kind, pointer, and its container (objects, arrays) or raw bytes."""

    __slots__ = (
        "deferred",
        "escaped",
        "holder",
        "key",
        "kind",
        "pointer",
        "raw",
        "schemas",
        "value",
    )

    def __init__(
        self,
        kind: int,
        pointer: str,
        value: Any = None,
        schemas: tuple[Any, ...] = (),
        holder: _Frame | None = None,
    ) -> None:
        self.kind = kind
        self.pointer = pointer
        self.value = value
        self.raw = bytearray()
        self.escaped = False
        #: Objects: the key of the member whose value comes next (None: a key comes next).
        self.key: str | None = None
        #: The schemas this value may follow (``$ref``/``anyOf`` expanded; empty: unknown).
        self.schemas = schemas
        #: The outermost open object in which a key on this value's path may come again (its
        #: member would replace this value): the value is final only once that object closes.
        self.holder = holder
        #: Objects that are some value's holder: the pointers of the closed values they hold.
        self.deferred: list[str] = []


def _open_text(raw: bytes, escaped: bool) -> str:
    """The text of an unfinished JSON string body: its complete characters and escapes."""
    if escaped:
        raw = raw[:-1]
    for cut in range(len(raw), max(len(raw) - 12, -1), -1):
        try:
            text: str = json.loads(b'"' + raw[:cut] + b'"')
        except ValueError:  # an escape or a UTF-8 sequence cut short
            continue
        if text and "\ud800" <= text[-1] <= "\udbff":  # half of an escaped surrogate pair
            text = text[:-1]
        return text
    return ""


class _Builder:
    """The JSON value of a growing, grammar-checked output (see the module invariant)."""

    def __init__(self, schema: Any = None) -> None:
        self.stack: list[_Frame] = []
        self.root: Any = None
        #: Pointers of the final values, in the order they became final.
        self.finals: list[str] = []
        self._schemas = _Schemas(schema)

    def _child(self, kind: int, value: Any = None) -> _Frame:
        """A frame for a value starting here."""
        if not self.stack:
            return _Frame(kind, "", value, self._schemas.expand(self._schemas.root))
        parent = self.stack[-1]
        holder = parent.holder
        if parent.kind == _ARRAY:
            index = len(parent.value)
            pointer = f"{parent.pointer}/{index}"
            schemas = self._schemas.item(parent.schemas, index)
        else:
            key = parent.key or ""
            pointer = f"{parent.pointer}/{_pointer_token(key)}"
            schemas = self._schemas.member(parent.schemas, key)
            if holder is None and self._schemas.key_may_repeat(parent.schemas, key):
                holder = parent
        return _Frame(kind, pointer, value, schemas, holder)

    def _insert(self, value: Any) -> None:
        if not self.stack:
            self.root = value
            return
        parent = self.stack[-1]
        if parent.kind == _ARRAY:
            parent.value.append(value)
        else:
            parent.value[parent.key] = value
            parent.key = None

    def _close(self, value: Any) -> None:
        frame = self.stack.pop()
        if frame.kind == _KEY:
            self.stack[-1].key = value
            return
        if frame.kind in (_STRING, _SCALAR):
            self._insert(value)
        done = [*frame.deferred, frame.pointer]
        if frame.holder is not None:
            frame.holder.deferred += done
        else:
            self.finals += done

    def close_scalar(self) -> None:
        """Close the number or literal being written (the grammar allows no byte extending it)."""
        self._close(json.loads(bytes(self.stack[-1].raw)))

    def top_kind(self) -> int | None:
        return self.stack[-1].kind if self.stack else None

    def feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        stack = self.stack
        while i < n:
            top = stack[-1] if stack else None
            kind = top.kind if top is not None else None
            if kind in (_STRING, _KEY):
                assert top is not None
                if top.escaped:
                    top.raw.append(data[i])
                    top.escaped = False
                    i += 1
                    continue
                m = _STRING_STOP.search(data, i)
                if m is None:
                    top.raw += data[i:]
                    return
                k = m.start()
                top.raw += data[i:k]
                i = k + 1
                if data[k] == 0x5C:  # a backslash: the next byte is escaped
                    top.raw.append(0x5C)
                    top.escaped = True
                else:
                    self._close(json.loads(b'"' + bytes(top.raw) + b'"'))
                continue
            b = data[i]
            if kind == _SCALAR:
                assert top is not None
                if b in SCALAR_BYTES:
                    top.raw.append(b)
                    i += 1
                    continue
                self.close_scalar()  # this byte belongs to the enclosing value
                continue
            i += 1
            if b in _WHITESPACE or b == 0x3A or b == 0x2C:  # the grammar placed them
                continue
            if b == 0x7B or b == 0x5B:  # { [
                value: Any = {} if b == 0x7B else []
                frame = self._child(_OBJECT if b == 0x7B else _ARRAY, value)
                self._insert(value)
                stack.append(frame)
            elif b == 0x7D or b == 0x5D:  # } ]
                self._close(None)
            elif b == 0x22:  # "
                if top is not None and top.kind == _OBJECT and top.key is None:
                    stack.append(_Frame(_KEY, ""))
                else:
                    stack.append(self._child(_STRING))
            else:  # a number or literal starts
                frame = self._child(_SCALAR)
                frame.raw.append(b)
                stack.append(frame)

    def finish(self) -> None:
        """The output ended: a number or literal at the end is complete."""
        if self.top_kind() == _SCALAR:
            self.close_scalar()

    def tree(self, with_open: bool) -> tuple[Any, str | None]:
        """A copy of the value so far, with the string being written (if ``with_open``), and
        that string's pointer (None when there is none or it is left out)."""
        top = self.stack[-1] if self.stack else None
        if top is None or top.kind != _STRING or not with_open:
            return _copy(self.root), None
        text = _open_text(bytes(top.raw), top.escaped)
        if len(self.stack) == 1:
            return text, top.pointer
        parent = self.stack[-2]
        if parent.kind == _ARRAY:
            parent.value.append(text)
            try:
                return _copy(self.root), top.pointer
            finally:
                parent.value.pop()
        key = parent.key
        parent.value[key] = text
        try:
            return _copy(self.root), top.pointer
        finally:
            del parent.value[key]


class _Schemas:
    """Where a value sits in the JSON Schema: enough to tell whether a key may come again.

    The translator writes an object's declared properties once each and keeps them out of its
    other keys (``additionalProperties``, ``patternProperties``); any other key may repeat, and a
    repeated key's member replaces the earlier one (``json.loads``, Pydantic). Unknown or
    combined schemas (``allOf``, conditionals) count as "may repeat".
    """

    _UNSURE = frozenset(("allOf", "if", "not", "dependentSchemas", "unevaluatedProperties"))

    def __init__(self, root: Any) -> None:
        self.root = root if isinstance(root, dict) else {}

    def expand(self, schema: Any, depth: int = 0) -> tuple[Any, ...]:
        """``schema`` with ``$ref``, ``anyOf`` and ``oneOf`` replaced by the schemas they allow."""
        if not isinstance(schema, dict) or depth > 32:
            return ({},)
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if target is None:
                return ({},)
            if rest:  # sibling keywords of $ref: unsure
                return ({},)
            return self.expand(target, depth + 1)
        out: list[Any] = []
        for word in ("anyOf", "oneOf"):
            alts = schema.get(word)
            if isinstance(alts, list):
                for alt in alts:
                    out.extend(self.expand(alt, depth + 1))
        return tuple(out) if out else (schema,)

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        node: Any = self.root
        for token in ref[1:].split("/")[1:]:
            token = token.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or token not in node:
                return None
            node = node[token]
        return node

    @staticmethod
    def _objects(schemas: tuple[Any, ...]) -> list[dict[str, Any]]:
        out = []
        for s in schemas:
            kind = s.get("type")
            if kind is None or kind == "object" or (isinstance(kind, list) and "object" in kind):
                out.append(s)
        return out

    def member(self, schemas: tuple[Any, ...], key: str) -> tuple[Any, ...]:
        out: list[Any] = []
        for s in self._objects(schemas):
            props = s.get("properties")
            if isinstance(props, dict) and key in props:
                out.extend(self.expand(props[key]))
                continue
            patterns = s.get("patternProperties")
            matched = False
            if isinstance(patterns, dict):
                for pattern, sub in patterns.items():
                    try:
                        hit = re.search(pattern, key) is not None
                    except re.error:
                        hit = True
                    if hit:
                        out.extend(self.expand(sub))
                        matched = True
            if not matched:
                extra = s.get("additionalProperties", True)
                if extra is not False:
                    out.extend(self.expand(extra))
        return tuple(out) or ({},)

    def item(self, schemas: tuple[Any, ...], index: int) -> tuple[Any, ...]:
        out: list[Any] = []
        for s in schemas:
            prefix = s.get("prefixItems")
            if isinstance(prefix, list) and index < len(prefix):
                out.extend(self.expand(prefix[index]))
            else:
                out.extend(self.expand(s.get("items", {})))
        return tuple(out) or ({},)

    def key_may_repeat(self, schemas: tuple[Any, ...], key: str) -> bool:
        for s in self._objects(schemas):
            if self._UNSURE & s.keys():
                return True
            props = s.get("properties")
            if isinstance(props, dict) and key in props:
                continue
            if s.get("additionalProperties", True) is False and not s.get("patternProperties"):
                continue  # the key cannot be in this object: not declared, no extra keys
            return True
        return False


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# ---------------------------------------------------------------------------- engine checks
_scalar_starts: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _scalar_extenders(tokens: TokenSpace, words: int) -> Any:
    """Packed bitmask (``int32[words]``) of the tokens whose first byte would extend a number or
    a literal (cached per token space)."""
    import numpy as np

    hit = _scalar_starts.get(tokens)
    if hit is not None and len(hit) == words:
        return hit
    first = np.array([b[0] if b else 256 for b in tokens.token_bytes], dtype=np.int32)
    ids = np.flatnonzero(np.isin(first, np.frombuffer(bytes(sorted(SCALAR_BYTES)), np.uint8)))
    packed = np.zeros(words, dtype=np.uint32)
    np.bitwise_or.at(packed, ids >> 5, np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
    out = packed.view(np.int32)
    _scalar_starts[tokens] = out
    return out


class _Finality:
    """Reads the matcher after each chunk and tells the builder what the grammar fixes."""

    def __init__(self, matcher: Matcher, tokens: TokenSpace) -> None:
        import structout

        self.matcher = matcher
        self.tokens = tokens
        self.mask = structout.allocate_token_bitmask(1, tokens.vocab_size)
        self.extenders = _scalar_extenders(tokens, self.mask.shape[1])
        #: Forced bytes the builder has read but the output does not have yet.
        self.ahead = b""

    def step(self, builder: _Builder, data: bytes) -> None:
        if self.ahead:
            n = min(len(self.ahead), len(data))
            if data[:n] != self.ahead[:n]:
                raise StructoutError(
                    f"internal error: output {data[:n]!r} differs from the forced bytes "
                    f"{self.ahead[:n]!r}"
                )
            self.ahead, data = self.ahead[n:], data[n:]
            if self.ahead:  # still inside bytes read ahead: what they fixed was read then
                return
        builder.feed(data)
        forced = bytes(self.matcher.forced_bytes())
        if forced:
            builder.feed(forced)
            self.ahead = forced
        if builder.top_kind() == _SCALAR and not self._scalar_may_grow(forced):
            builder.close_scalar()

    def _scalar_may_grow(self, forced: bytes) -> bool:
        """Whether some token allowed after the output and ``forced`` extends the open scalar."""
        m = self.matcher
        if forced:
            m = m.fork()
            if not m.accept_bytes(forced):
                raise StructoutError(f"internal error: forced bytes {forced!r} were refused")
        m.fill_next_token_bitmask(self.mask, 0)
        return bool((self.mask[0] & self.extenders).any())


# ---------------------------------------------------------------------------------- snapshots
@dataclass(frozen=True)
class Snapshot(Generic[T]):
    """The object under construction after one decode step.

    * ``partial``: a ``Partial[T]`` (a dict/list/scalar for JSON Schema targets) holding the final
      values, the open containers and the string being written (named by ``open``);
    * ``new_final``: pointers of the values that became final at this step (``""`` is the whole
      value); ``final``: all final pointers so far (never retracted); ``is_final(pointer)``;
    * ``chunk``: the text generated at this step (UTF-8 sequences are never split, so a chunk
      may lag a step behind); ``offset``: the bytes generated so far;
    * ``done``/``value``: on the last snapshot only, True and the validated ``T``.
    """

    partial: Partial[T]
    new_final: tuple[str, ...]
    #: The builder's list of final pointers (shared; this snapshot sees its first ``_count``).
    _finals: list[str] = field(repr=False, compare=False)
    _count: int = field(repr=False)
    open: str | None
    chunk: str
    offset: int
    done: bool = False
    value: T | None = None

    @property
    def final(self) -> frozenset[str]:
        return frozenset(self._finals[: self._count])

    def is_final(self, pointer: str) -> bool:
        return pointer in self._finals[: self._count]


class PartialStream(Generic[T]):
    """Iterator (and async iterator) of :class:`Snapshot` values; ``.result`` after the end."""

    def __init__(
        self,
        gen: Generator[tuple[int, bytes], None, tuple[list[RowOutcome], RunStats]],
        matcher: Matcher | None,
        tokens: TokenSpace,
        compiled: CompiledTarget,
        prompt_tokens: int,
        schema: Any,
    ) -> None:
        target = compiled.target
        if matcher is None or target.json_schema is None:
            raise ValueError(
                "partial=True streams JSON values: pass a type or a JSON Schema as schema="
            )
        self._gen = gen
        self._compiled = compiled
        self._prompt_tokens = prompt_tokens
        self._finality = _Finality(matcher, tokens)
        self._builder = _Builder(target.json_schema)
        #: Validates partial values of a type (JSON Schema targets stream plain dicts and lists).
        self._adapter = partial_adapter(schema) if target.kind == "type" else None
        self._chunks: list[str] = []
        self._offset = 0
        self.result: GenerationResult[T] | None = None

    @property
    def text(self) -> str:
        """The text generated so far."""
        return "".join(self._chunks)

    def _snapshot(self, seen: int, chunk: str, done: bool = False, value: Any = None) -> Any:
        """The snapshot after a step, ``seen``: the final pointers before it."""
        builder = self._builder
        tree, open_pointer = builder.tree(with_open=True)
        if self._adapter is None:
            partial = tree
        else:
            from pydantic import ValidationError

            try:
                partial = self._adapter.validate_python(tree)
            except ValidationError:
                if open_pointer is None:
                    raise
                # The text so far is no value of its field (an enum's prefix): leave it out.
                tree, open_pointer = builder.tree(with_open=False)
                partial = self._adapter.validate_python(tree)
        new = tuple(builder.finals[seen:])
        return Snapshot(
            partial,
            new,
            builder.finals,
            len(builder.finals),
            open_pointer,
            chunk,
            self._offset,
            done,
            value,
        )

    def __iter__(self) -> Iterator[Snapshot[T]]:
        text = IncrementalText()
        builder, finality = self._builder, self._finality
        try:
            while True:
                _, data = next(self._gen)
                seen = len(builder.finals)
                finality.step(builder, data)
                self._offset += len(data)
                chunk = text.push(data)
                self._chunks.append(chunk)
                yield self._snapshot(seen, chunk)
        except StopIteration as stop:
            outcomes, stats = stop.value
        seen = len(builder.finals)
        builder.finish()
        tail = text.flush()
        self._chunks.append(tail)
        c = self._compiled
        result: GenerationResult[T] = finalize(
            outcomes[0], c.target, stats, c.compile_ms, self._prompt_tokens, True
        )
        self.result = result
        yield self._snapshot(seen, tail, True, result.value)

    async def __aiter__(self) -> AsyncIterator[Snapshot[T]]:
        """``async for``: each step runs in a worker thread, so the event loop stays free."""
        loop = asyncio.get_running_loop()
        it = iter(self)
        end = object()
        while True:
            item = await loop.run_in_executor(None, next, it, end)
            if isinstance(item, Snapshot):
                yield item
            else:
                return

    def close(self) -> None:
        self._gen.close()
