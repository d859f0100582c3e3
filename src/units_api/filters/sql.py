"""Translating a filter tree to a SQLAlchemy condition, on SQLite and PostgreSQL.

Values are always bound parameters. A field with a column compares it directly; others are
read from the stored document with the dialect's JSON functions; a path into an array
matches when ANY element does (an EXISTS over the array's elements). `filters.evaluate`
judges documents by the same rules in Python.

Null semantics, per value (and per element for arrays): `==`, ordering and `=in=` are false
on null; `!=` and `=out=` are true on null; `=null=true` matches null.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Numeric,
    and_,
    cast,
    func,
    literal,
    not_,
    or_,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB

from units_api.filters.fields import Catalogue, Field
from units_api.filters.tree import And, Comparison, Node, Or
from units_api.filters.values import resolve


def _like_pattern(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


class Translator:
    def __init__(self, catalogue: Catalogue, dialect: str, parameter: str = "p") -> None:
        self.catalogue = catalogue
        self.table = catalogue.table
        self.dialect = dialect
        self.parameter = parameter

    def condition(self, node: Node) -> ColumnElement[bool]:
        if isinstance(node, And):
            return and_(*(self.condition(child) for child in node.children))
        if isinstance(node, Or):
            return or_(*(self.condition(child) for child in node.children))
        return self.comparison(node)

    def comparison(self, node: Comparison) -> ColumnElement[bool]:
        field, values = resolve(node, self.catalogue, self.parameter)
        if field.array is not None:
            return self._any_element(field, node.operator, values)
        return self._compare(self._scalar(field), field.kind, node.operator, values)

    # Where a value lives.

    def _record(self) -> Any:
        document = self.table.c[self.catalogue.document]
        return cast(document, JSONB) if self.dialect == "postgresql" else document

    def _json_value(self, document: Any, path: tuple[str, ...], kind: str) -> Any:
        if self.dialect == "postgresql":
            text = func.jsonb_extract_path_text(document, *(literal(p) for p in path))
            if kind in ("number", "integer"):
                return cast(text, Numeric)
            return cast(text, Boolean) if kind == "boolean" else text
        return func.json_extract(document, "$." + ".".join(path))

    def _scalar(self, field: Field) -> Any:
        if field.column is not None:
            return self.table.c[field.column]
        return self._json_value(self._record(), field.path, field.kind)

    def _any_element(self, field: Field, op: str, values: list[Any]) -> ColumnElement[bool]:
        assert field.array is not None
        if self.dialect == "postgresql":
            array = func.coalesce(
                func.jsonb_extract_path(self._record(), *(literal(p) for p in field.array)),
                literal("[]", JSONB),
            )
            unnest = func.jsonb_array_elements if field.path else func.jsonb_array_elements_text
            elements = unnest(array).table_valued("value").alias("element")
        else:
            elements = (
                func.json_each(self._record(), "$." + ".".join(field.array))
                .table_valued("value")
                .alias("element")
            )
        element = elements.c.value
        value = self._json_value(element, field.path, field.kind) if field.path else element
        matches = self._compare(value, field.kind, op, values)
        return select(literal(1)).select_from(elements).where(matches).exists()

    # How it compares.

    def _compare(self, expr: Any, kind: str, op: str, values: list[Any]) -> ColumnElement[bool]:
        if op == "null":
            is_null: ColumnElement[bool] = expr.is_(None) if values[0] else expr.is_not(None)
            return is_null
        if self.dialect == "sqlite" and kind in ("number", "boolean"):
            # SQLite's JSON functions give REAL for numbers and 1/0 for booleans.
            values = [float(v) if kind == "number" else int(v) for v in values]
        elif kind == "boolean":
            # Bound explicitly: SQLAlchemy refuses to order by a bare True or False.
            values = [literal(v, Boolean) for v in values]
        if kind == "text" and op in ("eq", "ne", "in", "out"):
            positive = self._text_match(expr, op, values)
        elif op in ("eq", "ne"):
            positive = expr == values[0]
        elif op in ("in", "out"):
            positive = expr.in_(values)
        else:
            if kind == "text" and self.dialect == "postgresql":
                expr = expr.collate("C")
            positive = {
                "lt": expr < values[0],
                "le": expr <= values[0],
                "gt": expr > values[0],
                "ge": expr >= values[0],
            }[op]
        if op in ("ne", "out"):
            return or_(expr.is_(None), not_(and_(expr.is_not(None), positive)))
        return and_(expr.is_not(None), positive)

    @staticmethod
    def _text_match(expr: Any, op: str, values: list[str]) -> ColumnElement[bool]:
        lowered = func.lower(expr)
        if op in ("in", "out"):
            matched: ColumnElement[bool] = lowered.in_([value.lower() for value in values])
            return matched
        value = values[0]
        if "*" in value:
            return lowered.like(_like_pattern(value.lower()), escape="\\")
        return lowered == value.lower()


def to_condition(
    node: Node | None, catalogue: Catalogue, dialect: str, parameter: str = "p"
) -> ColumnElement[bool]:
    """The SQL condition a filter puts on the rows of the catalogue's table (true for none)."""
    if node is None:
        return true()
    return Translator(catalogue, dialect, parameter).condition(node)
