"""Pages of a map search nearest first (`sortBy=distance`), on both databases: every page, for
several page sizes, is the circle's units sorted here by their exact distance, then id;
units sharing a point included, with other conditions beside the circle (another field, a key's
policy), and a circle of a centimetre. On PostgreSQL the page's units are first bounded by a walk
of the point index nearest first (`filters.sql.nearest_first`); these pages hold it to the
exact order."""

from __future__ import annotations

import random
import uuid
from typing import Any

from tests.conftest import Api
from units_api.filters import geo

CENTRE = (31.2357, 30.0444)


def _points(count: int) -> list[tuple[float, float]]:
    """Points scattered about the centre (some outside 1 km), every fifth one shared by the
    unit before it: ties in distance, broken by id."""
    chance = random.Random(7)
    points: list[tuple[float, float]] = []
    for i in range(count):
        if i % 5 == 4:
            points.append(points[-1])
            continue
        points.append(
            (CENTRE[0] + chance.uniform(-0.012, 0.012), CENTRE[1] + chance.uniform(-0.012, 0.012))
        )
    return points


class Scope:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.name = f"nearest-{uuid.uuid4().hex[:12]}"
        self.units: list[dict[str, Any]] = []

    async def add(self, count: int) -> None:
        for i, (lng, lat) in enumerate(_points(count)):
            unit = await self.api.create_unit(
                subProjectId=self.name,
                type="villa" if i % 3 else "apartment",
                unitLocation={"type": "Point", "coordinates": [lng, lat]},
            )
            self.units.append(unit)

    def expected(self, meters: float, villas: bool = False) -> list[tuple[str, float]]:
        """The units within `meters` of the centre, nearest first, then by id."""
        centre = geo.circle(*CENTRE, 0)
        found = []
        for unit in self.units:
            if villas and unit["type"] != "villa":
                continue
            at = geo.distance(centre, *unit["unitLocation"]["coordinates"])
            if at <= meters:
                found.append((unit["id"], at))
        return sorted(found, key=lambda item: (item[1], item[0]))

    async def walk(self, p: str, limit: int, key: str | None = None) -> list[tuple[str, float]]:
        found: list[tuple[str, float]] = []
        for page in range(1, 200):
            params = {
                "p": f"subProjectId=={self.name};{p}",
                "sortBy": "distance",
                "limit": str(limit),
                "page": str(page),
            }
            response = await self.api.request("GET", "/api/v2/units/", params=params, key=key)
            assert response.status_code == 200, response.text
            units = response.json()["data"]
            found += [(unit["id"], unit["distanceMeters"]) for unit in units]
            if len(units) < limit:
                return found
        raise AssertionError("too many pages")


def near(meters: float) -> str:
    return f"unitLocation=near=({CENTRE[0]},{CENTRE[1]},{meters})"


async def test_nearest_first_pages_are_the_exact_order(api: Api) -> None:
    scope = Scope(api)
    await scope.add(60)
    for meters in (1000, 400, 3000):
        expected = scope.expected(meters)
        assert 3 <= len(expected) < 60 or (meters == 3000 and len(expected) == 60), meters
        for limit in (1, 4, 9, 100):
            assert await scope.walk(near(meters), limit) == expected, (meters, limit)
    villas = scope.expected(1000, villas=True)
    assert villas and len(villas) < len(scope.expected(1000))
    for limit in (2, 7):
        assert await scope.walk(f"{near(1000)};type==villa", limit) == villas
        assert await scope.walk(f"type==villa;{near(1000)}", limit) == villas


async def test_nearest_first_under_a_policy_and_in_a_tiny_circle(api: Api) -> None:
    scope = Scope(api)
    await scope.add(30)
    key = await api.create_key("units:read", policy="type==villa")
    villas = scope.expected(2000, villas=True)
    assert villas
    for limit in (1, 5):
        assert await scope.walk(near(2000), limit, key=key) == villas
    # A circle of a centimetre finds the units at its very point: here the two sharing one.
    lng, lat = scope.units[3]["unitLocation"]["coordinates"]
    at_point = sorted(unit["id"] for unit in scope.units[3:5])
    assert scope.units[4]["unitLocation"]["coordinates"] == [lng, lat]
    found = await scope.walk(f"unitLocation=near=({lng},{lat},0.01)", 1)
    assert found == [(unit_id, 0.0) for unit_id in at_point]
