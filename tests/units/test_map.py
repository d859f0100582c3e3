"""Map search on `unitLocation` through the API, on both databases: the three operators, edges,
the antimeridian, units without a location, sorting by distance, every bad input's 400, and
the filter language's other homes (policies, bulk, the query endpoint, webhooks)."""

from __future__ import annotations

import asyncio
import math
import uuid
from typing import Any

import orjson
import pytest

from tests.conftest import Api, start_api
from tests.webhooks.receiver import receiver
from units_api.config import Settings
from units_api.filters import geo
from units_api.filters.parser import MAX_LENGTH

Point = tuple[float, float] | None
CAIRO = (31.2357, 30.0444)
# Metres per degree of latitude on the sphere the contract names.
DEGREE = geo.EARTH_RADIUS * math.pi / 180


def location(point: Point) -> dict[str, Any] | None:
    return None if point is None else {"type": "Point", "coordinates": list(point)}


class Places:
    """Units of one test at labelled points, in a scope of their own."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.scope = f"map-{uuid.uuid4().hex[:12]}"
        self.ids: dict[str, str] = {}

    async def add(self, points: dict[str, Point], **fields: Any) -> None:
        for label, point in points.items():
            body = {"subProjectId": self.scope, "unitLocation": location(point), **fields}
            self.ids[label] = (await self.api.create_unit(name=label, **body))["id"]

    def label(self, unit_id: str) -> str:
        return {v: k for k, v in self.ids.items()}[unit_id]

    async def listed(self, p: str, **params: str) -> list[dict[str, Any]]:
        response = await self.api.request(
            "GET", "/api/v2/units/", params={"p": f"subProjectId=={self.scope};({p})", **params}
        )
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["data"]
        return found

    async def found(self, p: str, **params: str) -> set[str]:
        listed = await self.listed(p, limit="100", **params)
        return {self.label(unit["id"]) for unit in listed}


def box(west: float, south: float, east: float, north: float) -> str:
    return f"unitLocation=within=({west},{south},{east},{north})"


def near(lng: float, lat: float, meters: float) -> str:
    return f"unitLocation=near=({lng},{lat},{meters})"


def inside(*vertices: tuple[float, float]) -> str:
    return "unitLocation=inside=(" + ",".join(f"{x},{y}" for x, y in vertices) + ")"


def east_of(point: tuple[float, float], metres: float) -> tuple[float, float]:
    """A point about `metres` east (rounded to the 7 decimals a client would send)."""
    lng, lat = point
    return (round(lng + metres / (DEGREE * math.cos(math.radians(lat))), 7), lat)


async def test_each_operator_finds_the_units_in_its_shape(api: Api) -> None:
    places = Places(api)
    await places.add(
        {
            "centre": CAIRO,
            "east 500 m": east_of(CAIRO, 500),
            "north 2 km": (CAIRO[0], round(CAIRO[1] + 2000 / DEGREE, 7)),
            "alexandria": (29.9187, 31.2001),
            "nowhere": None,
        }
    )
    assert await places.found(box(31.23, 30.04, 31.25, 30.05)) == {"centre", "east 500 m"}
    assert await places.found(near(*CAIRO, 1000)) == {"centre", "east 500 m"}
    assert await places.found(near(*CAIRO, 2100)) == {"centre", "east 500 m", "north 2 km"}
    assert await places.found(near(*CAIRO, 400_000)) == set(places.ids) - {"nowhere"}
    triangle = inside((31.2, 30.03), (31.3, 30.03), (31.2357, 30.07))
    assert await places.found(triangle) == {"centre", "east 500 m", "north 2 km"}
    assert await places.found("unitLocation=null=true") == {"nowhere"}
    # Combined with other comparisons, negated by OR, and with a search.
    assert await places.found(f"{near(*CAIRO, 2100)};name==north*") == {"north 2 km"}
    assert await places.found(f"{near(*CAIRO, 1000)},name==alexandria") == {
        "centre",
        "east 500 m",
        "alexandria",
    }
    assert await places.found(near(*CAIRO, 2100), q="centre") == {"centre"}


async def test_box_edges_and_corners_are_inside(api: Api) -> None:
    places = Places(api)
    await places.add(
        {
            "south-west corner": (31.0, 30.0),
            "east edge": (31.5, 30.25),
            "north edge": (31.25, 30.5),
            "just east": (31.5000001, 30.25),
            "just north": (31.25, 30.5000001),
        }
    )
    assert await places.found(box(31.0, 30.0, 31.5, 30.5)) == {
        "south-west corner",
        "east edge",
        "north edge",
    }
    assert await places.found(box(31.25, 30.5, 31.25, 30.5)) == {"north edge"}  # a point


async def test_polygon_edges_and_vertices_are_inside(api: Api) -> None:
    places = Places(api)
    await places.add(
        {
            "vertex": (31.0, 30.0),
            "level edge": (31.5, 30.0),
            "sloping edge": (31.3, 30.7),  # on x + y = 62, in decimals
            "sloping midpoint": (31.5, 30.5),
            "inside": (31.2, 30.2),
            "off the slope": (31.3, 30.700001),
            "outside": (32.1, 30.0),
        }
    )
    triangle = inside((31.0, 30.0), (32.0, 30.0), (31.0, 31.0))
    assert await places.found(triangle) == {
        "vertex",
        "level edge",
        "sloping edge",
        "sloping midpoint",
        "inside",
    }
    # Closed implicitly: repeating the first vertex changes nothing.
    closed = inside((31.0, 30.0), (32.0, 30.0), (31.0, 31.0), (31.0, 30.0))
    assert await places.found(closed) == await places.found(triangle)


async def test_a_self_crossing_polygon_follows_the_even_odd_rule(api: Api) -> None:
    places = Places(api)
    star = [
        (math.cos(math.radians(90 + 144 * i)), math.sin(math.radians(90 + 144 * i)))
        for i in range(5)
    ]
    centre = (20.0, 10.0)
    vertices = [(round(centre[0] + x, 6), round(centre[1] + y, 6)) for x, y in star]
    await places.add(
        {
            "centre of the star": centre,  # covered twice: outside
            "in a point of the star": (centre[0], centre[1] + 0.7),
            "between the points": (centre[0] + 0.5, centre[1] + 0.6),
        }
    )
    found = await places.found(inside(*vertices))
    assert found == {"in a point of the star"}
    bowtie = inside((0, 0), (2, 2), (2, 0), (0, 2))
    await places.add({"left lobe": (0.5, 1.0), "between lobes": (1.0, 0.5), "waist": (1.0, 1.0)})
    assert await places.found(bowtie) == {"left lobe", "waist"}


async def test_across_the_antimeridian_and_at_the_poles(api: Api) -> None:
    places = Places(api)
    await places.add(
        {
            "west of it": (179.5, 0.0),
            "east of it": (-179.5, 0.0),
            "on it": (180.0, 10.0),
            "on it too": (-180.0, -10.0),
            "greenwich": (0.0, 0.0),
            "near the pole": (45.0, 89.0),
            "nearer the pole": (-170.0, 88.5),
            "far from the pole": (0.0, 87.0),
        }
    )
    assert await places.found(box(179, -20, -179, 20)) == {
        "west of it",
        "east of it",
        "on it",
        "on it too",
    }
    assert await places.found(near(180, 0, 60_000)) == {"west of it", "east of it"}
    assert await places.found(near(-179.9, 0, 60_000)) == {"east of it"}
    assert await places.found(near(0, 90, 200_000)) == {"near the pole", "nearer the pole"}
    assert await places.found(box(-180, 88, 180, 90)) == {"near the pole", "nearer the pole"}
    # Coordinates too small to matter (their squares would underflow) count as 0.
    assert await places.found(near(0, 1e-300, 1)) == {"greenwich"}
    assert await places.found(inside((-1e-300, -1e-300), (1e-300, 0), (0, 1e-300))) == {"greenwich"}


async def test_a_unit_moved_or_deleted_is_found_where_it_is(api: Api) -> None:
    places = Places(api)
    await places.add({"mover": CAIRO, "stays": CAIRO})
    here, there = near(*CAIRO, 100), near(29.9187, 31.2001, 100)
    mover = f"/api/v2/units/{places.ids['mover']}"
    moved = {"unitLocation": {"coordinates": [29.9187, 31.2001]}}  # merged key by key
    assert (await api.request("PATCH", mover, json=moved)).status_code == 200
    assert (await places.found(here), await places.found(there)) == ({"stays"}, {"mover"})
    assert (await api.request("PATCH", mover, json={"unitLocation": None})).status_code == 200
    assert await places.found(there) == set()
    assert await places.found("unitLocation=null=true") == {"mover"}
    assert (await api.request("DELETE", f"/api/v2/units/{places.ids['stays']}")).status_code == 204
    assert await places.found(here) == set()


async def distances_sorted(places: Places) -> list[tuple[str, float]]:
    """Units at known distances east of Cairo, two of them at the same point."""
    points = {f"{m} m": east_of(CAIRO, m) for m in (700, 100, 300, 500, 200, 600, 400)}
    await places.add({**points, "twin a": east_of(CAIRO, 300), "far": east_of(CAIRO, 5000)})
    expected = [
        (label, geo.distance(geo.circle(*CAIRO, 0), *places_point))
        for label, places_point in {**points, "twin a": east_of(CAIRO, 300)}.items()
    ]
    ids = places.ids
    return sorted(expected, key=lambda item: (item[1], ids[item[0]]))


async def test_sort_by_distance_nearest_first_with_stable_pages(api: Api) -> None:
    places = Places(api)
    expected = await distances_sorted(places)
    p = near(*CAIRO, 1000)
    pages = [await places.listed(p, sortBy="distance", limit="3", page=str(n)) for n in (1, 2, 3)]
    shown = [(places.label(unit["id"]), unit["distanceMeters"]) for page in pages for unit in page]
    assert shown == expected  # ties on id, distances exactly as the evaluator computes them
    assert all(isinstance(unit["distanceMeters"], float) for page in pages for unit in page)
    farthest = await places.listed(p, sortBy="distance", order="desc", limit="100")
    assert [places.label(unit["id"]) for unit in farthest] == [x for x, _ in reversed(expected)]
    projected = await places.listed(p, sortBy="distance", fields="name", limit="2")
    assert projected == [
        {"id": places.ids[label], "name": label, "distanceMeters": metres}
        for label, metres in expected[:2]
    ]
    # Other sorts add nothing to the record.
    assert "distanceMeters" not in (await places.listed(p, limit="1"))[0]


async def walk(api: Api, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every unit a query finds, page by page through its cursor."""
    found: list[dict[str, Any]] = []
    while True:
        response = await api.request("POST", "/api/v2/units/query", json=body)
        assert response.status_code == 200, response.text
        page = response.json()
        found += page["data"]
        if page["nextCursor"] is None:
            return found
        body = {**body, "cursor": page["nextCursor"]}


