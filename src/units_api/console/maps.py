"""The units page's map: points placed in Web Mercator (the projection of map tiles), in the
pixels of the zoom level that fits the frame, and the tiles behind them when the operator set
a tile server. The SVG's coordinates are those pixels, so the page's script turns a drawn box
back into longitudes and latitudes with the same formulas."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

TILE = 256
WIDTH = 600  # the map's width in pixels at the zoom level chosen
MAX_ZOOM = 18
MAX_LATITUDE = 85.05112878  # Web Mercator's edge
# A frame is never narrower than this (degrees) around its points, nor flatter than this.
MIN_SPAN = 0.01
MIN_ASPECT = 0.5


@dataclass(frozen=True, slots=True)
class Point:
    unit: dict[str, Any]
    lng: float
    lat: float


def world(lng: float, lat: float) -> tuple[float, float]:
    """A longitude and latitude as x, y in [0, 1] of the Web Mercator square."""
    sine = math.sin(math.radians(max(-MAX_LATITUDE, min(MAX_LATITUDE, lat))))
    return (lng + 180) / 360, 0.5 - math.log((1 + sine) / (1 - sine)) / (4 * math.pi)


def _padded(points: list[Point]) -> tuple[float, float, float, float]:
    west, east = min(p.lng for p in points), max(p.lng for p in points)
    south, north = min(p.lat for p in points), max(p.lat for p in points)
    pad = max(east - west, north - south, MIN_SPAN) * 0.1
    return west - pad, south - pad, east + pad, north + pad


def frame(
    points: list[Point], box: tuple[float, float, float, float] | None, tile_url: str | None
) -> dict[str, Any] | None:
    """The map of `points`: the box filter's frame when one is set (and does not cross the
    antimeridian), else one that holds every point; None with neither."""
    if box is None or not (box[2] > box[0] and box[3] > box[1]):
        if not points:
            return None
        box = _padded(points)
    west, south, east, north = box
    (left, top), (right, bottom) = world(west, north), world(east, south)
    zoom = max(0, min(MAX_ZOOM, int(math.log2(WIDTH / (TILE * max(right - left, 1e-9))))))
    size = TILE * 2**zoom
    x0, y0, width, height = left * size, top * size, (right - left) * size, (bottom - top) * size
    if height < width * MIN_ASPECT:  # a frame as flat as a line of points: give it height
        y0, height = y0 - (width * MIN_ASPECT - height) / 2, width * MIN_ASPECT
    if width < height * MIN_ASPECT:
        x0, width = x0 - (height * MIN_ASPECT - width) / 2, height * MIN_ASPECT
    placed = [
        {
            "unit": p.unit,
            "x": round(world(p.lng, p.lat)[0] * size, 1),
            "y": round(world(p.lng, p.lat)[1] * size, 1),
        }
        for p in points
    ]
    return {
        "points": placed,
        "zoom": zoom,
        "view": [round(value, 1) for value in (x0, y0, width, height)],
        "radius": round(width / 120, 2),
        "tiles": _tiles(tile_url, zoom, x0, y0, width, height) if tile_url else [],
        "lines": _lines(x0, y0, width, height),
    }


def _tiles(
    url: str, zoom: int, x0: float, y0: float, width: float, height: float
) -> list[dict[str, Any]]:
    count = 2**zoom
    tiles = []
    for ty in range(max(0, int(y0 // TILE)), min(count, int((y0 + height) // TILE) + 1)):
        for tx in range(int(x0 // TILE), int((x0 + width) // TILE) + 1):
            address = url.replace("{z}", str(zoom)).replace("{x}", str(tx % count))
            tiles.append({"href": address.replace("{y}", str(ty)), "x": tx * TILE, "y": ty * TILE})
    return tiles


def _lines(x0: float, y0: float, width: float, height: float) -> dict[str, list[float]]:
    """A few guide lines across the frame, where there are no tiles to read it by."""
    return {
        "x": [round(x0 + width * i / 4, 1) for i in range(1, 4)],
        "y": [round(y0 + height * i / 4, 1) for i in range(1, 4)],
    }
