"""The dashboards' copy (units/dashboards.py): its answers are the database's own GROUP BY's,
it holds every write made before a question, it keeps a key's policy, and the database
answers whatever it cannot."""

from __future__ import annotations

import json
import math
import random
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text

from tests.conftest import Api, fresh_postgres, start_api
from units_api.config import Settings
from units_api.migrate import upgrade
from units_api.units.dashboard_sql import COPIED
from units_api.units.dashboards import Dashboards, available
from units_api.units.tables import units

CITIES = ["Cairo", "cairo", "Dubai", "Riyadh", None]
TYPES = ["villa", "apartment", "Chalet"]
GROUPS = ["city", "type", "subProjectId", "status", "availability", "bedrooms"]
COLUMNS = COPIED  # the copy's fields, by the units table's column names


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def own_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A database of this module's own: a unit whose amount the copy cannot hold exactly
    (another module's) would leave every question on that amount to the database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('dashboards') / 'units.db'}"
        upgrade(url)
        yield url
        return
    with fresh_postgres("units_dashboards") as url:
        upgrade(url)
        yield url


@pytest.fixture
async def copied(own_database: str, files_dir: str) -> AsyncIterator[Api]:
    """The app with its copy loaded, every aggregate computed (none remembered)."""
    settings = Settings(
        database_url=own_database,
        access_log=False,
        db_pool_size=5,
        files_dir=files_dir,
        result_cache_bytes=0,
        dashboards_copy=True,
    )
    async for instance in start_api(settings):
        assert instance.context.dashboards is not None
        await instance.context.dashboards.wait_ready()
        yield instance


def copy_of(api: Api) -> Dashboards:
    dashboards = api.context.dashboards
    assert dashboards is not None
    return dashboards


async def ask(api: Api, body: dict[str, Any], key: str | None = None) -> list[dict[str, Any]]:
    response = await api.request("POST", "/api/v2/units/query", json=body, key=key)
    assert response.status_code == 200, response.text
    rows: list[dict[str, Any]] = json.loads(response.text, parse_float=Decimal)["data"]
    return rows


def amount(rng: random.Random) -> Decimal | None:
    if rng.random() < 0.15:
        return None
    return Decimal(rng.randrange(0, 10**9)) / 10 ** rng.choice([0, 1, 2])


async def populate(api: Api, rng: random.Random, count: int) -> str:
    scope = f"d-{uuid.uuid4().hex[:10]}"
    for _ in range(count):
        unit = await api.create_unit(
            city=rng.choice(CITIES),
            type=rng.choice(TYPES),
            subProjectId=scope,
            bedrooms=rng.choice([None, 1, 2, 3, 4]),
            price=amount(rng),
            surface=amount(rng),
        )
        action = rng.choice([None, None, "sell", "block"])
        if action:
            path = f"/api/v2/units/availability-actions/{unit['id']}"
            assert (await api.request("PUT", path, json={"action": action})).status_code == 200
        if rng.random() < 0.2:
            path = f"/api/v2/units/publishing-actions/{unit['id']}"
            assert (await api.request("PUT", path, json={"action": "archive"})).status_code == 200
    return scope


# Random filters, each as RSQL and as the plain SQL it means (filters/sql.py's rules).
def random_filter(rng: random.Random) -> tuple[str, str]:
    bound = rng.randrange(0, 10**9)
    choices = [
        (f"price=ge={bound}", f"(price >= {bound})"),
        (f"surface=lt={bound}.5", f"(surface < {bound}.5)"),
        ("city==cairo", "(lower(city) = 'cairo')"),
        ("city==Dub*", "(lower(city) LIKE 'dub%')"),
        ("city!=Riyadh", "(city IS NULL OR lower(city) <> 'riyadh')"),
        ("type=in=(villa,CHALET)", "(lower(type) IN ('villa', 'chalet'))"),
        ("type=out=(villa)", "(type IS NULL OR lower(type) NOT IN ('villa'))"),
        ("bedrooms=in=(1,2)", "(bedrooms IN (1, 2))"),
        ("bedrooms=gt=2", "(bedrooms > 2)"),
        ("bedrooms=null=true", "(bedrooms IS NULL)"),
        ("availability!=sold", "(availability_status <> 'sold')"),
        ("status==archived", "(publishing_status = 'archived')"),
        ("price=null=false", "(price IS NOT NULL)"),
    ]
    first, second = rng.sample(choices, 2)
    if rng.random() < 0.5:
        return first
    joiner, word = rng.choice([(";", "AND"), (",", "OR")])
    return f"({first[0]}{joiner}{second[0]})", f"({first[1]} {word} {second[1]})"


def random_question(rng: random.Random, scope: str) -> tuple[dict[str, Any], str]:
    groups = rng.sample(GROUPS, rng.choice([0, 1, 1, 2]))
    aggregates: dict[str, dict[str, Any]] = {"n": {"fn": "count"}}
    for i in range(rng.randrange(1, 4)):
        fn = rng.choice(["count", "sum", "avg", "min", "max", "countDistinct"])
        aggregates[f"a{i}"] = {"fn": fn, "field": rng.choice(["price", "surface"])}
    if rng.random() < 0.3:
        aggregates["b"] = {"fn": rng.choice(["min", "max", "countDistinct"]), "field": "city"}
    rsql, sql = random_filter(rng)
    body = {"groupBy": groups, "aggregates": aggregates, "filter": f"subProjectId=={scope};{rsql}"}
    return body, f"sub_project_id = '{scope}' AND {sql}"


_SQL_FUNCTIONS = {"count": "count({})", "countDistinct": "count(DISTINCT {})"}


async def plain_group_by(api: Api, body: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """The question as a plain GROUP BY on the database."""
    groups = [COLUMNS[field] for field in body["groupBy"]]
    measures = []
    for spec in body["aggregates"].values():
        column = COLUMNS.get(spec.get("field") or "", "*")
        measures.append(_SQL_FUNCTIONS.get(spec["fn"], spec["fn"] + "({})").format(column))
    sql = f"SELECT {', '.join([*groups, *measures])} FROM units WHERE {where}"
    if groups:
        ordered = ", ".join(f"{column} ASC NULLS LAST" for column in groups)
        sql += f" GROUP BY {', '.join(groups)} ORDER BY {ordered}"
    async with api.context.db.read() as conn:
        rows = (await conn.execute(text(sql))).all()
    names = [*body["groupBy"], *body["aggregates"]]
    return [dict(zip(names, row, strict=True)) for row in rows]


def same(dialect: str, fn: str | None, got: Any, expected: Any) -> bool:
    if expected is None or got is None:
        return got is expected
    if fn == "avg" or (dialect == "sqlite" and fn == "sum" and isinstance(expected, float)):
        # avg as the API writes it (a double); SQLite sums its doubles, the copy exactly
        return math.isclose(float(got), float(expected), rel_tol=1e-12)
    if isinstance(expected, float):  # SQLite's REAL: the shortest decimal of the double
        return Decimal(str(got)) == Decimal(repr(expected))
    if isinstance(expected, Decimal):
        return Decimal(str(got)) == expected  # exact, whatever the trailing zeros
    return bool(got == expected)


async def test_answers_are_the_databases_group_by(copied: Api) -> None:
    rng = random.Random(34)
    scope = await populate(copied, rng, 40)
    dialect = copied.context.db.dialect
    before = copy_of(copied).answered
    for _ in range(60):
        body, where = random_question(rng, scope)
        got = await ask(copied, body)
        expected = await plain_group_by(copied, body, where)
        assert len(got) == len(expected), body
        functions = {name: spec["fn"] for name, spec in body["aggregates"].items()}
        for got_row, expected_row in zip(got, expected, strict=True):
            assert list(got_row) == list(expected_row), body
            for name, value in expected_row.items():
                assert same(dialect, functions.get(name), got_row[name], value), (body, name)
    assert copy_of(copied).answered == before + 60  # none was left to the database


async def test_a_write_is_in_the_next_answer(copied: Api) -> None:
    scope = f"d-{uuid.uuid4().hex[:10]}"
    body = {
        "filter": f"subProjectId=={scope}",
        "groupBy": ["city"],
        "aggregates": {"n": {"fn": "count"}, "total": {"fn": "sum", "field": "price"}},
    }
    assert await ask(copied, body) == []
    first = await copied.create_unit(subProjectId=scope, city="Cairo", price=100.25)
    await copied.create_unit(subProjectId=scope, city="Cairo", price=200)
    assert await ask(copied, body) == [{"city": "Cairo", "n": 2, "total": Decimal("300.25")}]
    path = f"/api/v2/units/{first['id']}"
    moved = await copied.request("PATCH", path, json={"city": "Dubai", "price": 7})
    assert moved.status_code == 200, moved.text
    assert await ask(copied, body) == [
        {"city": "Cairo", "n": 1, "total": 200},
        {"city": "Dubai", "n": 1, "total": 7},
    ]
    assert (await copied.request("DELETE", path)).status_code == 204
    assert await ask(copied, body) == [{"city": "Cairo", "n": 1, "total": 200}]
    assert copy_of(copied).answered >= 4


async def test_a_policy_is_kept(copied: Api) -> None:
    scope = f"d-{uuid.uuid4().hex[:10]}"
    for city, price in [("Cairo", 10), ("Dubai", 20), ("Dubai", 30), ("Cairo", 5)]:
        await copied.create_unit(subProjectId=scope, city=city, price=price, name=f"n{price}")
    body = {
        "filter": f"subProjectId=={scope}",
        "groupBy": ["city"],
        "aggregates": {"n": {"fn": "count"}, "top": {"fn": "max", "field": "price"}},
    }
    dubai = await copied.create_key("units:read", policy="city==dubai")
    before = copy_of(copied).answered
    assert await ask(copied, body, dubai) == [{"city": "Dubai", "n": 2, "top": 30}]
    assert copy_of(copied).answered == before + 1
    # A policy on a field the copy does not hold: the database answers, the policy kept.
    named = await copied.create_key("units:read", policy="name=in=(n5,n20)")
    assert await ask(copied, body, named) == [
        {"city": "Cairo", "n": 1, "top": 5},
        {"city": "Dubai", "n": 1, "top": 20},
    ]
    assert copy_of(copied).answered == before + 1


@pytest.mark.parametrize(
    ("extra", "aggregates"),
    [
        ({"filter": "name==x*"}, {"n": {"fn": "count"}}),  # a field the copy does not hold
        ({"filter": "city==Caïro"}, {"n": {"fn": "count"}}),  # text beyond ASCII
        ({"q": "villa"}, {"n": {"fn": "count"}}),  # a search
        ({}, {"n": {"fn": "max", "field": "updatedAt"}}),  # a measure it does not hold
        ({"groupBy": ["name"]}, {"n": {"fn": "count"}}),
    ],
)
async def test_what_the_copy_cannot_say_the_database_answers(
    copied: Api, extra: dict[str, Any], aggregates: dict[str, Any]
) -> None:
    scope = f"d-{uuid.uuid4().hex[:10]}"
    await copied.create_unit(subProjectId=scope, city="Caïro", name="x1 villa", price=1)
    body = {"aggregates": aggregates, **extra}
    body["filter"] = f"subProjectId=={scope}" + (f";{extra['filter']}" if "filter" in extra else "")
    before = copy_of(copied).answered
    rows = await ask(copied, body)
    assert copy_of(copied).answered == before
    assert len(rows) == 1


async def test_amounts_beyond_two_places_are_left_to_the_database(copied: Api) -> None:
    scope = f"d-{uuid.uuid4().hex[:10]}"
    odd = await copied.create_unit(subProjectId=scope, price=Decimal("10.125"), surface=3)
    await copied.create_unit(subProjectId=scope, price=1, surface=4)
    body = {
        "filter": f"subProjectId=={scope}",
        "aggregates": {"s": {"fn": "sum", "field": "price"}},
    }
    before = copy_of(copied).answered
    got = await ask(copied, body)
    assert Decimal(str(got[0]["s"])) == Decimal("11.125")
    assert copy_of(copied).answered == before  # the price is odd: the database's
    surfaces = {**body, "aggregates": {"s": {"fn": "sum", "field": "surface"}}}
    assert await ask(copied, surfaces) == [{"s": 7}]
    assert copy_of(copied).answered == before + 1  # surfaces are all held exactly
    path = f"/api/v2/units/{odd['id']}"
    assert (await copied.request("PATCH", path, json={"price": 10.5})).status_code == 200
    assert await ask(copied, body) == [{"s": Decimal("11.5")}]
    assert copy_of(copied).answered == before + 2  # every price held exactly again


async def test_without_the_extra_the_database_answers(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # an import of it fails
    assert not available()
    async for api in start_api(settings.model_copy(update={"dashboards_copy": True})):
        assert api.context.dashboards is None
        scope = f"d-{uuid.uuid4().hex[:10]}"
        await api.create_unit(subProjectId=scope, city="Cairo", price=3)
        body = {"filter": f"subProjectId=={scope}", "aggregates": {"n": {"fn": "count"}}}
        assert await ask(api, body) == [{"n": 1}]


async def test_a_copy_turned_off_is_not_loaded(settings: Settings) -> None:
    async for api in start_api(settings.model_copy(update={"dashboards_copy": False})):
        assert api.context.dashboards is None


async def test_a_write_no_event_tells_of_has_the_copy_loaded_again(copied: Api) -> None:
    scope = f"d-{uuid.uuid4().hex[:10]}"
    await copied.create_unit(subProjectId=scope, city="Cairo", price=10)
    body = {
        "filter": f"subProjectId=={scope}",
        "aggregates": {"s": {"fn": "sum", "field": "price"}},
    }
    assert await ask(copied, body) == [{"s": 10}]
    async with copied.context.db.transaction() as conn:  # a writer outside the service
        await conn.execute(units.update().where(units.c.sub_project_id == scope).values(price=4))
    assert await ask(copied, body) == [{"s": 4}]  # the database's, while the copy reloads
    await copy_of(copied).wait_ready()
    before = copy_of(copied).answered
    assert await ask(copied, {**body, "limit": 99}) == [{"s": 4}]
    assert copy_of(copied).answered == before + 1