async def test_the_query_sorts_by_distance_through_its_cursor(api: Api) -> None:
    places = Places(api)
    expected = await distances_sorted(places)
    body: dict[str, Any] = {
        "filter": f"subProjectId=={places.scope};{near(*CAIRO, 1000)}",
        "sort": [{"field": "distance"}],
        "fields": ["name"],
        "limit": 3,
    }
    shown = [(unit["name"], unit["distanceMeters"]) for unit in await walk(api, body)]
    assert shown == expected
    body["sort"] = [{"field": "distance", "order": "desc"}]
    shown = [(unit["name"], unit["distanceMeters"]) for unit in await walk(api, body)]
    assert shown == expected[::-1]
    # Newest first, as without a map search, and nothing added to the records.
    body["sort"] = []
    newest = await walk(api, body)
    created = [label for label in places.ids if label != "far"]
    assert [unit["name"] for unit in newest] == created[::-1]
    assert all(set(unit) == {"id", "name"} for unit in newest)


BAD_FILTERS = [
    ("unitLocation=within=(181,0,10,10)", 1, "longitude"),
    ("unitLocation=within=(0,-91,10,10)", 1, "latitude"),
    ("unitLocation=within=(0,0,10)", 1, "4 numbers"),
    ("unitLocation=within=(0,5,10,1)", 1, "south"),
    ("unitLocation=near=(0,0,0)", 1, "meters"),
    ("unitLocation=near=(0,0,-5)", 1, "meters"),
    (f"unitLocation=near=(0,0,{geo.MAX_METERS + 1})", 1, "meters"),
    ("unitLocation=near=(0,0,Infinity)", 1, "not a number"),
    ("unitLocation=near=(0,0,abc)", 1, "not a number"),
    ("unitLocation=near=(0,0)", 1, "3 numbers"),
    ("unitLocation=near=(-180.5,0,10)", 1, "longitude"),
    ("unitLocation=inside=(0,0,1,1)", 1, "vertices"),
    ("unitLocation=inside=(0,0,1,1,2)", 1, "vertices"),
    ("unitLocation=inside=(0,0,1,1,1,NaN)", 1, "not a number"),
    ("unitLocation=inside=(0,0,1,1,1,95)", 1, "latitude"),
    ("unitLocation=within=(0,0,1e999999999,1)", 1, "longitude"),
    ("unitLocation=near=1", 19, "parentheses"),
    ("price=near=(0,0,10)", 1, "location"),
    ("unitLocation.type=within=(0,0,1,1)", 1, "location"),
    ("unitLocation==5", 1, "takes"),
    ("unitLocation=gt=1", 1, "takes"),
    ("city==Cairo;unitLocation=near=(0,0,0)", 13, "meters"),
]


