"""An aggregates question as SQL over the dashboards' copy (`units/dashboards.py`), or None
when the copy cannot answer it exactly as the database would: then the database does.

The copy holds a unit's id and eight fields: the six it may be grouped by and the two
amounts it is measured by. A filter or a key's policy is translated comparison by comparison
with the rules of `filters/sql.py` (text matched lower-cased, null false for `==` and
ordering and true for `!=` and `=out=`); a comparison on another field, a text value that is
not ASCII (PostgreSQL's and SQLite's `lower()` do not agree beyond it), or a number the
copy's decimals cannot hold makes the question the database's.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from units_api.filters.parser import parse_filter
from units_api.filters.tree import And, Comparison, Node, comparisons
from units_api.filters.values import resolve
from units_api.units.filtering import UNIT_CATALOGUE
from units_api.units.schemas import Aggregate, QueryRequest

# The copy's columns, by field (the units table's names).
COPIED = {
    "city": "city",
    "type": "type",
    "subProjectId": "sub_project_id",
    "status": "publishing_status",
    "availability": "availability_status",
    "bedrooms": "bedrooms",
    "price": "price",
    "surface": "surface",
}
TEXT = ("city", "type", "subProjectId", "status", "availability")
# Held lower-case by the server: matched as they are (`filters/fields.Field.lowercase`).
LOWERCASE = ("status", "availability")
AMOUNTS = ("price", "surface")  # DECIMAL(18, 2) in the copy
SCALE = 2
# A bound a filter compares an amount with is held exactly in DECIMAL(38, 20).
_BOUND_MAX = Decimal(10) ** 17
_BOUND_PLACES = 20
_ORDERING = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class Untranslatable(Exception):
    """The question is the database's to answer."""


@dataclass(frozen=True, slots=True)
class Plan:
    """The statement and its parameters, and how each of its columns becomes the answer's:
    a group's value, a measure, or an average (its sum and count, two columns)."""

    sql: str
    parameters: list[Any]
    names: tuple[str, ...]
    averaged: tuple[bool, ...]
    amounts: frozenset[str]  # the amounts it reads (held exactly unless odd)


def plan(
    request: QueryRequest,
    policy: Node | None,
    dialect: str,
    odd: frozenset[str],
    binary_text: bool,
    table: str,
) -> Plan | None:
    """The question as SQL over `table`, or None. `odd` names the amounts some unit holds with
    more places than the copy keeps; `binary_text`: the database orders text by code point."""
    if request.q:
        return None
    tree = parse_filter(request.filter, "filter") if request.filter is not None else None
    try:
        return _plan(request, tree, policy, dialect, odd, binary_text, table)
    except Untranslatable:
        return None


def _plan(
    request: QueryRequest,
    tree: Node | None,
    policy: Node | None,
    dialect: str,
    odd: frozenset[str],
    binary_text: bool,
    table: str,
) -> Plan:
    groups = [_copied(field, odd) for field in request.groupBy]
    if not binary_text and any(field in TEXT for field in request.groupBy):
        raise Untranslatable  # the groups' order, and which a limit keeps, would differ
    selected = [f"{column} AS g{i}" for i, column in enumerate(groups)]
    averaged = [False] * len(groups)
    for i, spec in enumerate(request.aggregates.values()):
        measured = _measure(spec, odd)
        selected.append(f"{measured[0]} AS m{i}")
        if len(measured) == 2:
            selected.append(f"{measured[1]} AS n{i}")
        averaged.append(len(measured) == 2)
    parameters: list[Any] = []
    conditions = [
        _condition(node, parameter, dialect, odd, parameters)
        for node, parameter in ((tree, "filter"), (policy, "policy"))
        if node is not None
    ]
    sql = f"SELECT {', '.join(selected)} FROM {table}"  # noqa: S608 (values are parameters)
    if conditions:
        sql += " WHERE " + " AND ".join(conditions)
    if groups:
        sql += " GROUP BY " + ", ".join(groups)
        sql += " ORDER BY " + ", ".join(f"{column} ASC NULLS LAST" for column in groups)
    sql += f" LIMIT {int(request.limit)}"
    names = (*request.groupBy, *request.aggregates)
    read = {*request.groupBy, *(spec.field or "" for spec in request.aggregates.values())}
    for node in (tree, policy):
        if node is not None:
            read.update(comparison.selector for comparison in comparisons(node))
    return Plan(sql, parameters, names, tuple(averaged), frozenset(read) & set(AMOUNTS))


