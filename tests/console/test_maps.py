"""The units page's map: points inside its frame in Web Mercator, tiles only when the operator
set a tile server (and then allowed by the page's Content-Security-Policy)."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import Api, start_api
from tests.console.test_pages import sign_in
from units_api.config import Settings
from units_api.console.maps import TILE, Point, frame, world

TILES = "https://tiles.example.com/{z}/{x}/{y}.png"
coordinates = st.tuples(
    st.floats(min_value=-179, max_value=179), st.floats(min_value=-80, max_value=80)
)


def inverse(x: float, y: float, zoom: int) -> tuple[float, float]:
    """The page script's formulas (console.js), from the map's pixels back to degrees."""
    size = TILE * 2**zoom
    lat = math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * y / size))))
    return x / size * 360 - 180, lat


@given(st.lists(coordinates, min_size=1, max_size=20))
def test_every_point_is_inside_the_frame_and_reads_back(places: list[tuple[float, float]]) -> None:
    points = [Point({"id": str(n)}, lng, lat) for n, (lng, lat) in enumerate(places)]
    drawn = frame(points, None, None)
    assert drawn is not None
    x0, y0, width, height = drawn["view"]
    size = TILE * 2 ** drawn["zoom"]
    for point, placed in zip(points, drawn["points"], strict=True):
        assert x0 <= placed["x"] <= x0 + width and y0 <= placed["y"] <= y0 + height
        x, y = world(point.lng, point.lat)
        assert placed["x"] == pytest.approx(x * size, abs=0.06)
        assert placed["y"] == pytest.approx(y * size, abs=0.06)
        lng, lat = inverse(x * size, y * size, drawn["zoom"])
        assert lng == pytest.approx(point.lng, abs=1e-9)
        assert lat == pytest.approx(point.lat, abs=1e-9)


def test_a_box_filter_is_the_frame_and_tiles_cover_it() -> None:
    drawn = frame([], (31.0, 29.9, 31.6, 30.2), TILES)
    assert drawn is not None
    x0, y0, width, height = drawn["view"]
    (left, _), (right, _) = world(31.0, 30.2), world(31.6, 29.9)
    size = TILE * 2 ** drawn["zoom"]
    assert x0 == pytest.approx(left * size, abs=0.1) and width >= (right - left) * size - 0.1
    covered = {(tile["x"], tile["y"]) for tile in drawn["tiles"]}
    for x, y in ((x0, y0), (x0 + width, y0 + height), (x0 + width, y0), (x0, y0 + height)):
        assert (x // TILE * TILE, y // TILE * TILE) in covered
    first = drawn["tiles"][0]
    assert first["href"] == TILES.format(
        z=drawn["zoom"], x=int(first["x"] // TILE), y=int(first["y"] // TILE)
    )
    assert frame([], None, None) is None


@pytest.fixture
async def tiled_api(database_url: str, files_dir: str) -> AsyncIterator[Api]:
    settings = Settings(
        database_url=database_url,
        access_log=False,
        db_pool_size=5,
        files_dir=files_dir,
        console_tile_url=TILES,
    )
    async for instance in start_api(settings):
        yield instance


async def test_tiles_are_drawn_and_allowed_only_when_set(api: Api, tiled_api: Api) -> None:
    town = f"Town {uuid.uuid4().hex[:8]}"
    place = {"type": "Point", "coordinates": [31.2, 30.0]}
    await api.create_unit(name="Mapped", city=town, unitLocation=place)
    plain = await (await sign_in(api)).get("/console/units", params={"city": town})
    assert "<image " not in plain.text
    assert "tiles.example.com" not in plain.headers["content-security-policy"]
    tiled = await (await sign_in(tiled_api)).get("/console/units", params={"city": town})
    assert '<image href="https://tiles.example.com/' in tiled.text
    assert (
        "img-src 'self' data: https://tiles.example.com" in tiled.headers["content-security-policy"]
    )