@pytest.mark.parametrize(("p", "position", "says"), BAD_FILTERS)
async def test_bad_map_filters_are_400s_with_their_position(
    api: Api, p: str, position: int, says: str
) -> None:
    listed = await api.request("GET", "/api/v2/units/", params={"p": p})
    queried = await api.request("POST", "/api/v2/units/query", json={"filter": p})
    for response, parameter in ((listed, "p"), (queried, "filter")):
        assert response.status_code == 400, response.text
        problem = response.json()
        assert (problem["parameter"], problem["position"]) == (parameter, position)
        assert f"position {position}" in problem["detail"] and says in problem["detail"]


def polygon_of(vertices: int) -> str:
    angles = [2 * math.pi * i / vertices for i in range(vertices)]
    ring = [(31.2 + 0.01 * math.cos(a), 30.0 + 0.01 * math.sin(a)) for a in angles]
    return inside(*((round(x, 6), round(y, 6)) for x, y in ring))


async def test_a_polygon_of_the_most_vertices_goes_in_a_body(api: Api) -> None:
    places = Places(api)
    await places.add({"in": (31.2, 30.0), "out": (31.22, 30.0)})
    largest = polygon_of(geo.MAX_VERTICES)
    assert len(largest) < MAX_LENGTH
    body = {"filter": f"subProjectId=={places.scope};{largest}", "fields": ["name"]}
    response = await api.request("POST", "/api/v2/units/query", json=body)
    assert response.status_code == 200, response.text
    assert [unit["name"] for unit in response.json()["data"]] == ["in"]
    body["filter"] = polygon_of(geo.MAX_VERTICES + 1)
    response = await api.request("POST", "/api/v2/units/query", json=body)
    assert response.status_code == 400 and "vertices" in response.json()["detail"]