def _copied(field: str | None, odd: frozenset[str]) -> str:
    if field is None or field not in COPIED or field in odd:
        raise Untranslatable
    return COPIED[field]


def _measure(spec: Aggregate, odd: frozenset[str]) -> tuple[str, ...]:
    if spec.field is None:
        return ("count(*)",)
    column = _copied(spec.field, odd)
    if spec.fn == "countDistinct":
        return (f"count(DISTINCT {column})",)
    if spec.fn == "avg":
        return (f"sum({column})", f"count({column})")
    return (f"{spec.fn}({column})",)


def _condition(
    node: Node, parameter: str, dialect: str, odd: frozenset[str], parameters: list[Any]
) -> str:
    if isinstance(node, Comparison):
        return _comparison(node, parameter, dialect, odd, parameters)
    joiner = " AND " if isinstance(node, And) else " OR "
    children = (_condition(child, parameter, dialect, odd, parameters) for child in node.children)
    return "(" + joiner.join(children) + ")"


def _comparison(
    node: Comparison, parameter: str, dialect: str, odd: frozenset[str], parameters: list[Any]
) -> str:
    if node.selector not in COPIED or node.operator in ("within", "near", "inside"):
        raise Untranslatable  # the database names what is wrong with it, if anything
    column = _copied(node.selector, odd)
    _, values = resolve(node, UNIT_CATALOGUE, parameter)  # the same 400s as the database's
    op = node.operator
    if op == "null":
        return f"({column} IS NULL)" if values[0] else f"({column} IS NOT NULL)"
    like = False
    if node.selector in TEXT:
        expression, values, like = _text(node.selector, column, op, values)
    else:
        values = [_number(node.selector, value, dialect) for value in values]
        expression = column
    if op in ("in", "out"):
        test = f"{expression} IN ({', '.join('?' for _ in values)})"
    elif op in ("eq", "ne"):
        test = f"{expression} LIKE ? ESCAPE '\\'" if like else f"{expression} = ?"
    else:
        test = f"{expression} {_ORDERING[op]} ?"
    parameters.extend(values)
    if op in ("ne", "out"):
        return f"({column} IS NULL OR NOT ({test}))"
    return f"({column} IS NOT NULL AND {test})"


def _text(field: str, column: str, op: str, values: list[Any]) -> tuple[str, list[Any], bool]:
    """The text compared, the values it is compared with, and whether by LIKE (a `*`)."""
    if op in _ORDERING:
        return column, values, False  # code point order everywhere (COLLATE "C" on PostgreSQL)
    if not all(value.isascii() for value in values):
        raise Untranslatable
    lowered = [value.lower() for value in values]
    expression = column if field in LOWERCASE else f"lower({column})"
    if op in ("eq", "ne") and "*" in lowered[0]:
        escaped = lowered[0].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return expression, [escaped.replace("*", "%")], True
    return expression, lowered, False


def _number(field: str, value: Any, dialect: str) -> Any:
    if field not in AMOUNTS:
        return value  # a whole number (bedrooms)
    if dialect == "sqlite":
        # SQLite compares the stored double with the bound's double; the copy holds each
        # stored double as its shortest decimal, and a bound as the same: the order agrees.
        value = Decimal(repr(float(value)))
    if not value.is_finite() or abs(value) >= _BOUND_MAX:
        raise Untranslatable
    if value != 0 and -int(value.as_tuple().exponent) > _BOUND_PLACES:
        raise Untranslatable
    return value
