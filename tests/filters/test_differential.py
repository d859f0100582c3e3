"""Random filters judged by SQL on both databases and by `filters.evaluate`: they must agree.

Each run seeds units of its own: realistic bilingual ones in several publishing and
availability states, bare ones (nulls, empty arrays), and edge cases (wildcard characters in
text, Arabic, decimals that binary floats round). Filters are drawn from the values those
units hold, then bent: wildcards, other letter case, other spellings of a number, the same
instant at another offset, neighbouring values.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Api
from tests.filters.scoped_units import (
    Document,
    change_availability,
    create_scope,
    documents,
    evaluated_matches,
    later,
    publish,
    sql_matches,
)
from units_api.filters.fields import Field
from units_api.sample_data import fake_unit
from units_api.units.filtering import UNIT_CATALOGUE

SELECTORS = [
    "name",
    "type",
    "city",
    "location",
    "priceBase",
    "unitNameAr",
    "unitShortDesc",
    "price",
    "surface",
    "guaranty",
    "startingPrice",
    "maxPrice",
    "expense.value",
    "expense.name",
    "unitLocation.type",
    "floorsPlan.rooms",
    "floorsPlan.view",
    "floorsPlan.area",
    "specs.featureTag",
    "specs.featureNumber",
    "specs.active",
    "paymentPlans.downPayment",
    "paymentPlans.default",
    "readings.service",
    "readings.readingDate",
    "options.price",
    "gallery",
    "status",
    "availability",
    "channel",
    "createdAt",
    "updatedAt",
    "version",
    "id",
]
Pool = dict[str, list[str]]  # selector: values to draw from
ORDERING = ["=lt=", "=le=", "=gt=", "=ge="]
OPERATORS = ["==", "!=", "=in=", "=out=", "=null=", *ORDERING]

EDGE_UNITS: list[dict[str, Any]] = [
    {
        "name": "50% off_deal.v2",
        "type": "Loft",
        "city": "cairo",
        "unitNameAr": "شقّة فاخرة",
        "price": Decimal("0.3"),
        "surface": Decimal("0.1"),
        "expense": {"name": None, "value": Decimal("0.30000000000000004")},
        "specs": [{"featureTag": None, "active": False}, {"featureTag": "POOL", "active": True}],
        "paymentPlans": [{"downPayment": Decimal("0.1")}, {"downPayment": None, "default": True}],
        "unitImageUrl": "https://cdn.example.com/u/edge.jpg",
    },
    {
        "name": "500 off deal",
        "type": "loft",
        "city": "CAIRO",
        "unitNameAr": "شقة",
        "price": Decimal("0.30"),
        "surface": Decimal("0.2"),
        "expense": {"name": "Maintenance", "value": 0},
        "specs": [{"featureTag": "pool", "featureNumber": 3}],
        "floorsPlan": [{"rooms": 0, "view": "Sea", "area": Decimal("1234567.89")}],
    },
    {
        "name": "CAIRO loft",
        "type": "Loft",
        "city": "cairo",
        "specs": [{"featureTag": None, "active": False}],
        "price": 0,
    },
    {"name": "a*b [x] (y) 100%", "type": "studio", "unitShortDesc": "line one\nline two"},
    {"name": "فيلا Villa", "type": "فيلا", "unitNameAr": "فيلا بحديقة", "maxPrice": 1},
    *({"name": f"Bare {i}", "type": "studio"} for i in range(3)),
]


async def seed(api: Api) -> tuple[str, list[Document]]:
    rng = random.Random(11)
    bodies = [fake_unit(rng) for _ in range(30)] + EDGE_UNITS
    scope, ids = await create_scope(api, bodies)
    await publish(api, ids[0], action="publish", channels=["website"])
    await publish(api, ids[1], action="publish", channels=["Website", "mobile-app"])
    await publish(api, ids[2], action="schedule", at=later(), channels=["partner_portal"])
    await publish(api, ids[3], action="archive")
    await publish(api, ids[30], action="publish")
    await change_availability(api, ids[4], action="reserve", until=later())
    await change_availability(api, ids[5], action="sell")
    await change_availability(api, ids[6], action="block")
    return scope, await documents(api, scope)


def reach(doc: Document, field: Field) -> list[Any]:
    """Every value a field reaches in a document (one for a scalar, each element's)."""
    if field.array is None:
        return [_walk(doc, field.path)]
    return [_walk(element, field.path) for element in _walk(doc, field.array) or []]


def _walk(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def value_pool(docs: list[Document]) -> Pool:
    pool: Pool = {}
    for selector in SELECTORS:
        seen = {
            str(value).lower() if isinstance(value, bool) else str(value)
            for doc in docs
            for value in reach(doc, UNIT_CATALOGUE.fields[selector])
            if value is not None
        }
        pool[selector] = sorted(seen) or ["0"]
    return pool


def pools(docs: list[Document]) -> tuple[Pool, Pool]:
    """The values of every unit, and those of the edge cases (drawn half of the time)."""
    edge_names = {body["name"] for body in EDGE_UNITS}
    return value_pool(docs), value_pool([doc for doc in docs if doc["name"] in edge_names])


def bend(draw: st.DrawFn, kind: str, op: str, value: str) -> str:
    """Another way to write the value, or a value next to it."""
    if kind == "text":
        if op in ("==", "!=") and len(value) > 2 and draw(st.booleans()):
            cut = draw(st.integers(1, len(value) - 1))
            return draw(
                st.sampled_from(
                    [value[:cut] + "*", "*" + value[cut:], f"*{value[1:cut]}*", value.upper()]
                )
            )
        return value
    if kind in ("number", "integer"):
        number = Decimal(value)
        step = Decimal(draw(st.sampled_from(["0", "0", "1", "-1", "0.01", "-0.01"])))
        shifted = number + (step if kind == "number" else step.to_integral_value())
        padded = f"{shifted}0" if "." in str(shifted) else f"{shifted}.0"
        return draw(st.sampled_from([str(shifted), f"{shifted:E}", padded]))
    if kind == "time":
        instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
        instant += timedelta(milliseconds=draw(st.sampled_from([0, 0, 1, -1])))
        offset = timezone(timedelta(minutes=draw(st.sampled_from([0, 120, -300, 330]))))
        return instant.astimezone(offset).isoformat()
    if kind == "uuid":
        return draw(st.sampled_from([value, value.upper()]))
    return draw(st.sampled_from([value, value.upper()]))


def comparisons(pool: Pool, edges: Pool) -> st.SearchStrategy[Any]:
    @st.composite
    def build(draw: st.DrawFn) -> Any:
        selector = draw(st.sampled_from(SELECTORS))
        kind = UNIT_CATALOGUE.fields[selector].kind
        op = draw(st.sampled_from(OPERATORS))
        if op == "=null=":
            return ("cmp", selector, op, [draw(st.sampled_from(["true", "false"]))])
        candidates = st.sampled_from(pool[selector]) | st.sampled_from(edges[selector])
        if op in ("=in=", "=out="):
            values = draw(st.lists(candidates, min_size=1, max_size=3))
            return ("cmp", selector, op, [bend(draw, kind, op, value) for value in values])
        return ("cmp", selector, op, [bend(draw, kind, op, draw(candidates))])

    return build()


def expressions(pool: Pool, edges: Pool) -> st.SearchStrategy[Any]:
    return st.recursive(
        comparisons(pool, edges),
        lambda inner: st.tuples(
            st.sampled_from(["and", "or"]), st.lists(inner, min_size=2, max_size=3)
        ),
        max_leaves=6,
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


def draw_filters(pools: tuple[Pool, Pool], count: int) -> list[str]:
    drawn: list[str] = []

    @settings(
        max_examples=count, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(expression=expressions(*pools))
    def collect(expression: Any) -> None:
        drawn.append(render(expression))

    collect()
    return drawn


async def test_the_evaluator_agrees_with_sql(api: Api) -> None:
    scope, docs = await seed(api)
    assert len(docs) == 38
    discriminating = 0
    filters = draw_filters(pools(docs), 200)
    for text in filters:
        expected = evaluated_matches(docs, text)
        assert await sql_matches(api, scope, text) == expected, text
        discriminating += 0 < len(expected) < len(docs)
    assert discriminating > len(filters) // 4  # the drawn filters really tell units apart