@pytest.mark.parametrize(
    "p",
    [
        None,
        "city==Cairo",
        f"{near(0, 0, 10)};{near(1, 1, 10)}",  # two
        f"{near(0, 0, 10)},city==Cairo",  # not every match is near it
    ],
)
async def test_distance_needs_exactly_one_near_joined_by_and(api: Api, p: str | None) -> None:
    params = {"sortBy": "distance"} | ({"p": p} if p else {})
    listed = await api.request("GET", "/api/v2/units/", params=params)
    assert listed.status_code == 400 and listed.json()["parameter"] == "sortBy", listed.text
    body = {"sort": [{"field": "distance"}]} | ({"filter": p} if p else {})
    queried = await api.request("POST", "/api/v2/units/query", json=body)
    assert queried.status_code == 400 and queried.json()["parameter"] == "sort", queried.text


async def test_a_key_policy_on_the_map(api: Api) -> None:
    places = Places(api)
    await places.add({"inside": CAIRO, "outside": (29.9187, 31.2001), "nowhere": None})
    policy = f"subProjectId=={places.scope};{box(31.2, 30.0, 31.3, 30.1)}"
    key = await api.create_key("units:read", "units:write", policy=policy)
    response = await api.request("GET", "/api/v2/units/", key=key)
    assert [unit["name"] for unit in response.json()["data"]] == ["inside"]
    outside = {"name": "x", "type": "villa", "subProjectId": places.scope}
    outside["unitLocation"] = location((29.9187, 31.2001))
    response = await api.request("POST", "/api/v2/units/", key=key, json=outside)
    assert response.status_code == 403, response.text
    outside["unitLocation"] = location(CAIRO)
    response = await api.request("POST", "/api/v2/units/", key=key, json=outside)
    assert response.status_code == 201, response.text


