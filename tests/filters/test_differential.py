"""Random filters, evaluated by a small reference evaluator and by SQL on both databases.

The reference states the language's semantics plainly: text compares case-insensitively with
`*` wildcards on ==, !=, =in=, =out=; a path into an array matches when ANY element does;
==, ordering and =in= are false on null, != and =out= true, =null=true matches null.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Api
from units_api.units.fields import UNIT_CATALOGUE
from units_api.units.seeding import fake_unit

FIELDS = UNIT_CATALOGUE.fields

SELECTORS = [
    "name",
    "type",
    "city",
    "location",
    "unitNameAr",
    "price",
    "surface",
    "guaranty",
    "maxPrice",
    "expense.value",
    "expense.name",
    "unitLocation.type",
    "floorsPlan.rooms",
    "floorsPlan.view",
    "specs.featureTag",
    "specs.active",
    "paymentPlans.downPayment",
    "paymentPlans.default",
    "readings.service",
    "options.price",
    "gallery",
    "status",
    "availability",
    "createdAt",
    "version",
    "id",
]
OPERATORS = {
    "text": ["==", "!=", "=in=", "=out=", "=null=", "=lt=", "=ge="],
    "number": ["==", "!=", "=lt=", "=le=", "=gt=", "=ge=", "=in=", "=out=", "=null="],
    "integer": ["==", "!=", "=lt=", "=ge=", "=in=", "=null="],
    "time": ["=lt=", "=le=", "=gt=", "=ge=", "=null="],
    "uuid": ["==", "!=", "=in="],
    "boolean": ["==", "!=", "=null="],
}


def values_at(record: dict[str, Any], selector: str) -> list[Any]:
    """Every value the selector reaches in a record (one for a scalar, each element's)."""
    field = FIELDS[selector]
    if field.array is not None:
        items: Any = record
        for part in field.array:
            items = (items or {}).get(part)
        elements = items or []
        if not field.path:
            return list(elements)
        return [element.get(field.path[0]) for element in elements]
    if field.column is not None:
        value = {
            "status": record["publishing"]["status"],
            "availability": record["availability"]["status"],
        }.get(selector)
        return [value if value is not None else record.get(selector)]
    value: Any = record
    for part in field.path:
        value = (value or {}).get(part)
    return [value]


def typed(kind: str, raw: Any) -> Any:
    if raw is None:
        return None
    if kind == "time":
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).astimezone(UTC)
    if kind == "uuid":
        return uuid.UUID(str(raw))
    if kind in ("number", "integer"):
        return Decimal(str(raw))
    if kind == "boolean":
        return raw if isinstance(raw, bool) else str(raw).lower() == "true"
    return str(raw)


def text_matches(value: str, pattern: str) -> bool:
    regex = ".*".join(re.escape(part) for part in pattern.lower().split("*"))
    return re.fullmatch(regex, value.lower(), re.DOTALL) is not None


def compare(kind: str, op: str, value: Any, wanted: list[Any]) -> bool:
    if op == "=null=":
        return (value is None) == wanted[0]
    if op in ("!=", "=out="):
        return value is None or not compare(kind, {"!=": "==", "=out=": "=in="}[op], value, wanted)
    if value is None:
        return False
    if kind == "text" and op in ("==", "=in="):
        if op == "=in=":
            return value.lower() in [w.lower() for w in wanted]
        return text_matches(value, wanted[0])
    if op == "=in=":
        return value in wanted
    return {
        "==": value == wanted[0],
        "=lt=": value < wanted[0],
        "=le=": value <= wanted[0],
        "=gt=": value > wanted[0],
        "=ge=": value >= wanted[0],
    }[op]


def evaluate(node: Any, record: dict[str, Any]) -> bool:
    if node[0] == "and":
        return all(evaluate(child, record) for child in node[1])
    if node[0] == "or":
        return any(evaluate(child, record) for child in node[1])
    _, selector, op, raw_values = node
    kind = FIELDS[selector].kind
    wanted = (
        [r.lower() == "true" for r in raw_values]
        if op == "=null="
        else [typed(kind, r) for r in raw_values]
    )
    return any(
        compare(kind, op, typed(kind, value), wanted) for value in values_at(record, selector)
    )


