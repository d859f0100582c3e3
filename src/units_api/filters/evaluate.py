"""Judging a filter on a document in Python, with the SQL translation's semantics.

`compile_filter(tree, catalogue)` checks the tree once (an unknown field or a value of the
wrong kind is the same 400 the SQL translation raises) and returns a predicate to call on
each document: a dict as the API returns it, parsed with `http.json.load_stored` (numbers as
Decimal or int, times as RFC 3339 strings). A field is read from the document at its `path`,
whether or not SQL reads it from a column (`status` is `publishing.status`).

- `;` is AND, `,` is OR.
- Text: `==`, `!=`, `=in=` and `=out=` compare lowered text (`str.lower` on both sides), and
  in `==` and `!=` a `*` matches any run of characters, newlines included (every other
  character, `%` `_` `.` among them, is itself). Ordering compares code points, unlowered.
- Numbers compare exactly as Decimal, times as instants (`Z` or any offset), uuids as
  uuids, booleans as booleans.
- Null: `==`, ordering and `=in=` are false on null; `!=` and `=out=` are true on null;
  `=null=true` matches null and `=null=false` anything else. A missing key is null.
- A path into an array (`paymentPlans.downPayment`, `gallery`, `channel`) matches when ANY
  element does, each element judged by the rules above: so on an empty array every
  comparison is false, `!=` and `=null=` included, and `!=` matches when one element differs
  or is null.
- A location (`unitLocation`): its point, read from the GeoJSON coordinates, is judged by
  `filters.geo` with the very formulas SQL uses, so the two agree exactly; no point (null, or
  no coordinates) never matches a map operator, and is what `=null=true` matches.

Where the databases differ, the evaluator takes the exact reading. PostgreSQL compares
numbers exactly, SQLite as binary floats (they part only on values alike to about 15
significant digits). PostgreSQL in a UTF-8 locale folds every letter's case, SQLite's
`lower()` only ASCII ones (there `É` never equals `é`); caseless scripts such as Arabic, and
ASCII, agree everywhere.
"""

from __future__ import annotations

import operator
import re
import uuid
from collections.abc import Callable
from typing import Any

from units_api.filters import geo
from units_api.filters.fields import Catalogue, Field, Kind
from units_api.filters.tree import And, Comparison, Node, Or
from units_api.filters.values import parse_time, resolve

Document = dict[str, Any]
Predicate = Callable[[Document], bool]
_Test = Callable[[Any], bool]

_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
_POSITIVE = {"ne": "eq", "out": "in"}
# Documents carry times and uuids as strings; the other kinds arrive typed from JSON.
_TYPED: dict[Kind, Callable[[Any], Any]] = {"time": parse_time, "uuid": uuid.UUID}


def compile_filter(node: Node | None, catalogue: Catalogue, parameter: str = "p") -> Predicate:
    """A predicate telling whether a document matches the filter (every document, for none)."""
    if node is None:
        return lambda document: True
    return _compile(node, catalogue, parameter)


def _compile(node: Node, catalogue: Catalogue, parameter: str) -> Predicate:
    if isinstance(node, And | Or):
        children = tuple(_compile(child, catalogue, parameter) for child in node.children)
        combine = all if isinstance(node, And) else any
        return lambda document: combine(child(document) for child in children)
    return _comparison(node, catalogue, parameter)


def _comparison(node: Comparison, catalogue: Catalogue, parameter: str) -> Predicate:
    field, values = resolve(node, catalogue, parameter)
    if field.kind == "location":
        return _location(field, node.operator, values)
    test = _value_test(field.kind, node.operator, values)
    if field.array is None:
        read = _reader(field.path)
        return lambda document: test(read(document))
    return _any_element(field, test)


def _location(field: Field, op: str, values: list[Any]) -> Predicate:
    read = _reader(field.path)
    if op == "null":
        wanted: bool = values[0]
        return lambda document: (geo.point(read(document)) is None) is wanted
    shape: geo.Shape = values[0]

    def located(document: Document) -> bool:
        point = geo.point(read(document))
        return point is not None and geo.contains(shape, *point)

    return located


def _any_element(field: Field, test: _Test) -> Predicate:
    assert field.array is not None
    read_array, read_element = _reader(field.array), _reader(field.path)

    def any_element(document: Document) -> bool:
        elements = read_array(document)
        if not isinstance(elements, list):
            return False
        return any(test(read_element(element)) for element in elements)

    return any_element


def _reader(path: tuple[str, ...]) -> Callable[[Any], Any]:
    """Reads the value at `path`, None where a key is missing or a step is not an object."""
    if not path:
        return lambda value: value

    def read(value: Any) -> Any:
        for key in path:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value

    return read


# How one value compares.


def _value_test(kind: Kind, op: str, values: list[Any]) -> _Test:
    if op == "null":
        wanted: bool = values[0]
        return lambda value: (value is None) is wanted
    positive = _positive(kind, _POSITIVE.get(op, op), values)
    if kind in _TYPED:
        positive = _typed(_TYPED[kind], positive)
    if op in _POSITIVE:
        return lambda value: value is None or not positive(value)
    return lambda value: value is not None and positive(value)


def _typed(convert: Callable[[Any], Any], test: _Test) -> _Test:
    return lambda value: test(convert(value))


def _positive(kind: Kind, op: str, values: list[Any]) -> _Test:
    """The test of a value that is not null."""
    if kind == "text" and op in ("eq", "in"):
        return _text_match(op, values)
    if op == "in":
        return frozenset(values).__contains__
    compare, wanted = _ORDER[op], values[0]
    return lambda value: compare(value, wanted)


def _text_match(op: str, values: list[str]) -> _Test:
    if op == "in":
        lowered = frozenset(value.lower() for value in values)
        return lambda text: text.lower() in lowered
    wanted = values[0].lower()
    if "*" not in wanted:
        return lambda text: text.lower() == wanted
    pattern = re.compile(".*".join(re.escape(part) for part in wanted.split("*")), re.DOTALL)
    return lambda text: pattern.fullmatch(text.lower()) is not None