async def test_a_bulk_update_by_a_map_filter(api: Api) -> None:
    places = Places(api)
    await places.add({"near": CAIRO, "also near": east_of(CAIRO, 200), "far": (29.9, 31.2)})
    body = {
        "filter": f"subProjectId=={places.scope};{near(*CAIRO, 500)}",
        "patch": {"guaranty": 3},
    }
    response = await api.request("PUT", "/api/v2/units/bulk/update", json=body)
    assert response.status_code == 200, response.text
    assert (response.json()["matched"], response.json()["updated"]) == (2, 2)
    assert await places.found("guaranty==3") == {"near", "also near"}


async def test_an_export_by_map_filters(api: Api) -> None:
    places = Places(api)
    await places.add({"centre": CAIRO, "east": east_of(CAIRO, 300), "far": (29.9, 31.2)})
    triangle = inside((31.2, 30.03), (31.3, 30.03), (31.2357, 30.07))
    body = {
        "format": "jsonl",
        "filter": f"subProjectId=={places.scope};{triangle};{near(*CAIRO, 100)}",
    }
    created = await api.request("POST", "/api/v2/units/exports", json=body)
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    for _ in range(300):
        job = (await api.request("GET", f"/api/v2/units/exports/{job_id}")).json()
        if job["status"] in ("succeeded", "failed"):
            break
        await asyncio.sleep(0.1)
    assert job["status"] == "succeeded" and job["rowCount"] == 1, job
    content = await api.request("GET", f"/api/v2/units/exports/{job_id}/file")
    assert orjson.loads(content.content)["name"] == "centre"


async def test_a_webhook_filter_on_the_map(database_url: str, files_dir: str) -> None:
    settings = Settings(
        database_url=database_url,
        files_dir=files_dir,
        access_log=False,
        db_pool_size=5,
        webhook_allow_private=True,
        webhook_poll_seconds=0.1,
    )
    async for api in start_api(settings):
        await only_units_on_the_map_are_sent(api)


async def only_units_on_the_map_are_sent(api: Api) -> None:
    places = Places(api)
    async with receiver() as target:
        hook = {"url": target.url, "eventTypes": ["unit.created"]}
        hook["filter"] = f"subProjectId=={places.scope};{near(*CAIRO, 1000)}"
        created = await api.request("POST", "/api/v2/webhooks", json=hook)
        assert created.status_code == 201, created.text
        try:
            await places.add({"far": (29.9, 31.2), "nowhere": None, "near": CAIRO})
            await target.wait_for(lambda got: bool(target.of(places.ids["near"])))
            assert target.of(places.ids["far"]) == target.of(places.ids["nowhere"]) == []
        finally:
            await api.request("DELETE", f"/api/v2/webhooks/{created.json()['id']}")
        hook["filter"] = near(*CAIRO, 0)
        refused = await api.request("POST", "/api/v2/webhooks", json=hook)
        assert refused.status_code == 422, refused.text
