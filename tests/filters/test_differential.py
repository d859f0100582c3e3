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
from units_api.filters import geo
from units_api.filters.fields import Field
from units_api.sample_data import fake_unit
from units_api.units.filtering import UNIT_CATALOGUE
from units_api.units.tables import LISTING_COLUMNS

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
    *LISTING_COLUMNS,
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
    {"name": "Rented studio", "type": "studio", "currency": "AED", "country": "AE", "bedrooms": 0},
    {"name": "Handed over", "type": "villa", "completionStatus": "ready", "offeringType": "rent"},
    {"name": "فيلا Villa", "type": "فيلا", "unitNameAr": "فيلا بحديقة", "maxPrice": 1},
    *({"name": f"Bare {i}", "type": "studio"} for i in range(3)),
]


async def seed(api: Api) -> tuple[str, list[Document]]:
    rng = random.Random(11)
    bodies = [fake_unit(rng) for _ in range(30)] + EDGE_UNITS
    scope, ids = await create_scope(api, bodies)
    for name in ("site", "mobile-app", "partner-portal"):
        await api.add_channel(name)
    await publish(api, ids[0], action="publish", channels=["site"])
    await publish(api, ids[1], action="publish", channels=["site", "mobile-app"])
    await publish(api, ids[2], action="schedule", at=later(), channels=["partner-portal"])
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
    if op in ("=in=", "=out=", "=within=", "=near=", "=inside="):
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
    assert len(docs) == 40
    discriminating = 0
    filters = draw_filters(pools(docs), 200)
    for text in filters:
        expected = evaluated_matches(docs, text)
        assert await sql_matches(api, scope, text) == expected, text
        discriminating += 0 < len(expected) < len(docs)
    assert discriminating > len(filters) // 4  # the drawn filters really tell units apart


# --- Map search ---------------------------------------------------------------------------

MAP_EDGE_POINTS: list[tuple[str, str] | None] = [
    ("180", "0"),
    ("-180", "0"),
    ("179.999999", "0.5"),
    ("-179.999999", "-0.5"),
    ("179.5", "-0.25"),
    ("0", "90"),
    ("0", "-90"),
    ("45", "89.9"),
    ("-135", "89.95"),
    ("0", "0"),
    ("-0.000001", "0"),
    ("1E-20", "5"),  # the smallest a record holds (20 decimals)
    ("31.2357", "30.0444"),  # a city centre of the seed
    ("31", "30"),
    ("31.5", "30.5"),
    ("31.25", "30.25"),
    ("31.3", "30.7"),
    None,
]


async def seed_map(api: Api) -> tuple[str, list[Document]]:
    rng = random.Random(17)
    bodies = [fake_unit(rng) for _ in range(20)]
    for point in MAP_EDGE_POINTS:
        body = {"name": f"At {point}", "type": "studio"}
        if point is not None:
            body["unitLocation"] = {"type": "Point", "coordinates": [Decimal(v) for v in point]}
        bodies.append(body)
    bodies.append({"name": "Without coordinates", "type": "studio", "unitLocation": None})
    scope, _ = await create_scope(api, bodies)
    return scope, await documents(api, scope)


def map_points(docs: list[Document]) -> list[tuple[Decimal, Decimal]]:
    return sorted(
        {
            (Decimal(lng), Decimal(lat))
            for doc in docs
            if doc["unitLocation"] is not None
            for lng, lat in [doc["unitLocation"]["coordinates"]]
        }
    )


def map_comparisons(points: list[tuple[Decimal, Decimal]]) -> st.SearchStrategy[Any]:
    """Shapes drawn through the units' own points: box edges, circle rims and polygon
    vertices and edges (midpoints) that units lie on, and shapes moved a little off them."""
    point = st.sampled_from(points)
    nudge = st.sampled_from([Decimal(0), Decimal(0), Decimal("1E-6"), Decimal("-1E-6")])

    def lng(value: Decimal) -> str:
        return str(min(max(value, Decimal(-180)), Decimal(180)))

    def lat(value: Decimal) -> str:
        return str(min(max(value, Decimal(-90)), Decimal(90)))

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        op = draw(st.sampled_from(["=within=", "=near=", "=inside=", "=null="]))
        if op == "=null=":
            return ("cmp", "unitLocation", op, [draw(st.sampled_from(["true", "false"]))])
        if op == "=within=":
            (x1, y1), (x2, y2) = draw(point), draw(point)
            south, north = sorted([y1 + draw(nudge), y2 + draw(nudge)])
            return ("cmp", "unitLocation", op, [lng(x1), lat(south), lng(x2), lat(north)])
        if op == "=near=":
            (x, y), rim = draw(point), draw(point)
            centre = geo.circle(geo.coordinate(x), geo.coordinate(y), 0)
            exact = geo.distance(centre, geo.coordinate(rim[0]), geo.coordinate(rim[1]))
            meters = draw(st.sampled_from([exact, exact, exact * 1.000001, 1000.0, 60000.0]))
            meters = min(max(meters, 1.0), geo.MAX_METERS)
            return ("cmp", "unitLocation", op, [lng(x + draw(nudge)), lat(y), repr(meters)])
        corners = draw(st.lists(point, min_size=2, max_size=5))
        (x1, y1), (x2, y2) = corners[0], corners[1]
        vertices = [*corners, ((x1 + x2) / 2, (y1 + y2) / 2 + draw(nudge))]
        values = [text for x, y in vertices for text in (lng(x), lat(y))]
        return ("cmp", "unitLocation", op, values)

    return build()


def draw_map_filters(points: list[tuple[Decimal, Decimal]], count: int) -> list[str]:
    drawn: list[str] = []
    expressions = st.recursive(
        map_comparisons(points),
        lambda inner: st.tuples(
            st.sampled_from(["and", "or"]), st.lists(inner, min_size=2, max_size=3)
        ),
        max_leaves=3,
    )

    @settings(
        max_examples=count, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(expression=expressions)
    def collect(expression: Any) -> None:
        drawn.append(render(expression))

    collect()
    return drawn


async def test_the_evaluator_agrees_with_sql_on_the_map(api: Api) -> None:
    scope, docs = await seed_map(api)
    assert len(docs) == 20 + len(MAP_EDGE_POINTS) + 1
    discriminating = 0
    filters = draw_map_filters(map_points(docs), 200)
    for text in filters:
        expected = evaluated_matches(docs, text)
        assert await sql_matches(api, scope, text) == expected, text
        discriminating += 0 < len(expected) < len(docs)
    assert discriminating > len(filters) // 4