def quote(raw: str) -> str:
    return '"' + raw.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(node: Any) -> str:
    if node[0] in ("and", "or"):
        joiner = ";" if node[0] == "and" else ","
        return "(" + joiner.join(render(child) for child in node[1]) + ")"
    _, selector, op, values = node
    if op in ("=in=", "=out="):
        return f"{selector}{op}({','.join(quote(v) for v in values)})"
    return f"{selector}{op}{quote(values[0])}"


def comparisons(pool: dict[str, list[str]]) -> st.SearchStrategy[Any]:
    @st.composite
    def build(draw: st.DrawFn) -> Any:
        selector = draw(st.sampled_from(SELECTORS))
        kind = FIELDS[selector].kind
        op = draw(st.sampled_from(OPERATORS[kind]))
        if op == "=null=":
            return ("cmp", selector, op, [draw(st.sampled_from(["true", "false"]))])
        candidates = pool[selector] or ["0"]
        value = draw(st.sampled_from(candidates))
        if kind == "text" and op == "==" and draw(st.booleans()) and len(value) > 2:
            cut = draw(st.integers(1, len(value) - 1))
            value = draw(st.sampled_from([value[:cut] + "*", "*" + value[cut:], value.upper()]))
        if op in ("=in=", "=out="):
            return (
                "cmp",
                selector,
                op,
                draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3)),
            )
        return ("cmp", selector, op, [value])

    return build()


def expressions(pool: dict[str, list[str]]) -> st.SearchStrategy[Any]:
    return st.recursive(
        comparisons(pool),
        lambda inner: st.tuples(
            st.sampled_from(["and", "or"]), st.lists(inner, min_size=2, max_size=3)
        ),
        max_leaves=6,
    )


async def seed(api: Api) -> tuple[str, list[dict[str, Any]]]:
    scope = f"diff-{uuid.uuid4().hex[:10]}"
    rng = random.Random(11)
    bodies = [{**fake_unit(rng), "subProjectId": scope} for _ in range(36)]
    bodies += [{"name": f"Bare {i}", "type": "studio", "subProjectId": scope} for i in range(4)]
    bodies.append(
        {
            "name": "CAIRO loft",
            "type": "Loft",
            "city": "cairo",
            "subProjectId": scope,
            "specs": [{"featureTag": None, "active": False}],
            "price": 0,
        }
    )
    records = []
    for body in bodies:
        response = await api.request(
            "POST",
            "/api/v2/units/",
            content=_dumps(body),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 201, response.text
        records.append(json.loads(response.content, parse_float=Decimal))
    return scope, records


def _dumps(body: dict[str, Any]) -> bytes:
    from units_api.http.json import dumps

    return dumps(body)


def value_pool(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    pool: dict[str, list[str]] = {}
    for selector in SELECTORS:
        seen = {
            str(v).lower() if isinstance(v, bool) else str(v)
            for record in records
            for v in values_at(record, selector)
            if v is not None
        }
        pool[selector] = sorted(seen)[:40]
    return pool


async def test_sql_agrees_with_the_reference_evaluator(api: Api) -> None:
    scope, records = await seed(api)
    pool = value_pool(records)
    cases: list[Any] = []

    @settings(
        max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(expression=expressions(pool))
    def collect(expression: Any) -> None:
        cases.append(expression)

    collect()
    matched_some = 0
    for expression in cases:
        text = f"subProjectId=={scope};{render(expression)}"
        response = await api.request(
            "GET", "/api/v2/units/", params={"p": text, "limit": "100", "fields": "id"}
        )
        assert response.status_code == 200, (text, response.text)
        got = {unit["id"] for unit in response.json()["data"]}
        expected = {record["id"] for record in records if evaluate(expression, record)}
        assert got == expected, text
        matched_some += bool(expected) and len(expected) < len(records)
    assert matched_some > len(cases) // 4  # the generated filters really discriminate
