"""Pydantic round trips through the translator and the engine (hypothesis).

* Random valid instances, dumped by Pydantic (``model_dump_json``, re-laid-out for the compact
  layout), are accepted in every layout.
* Every document the grammar accepts validates: random mutations of valid documents that the
  grammar still accepts must pass ``model_validate_json`` (and the ones Pydantic rejects must
  be refused by the grammar).
"""

# Pydantic evaluates these annotations at runtime: keep Optional/Union for Python 3.9.
# ruff: noqa: UP007, UP045
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Annotated, Any, Literal, Optional, Union
from uuid import UUID

import pytest

pytest.importorskip("pydantic")
pytest.importorskip("hypothesis")
engine = pytest.importorskip("structout._engine")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from structout.errors import UnsupportedSchemaError
from structout.schema import to_kbnf, translate

# --- models ---------------------------------------------------------------------------------


class Color(str, Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Priority(IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    street: str
    zip_code: str = Field(pattern=r"^\d{5}$", alias="zipCode")
    country: Optional[str] = None


class Item(BaseModel):
    name: str = Field(min_length=1, max_length=12)
    qty: int = Field(ge=0, le=1000)
    price: float = Field(gt=0, lt=1_000_000)
    tags: list[str] = Field(default_factory=list, max_length=3)


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = Field(ge=1, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Node(BaseModel):
    value: int
    children: list[Node] = []


class Point(TypedDict):
    x: int
    y: int


@dataclass
class Box:
    lo: Point
    hi: Point
    label: Literal["a", "b"]


class Order(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: UUID
    created: datetime
    day: date
    at: time
    wait: timedelta
    total: Decimal
    color: Color
    priority: Priority
    items: list[Item] = Field(min_length=1, max_length=3)
    pair: tuple[int, str]
    ids: set[int]
    meta: dict[str, int]
    pet: Union[Cat, Dog] = Field(discriminator="kind")
    address: Optional[Address] = None
    note: Optional[str] = Field(default=None, alias="noteText")
    tree: Node
    ratio: float = Field(multiple_of=0.25, ge=0, le=10)
    code: str = Field(pattern=r"^[A-Z]{3}-\d{2}$")
    box: Box


class Open(BaseModel):
    """Extra keys allowed: the grammar must allow them too."""

    model_config = ConfigDict(extra="allow")
    a: int


# --- strategies -----------------------------------------------------------------------------

text = st.text(max_size=8)
offsets = st.sampled_from(
    [timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
)
aware_datetimes = st.datetimes(
    min_value=datetime(1000, 1, 1), max_value=datetime(9999, 1, 1), timezones=offsets
)
aware_times = st.times(timezones=offsets)
# Pydantic writes timedelta(hours=1, seconds=1) as "PT1H1S" and fractions as "PT0.5S", which
# RFC 3339's duration grammar (format "duration") does not allow: use whole minutes.
whole_timedeltas = st.builds(timedelta, days=st.integers(0, 40), minutes=st.integers(0, 1439))
decimals = st.decimals(
    min_value=Decimal(-99999), max_value=Decimal(99999), places=2, allow_nan=False
)
items = st.builds(
    Item,
    name=st.text(min_size=1, max_size=12),
    qty=st.integers(0, 1000),
    price=st.floats(min_value=0.01, max_value=999_999, allow_nan=False),
    tags=st.lists(text, max_size=3),
)
pets = st.one_of(
    st.builds(Cat, kind=st.just("cat"), lives=st.integers(1, 9)),
    st.builds(Dog, kind=st.just("dog"), good=st.booleans()),
)
trees = st.recursive(
    st.builds(Node, value=st.integers(), children=st.just([])),
    lambda kids: st.builds(Node, value=st.integers(), children=st.lists(kids, max_size=3)),
    max_leaves=6,
)
# TypedDict values keep the input's key order when dumped: build them in field order
points = st.builds(lambda x, y: {"x": x, "y": y}, st.integers(), st.integers())
orders = st.builds(
    Order,
    id=st.uuids(),
    created=aware_datetimes,
    day=st.dates(min_value=date(1000, 1, 1)),
    at=aware_times,
    wait=whole_timedeltas,
    total=decimals,
    color=st.sampled_from(Color),
    priority=st.sampled_from(Priority),
    items=st.lists(items, min_size=1, max_size=3),
    pair=st.tuples(st.integers(), text),
    ids=st.sets(st.integers(-100, 100), max_size=4),
    meta=st.dictionaries(text, st.integers(), max_size=3),
    pet=pets,
    address=st.none()
    | st.builds(
        Address,
        street=text,
        zipCode=st.from_regex(r"\A[0-9]{5}\Z"),
        country=st.none() | text,
    ),
    noteText=st.none() | text,
    tree=trees,
    ratio=st.integers(0, 40).map(lambda k: k / 4),
    code=st.from_regex(r"\A[A-Z]{3}-[0-9]{2}\Z"),
    box=st.builds(Box, lo=points, hi=points, label=st.sampled_from(["a", "b"])),
)


# --- grammars (compiled once) ---------------------------------------------------------------

_CACHE: dict[tuple[Any, str], Any] = {}


def grammar(tp: Any, layout: str) -> tuple[Any, Any]:
    key = (tp, layout)
    if key not in _CACHE:
        opts: dict[str, Any] = {
            "compact": {},
            "flexible": {"whitespace": "flexible"},
            "indent": {"indent": 2},
        }[layout]
        tr = translate(tp, **opts)
        _CACHE[key] = (tr, engine.compile_grammar(tr.kbnf))
    return _CACHE[key]


def docs_in_layouts(model: BaseModel) -> dict[str, str]:
    raw = model.model_dump_json(by_alias=True)
    tr, _ = grammar(type(model), "compact")
    return {
        "compact": tr.dumps(json.loads(raw)),
        "flexible": raw,
        "indent": model.model_dump_json(by_alias=True, indent=2),
    }


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(orders)
def test_valid_orders_are_accepted_in_every_layout(order: Order) -> None:
    for layout, doc in docs_in_layouts(order).items():
        _, g = grammar(Order, layout)
        assert g.accepts(doc.encode("utf-8")), (layout, doc)


@SETTINGS
@given(trees)
def test_recursive_model(tree: Node) -> None:
    for layout, doc in docs_in_layouts(tree).items():
        _, g = grammar(Node, layout)
        assert g.accepts(doc.encode("utf-8")), (layout, doc)


# --- mutations: whatever the grammar accepts must validate --------------------------------------


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) position inside a JSON value."""
    out: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        v = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, child in list(items):
            out.append((v, k))
            stack.append(child)
    return out


_REPLACEMENTS = [
    None,
    True,
    0,
    -1,
    1.5,
    10**12,
    0.25,
    "",
    "x",
    "2020-01-01",
    "abc-12",
    "ABC-12",
    [],
    [1],
    {},
    {"kind": "cat"},
    "00000",
    "PT1H",
    "red",
    3,
    "1.5",
]


def _mutations(value: Any, rnd: random.Random, n: int = 12) -> list[Any]:
    """Copies of a JSON value, each with one random change somewhere."""
    out: list[Any] = []
    for _ in range(n):
        doc = json.loads(json.dumps(value))
        slots = _slots(doc)
        if not slots:
            continue
        parent, key = rnd.choice(slots)
        op = rnd.randrange(4)
        if op == 1 and isinstance(parent, dict):
            del parent[key]
        elif op == 2 and isinstance(parent, dict):
            parent["extra_" + str(rnd.randrange(3))] = rnd.choice(_REPLACEMENTS)
        elif (
            op == 3 and isinstance(parent[key], (int, float)) and not isinstance(parent[key], bool)
        ):
            parent[key] = parent[key] + rnd.choice([-1, 1, 0.5, 1000])
        else:
            parent[key] = rnd.choice(_REPLACEMENTS)
        out.append(doc)
    return out


@SETTINGS
@given(orders, st.integers(0, 2**32))
def test_accepted_mutations_validate(order: Order, seed: int) -> None:
    rnd = random.Random(seed)
    tr, g = grammar(Order, "compact")
    value = json.loads(order.model_dump_json(by_alias=True))
    for doc_value in _mutations(value, rnd):
        doc = tr.dumps(doc_value)
        accepted = g.accepts(doc.encode("utf-8"))
        try:
            Order.model_validate_json(doc)
            valid = True
        except ValidationError:
            valid = False
        if accepted:
            assert valid, f"grammar accepted a document Pydantic rejects: {doc}"


# --- targeted checks ---------------------------------------------------------------------------


def _accepts(tp: Any, doc: str, **opts: Any) -> bool:
    return bool(engine.compile_grammar(to_kbnf(tp, **opts)).accepts(doc.encode("utf-8")))


def test_extra_keys_follow_model_config() -> None:
    assert _accepts(Open, '{"a": 1, "b": [true]}')
    assert not _accepts(Item, '{"name": "n", "qty": 1, "price": 2.5, "tags": [], "z": 1}')
    assert _accepts(Item, '{"name": "n", "qty": 1, "price": 2.5}')


def test_aliases_and_by_alias() -> None:
    doc = '{"street": "s", "zipCode": "12345"}'
    assert _accepts(Address, doc)
    assert not _accepts(Address, doc, by_alias=False)
    assert _accepts(Address, '{"street": "s", "zip_code": "12345"}', by_alias=False)
    assert not _accepts(Address, '{"street": "s", "zipCode": "1234"}')


def test_discriminated_union_refuses_mixed_members() -> None:
    tp = TypeAdapter(Union[Cat, Dog]).json_schema()
    assert _accepts(tp, '{"kind": "cat", "lives": 9}')
    assert not _accepts(tp, '{"kind": "cat", "good": true}')
    assert not _accepts(tp, '{"kind": "dog", "lives": 3}')


def test_field_constraints_are_exact() -> None:
    assert _accepts(Item, '{"name": "abcdefghijkl", "qty": 1000, "price": 1e-05}')
    assert not _accepts(Item, '{"name": "abcdefghijklm", "qty": 1, "price": 1}')
    assert not _accepts(Item, '{"name": "", "qty": 1, "price": 1}')
    assert not _accepts(Item, '{"name": "a", "qty": 1001, "price": 1}')
    assert not _accepts(Item, '{"name": "a", "qty": 1, "price": 0}')
    assert not _accepts(Item, '{"name": "a", "qty": 1, "price": 1, "tags": ["a", "b", "c", "d"]}')


def test_sets_accept_lists_of_items() -> None:
    assert _accepts(set[int], "[1, 2, 2]")
    assert not _accepts(set[int], '[1, "2"]')


def test_decimal_accepts_number_and_string_forms() -> None:
    for doc in ("1.5", '"1.5"', '"-0.25"', '"7"'):
        assert _accepts(Decimal, doc), doc
    for doc in ('"+."', '""', '"1e5"', '"abc"'):
        assert not _accepts(Decimal, doc), doc


DECIMAL_TYPES: dict[str, Any] = {
    "plain": Decimal,
    "digits": Annotated[Decimal, Field(max_digits=4, decimal_places=2)],
    "max_digits": Annotated[Decimal, Field(max_digits=3)],
    "places": Annotated[Decimal, Field(decimal_places=1)],
    "no_places": Annotated[Decimal, Field(max_digits=3, decimal_places=0)],
    "places_over_digits": Annotated[Decimal, Field(max_digits=2, decimal_places=3)],
    "bounds": Annotated[Decimal, Field(ge=0, le=10)],
    "bounds_and_digits": Annotated[Decimal, Field(gt=-5, lt=50, max_digits=3, decimal_places=1)],
}


def _decimal_texts() -> list[str]:
    """Every decimal-looking text of up to 4 characters over a small alphabet, bare and quoted."""
    alphabet = "019.+-e"
    texts = [""]
    frontier = [""]
    for _ in range(4):
        frontier = [t + c for t in frontier for c in alphabet]
        texts += frontier
    extra = ["1.50", "12.3", "123", "99.99", "100.5", "0.05", "-0.5", "10", "1E2", "00.1"]
    return [d for t in texts + extra for d in (t, f'"{t}"')]


@pytest.mark.parametrize("name", sorted(DECIMAL_TYPES))
def test_decimal_grammar_is_within_the_installed_validator(name: str) -> None:
    """Brute force: every short text the grammar accepts, the installed Pydantic validates."""
    tp = DECIMAL_TYPES[name]
    grammar = engine.compile_grammar(to_kbnf(tp))
    adapter = TypeAdapter(tp)
    accepted = 0
    for doc in _decimal_texts():
        if not grammar.accepts(doc.encode()):
            continue
        accepted += 1
        try:
            adapter.validate_json(doc)
        except ValidationError:
            pytest.fail(f"{name}: grammar accepted {doc}, which pydantic refuses")
    assert accepted >= 5, f"{name}: the grammar accepts almost nothing ({accepted})"


def test_unsupported_python_type_reports_keyword() -> None:
    class Pat(BaseModel):
        model_config = ConfigDict(regex_engine="python-re")
        s: str = Field(pattern=r"(\w)\1")

    with pytest.raises(UnsupportedSchemaError) as info:
        to_kbnf(Pat)
    assert info.value.keyword == "pattern"
    assert "/properties/s" in info.value.pointer
