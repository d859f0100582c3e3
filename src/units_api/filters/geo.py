"""Map search: the shapes of `=within=`, `=near=` and `=inside=`, and the exact tests.

SQL (`filters.sql`) and the evaluator (`filters.evaluate`) decide with the same double
precision formulas, evaluated in the same order (PostgreSQL's float8 and Python's float are
both IEEE doubles, and both call the C library's sin, cos, asin and sqrt), so they agree on
every point, edges included; SQLite's statements call the functions of this module.
PostgreSQL's `units_distance` (migration 0010) writes `distance` out in SQL: a change to one
is a change to the other (the differential tests compare them).

- `=within=(west,south,east,north)`: the box, edges included; `west > east` is a box across
  the antimeridian (longitude >= west, or <= east).
- `=near=(lng,lat,meters)`: the haversine great-circle distance on a sphere of radius
  `EARTH_RADIUS` metres is at most `meters`.
- `=inside=(lng1,lat1,...)`: the polygon of `MIN_VERTICES` to `MAX_VERTICES` vertices, closed
  implicitly, whose edges are straight lines in longitude/latitude (they never wrap at the
  antimeridian: a polygon across it is two, joined by `,`). A point within `ON_EDGE` degrees
  of an edge is on it, and a point on an edge is inside. Otherwise the even-odd rule decides:
  a point is inside when a ray from it towards growing longitude crosses the edges an odd
  number of times, so where a self-crossing polygon covers a place twice, it is outside.

A coordinate smaller than `TINY` in magnitude counts as 0: PostgreSQL refuses a product that
underflows to zero, and no such coordinate is a real place.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

import orjson

EARTH_RADIUS = 6_371_008.8  # metres, the mean radius (IUGG)
DIAMETER = 2 * EARTH_RADIUS
RADIANS = math.pi / 180  # per degree
MAX_METERS = 20_000_000
MIN_VERTICES = 3
MAX_VERTICES = 1000
ON_EDGE = 1e-9  # degrees (about 0.1 mm): how near an edge a point is on it
TINY = 1e-100
# Coarse boxes (an index's) are widened by this many degrees beyond the shape, so rounding
# never leaves out a point the exact test takes.
MARGIN = 1e-6
SHAPES = {"within": "box", "near": "circle", "inside": "polygon"}  # operator: what it takes

Bounds = tuple[float, float, float, float]  # west, south, east, north; west <= east


@dataclass(frozen=True, slots=True)
class Box:
    west: float
    south: float
    east: float
    north: float


@dataclass(frozen=True, slots=True)
class Circle:
    lng: float
    lat: float
    meters: float
    # The centre as the distance formula reads it.
    lng_rad: float
    lat_rad: float
    lat_cos: float


@dataclass(frozen=True, slots=True)
class Edge:
    """One edge, from (x1, y1) to (x2, y2), as the on-edge and crossing tests read it."""

    x1: float
    y1: float
    y2: float
    dx: float  # x2 - x1
    dy: float  # y2 - y1
    slope: float  # dx / dy (0 for a level edge, which no ray crosses)
    tolerance: float  # ON_EDGE times the edge's length
    x_low: float  # the edge's extent, widened by ON_EDGE
    x_high: float
    y_low: float
    y_high: float


@dataclass(frozen=True, slots=True)
class Polygon:
    coordinates: tuple[float, ...]  # lng1, lat1, lng2, lat2, ...
    edges: tuple[Edge, ...]


Shape = Box | Circle | Polygon


def coordinate(value: Any) -> float:
    """A stored or given coordinate as the tests read it."""
    number = float(value)
    return 0.0 if abs(number) < TINY else number


def point(coordinates: Any) -> tuple[float, float] | None:
    """The (longitude, latitude) of a GeoJSON Point's coordinates as a record holds them;
    None for anything else."""
    if not isinstance(coordinates, list) or len(coordinates) != 2:
        return None
    lng, lat = coordinates
    if isinstance(lng, bool) or isinstance(lat, bool):
        return None
    try:
        return coordinate(lng), coordinate(lat)
    except (TypeError, ValueError):
        return None


# --- Reading a shape --------------------------------------------------------------------


def parse_shape(operator: str, raws: tuple[str, ...]) -> Shape:
    """The shape a map operator's values give; ValueError saying what is wrong."""
    numbers = [_number(raw) for raw in raws]
    if operator == "within":
        if len(numbers) != 4:
            raise ValueError("=within= takes 4 numbers: west, south, east, north")
        west, south, east, north = numbers
        _check_point(raws[0], west, raws[1], south)
        _check_point(raws[2], east, raws[3], north)
        if south > north:
            raise ValueError(f"south {raws[1]} is above north {raws[3]}")
        return Box(west, south, east, north)
    if operator == "near":
        if len(numbers) != 3:
            raise ValueError("=near= takes 3 numbers: longitude, latitude, meters")
        lng, lat, meters = numbers
        _check_point(raws[0], lng, raws[1], lat)
        if not 0 < meters <= MAX_METERS:
            raise ValueError(f"meters {raws[2]} is not above 0 and at most {MAX_METERS:,}")
        return circle(lng, lat, meters)
    if len(numbers) % 2 or not MIN_VERTICES <= len(numbers) // 2 <= MAX_VERTICES:
        raise ValueError(
            f"=inside= takes {MIN_VERTICES:,} to {MAX_VERTICES:,} vertices, each a longitude "
            f"and a latitude; got {len(numbers)} numbers"
        )
    for i in range(0, len(numbers), 2):
        _check_point(raws[i], numbers[i], raws[i + 1], numbers[i + 1])
    return polygon(tuple(numbers))


def _number(raw: str) -> float:
    try:
        number = Decimal(raw)
    except InvalidOperation:
        number = Decimal("NaN")
    if not number.is_finite():
        raise ValueError(f"'{raw}' is not a number")
    return coordinate(number)


def _check_point(raw_lng: str, lng: float, raw_lat: str, lat: float) -> None:
    if not -180 <= lng <= 180:
        raise ValueError(f"longitude {raw_lng} is outside -180..180")
    if not -90 <= lat <= 90:
        raise ValueError(f"latitude {raw_lat} is outside -90..90")


def circle(lng: float, lat: float, meters: float) -> Circle:
    lat_rad = lat * RADIANS
    return Circle(lng, lat, meters, lng * RADIANS, lat_rad, math.cos(lat_rad))


def polygon(coordinates: tuple[float, ...]) -> Polygon:
    xs, ys = coordinates[0::2], coordinates[1::2]
    edges = []
    for i, (x1, y1) in enumerate(zip(xs, ys, strict=True)):
        x2, y2 = xs[(i + 1) % len(xs)], ys[(i + 1) % len(ys)]
        dx, dy = x2 - x1, y2 - y1
        edges.append(
            Edge(
                x1=x1,
                y1=y1,
                y2=y2,
                dx=dx,
                dy=dy,
                slope=dx / dy if dy else 0.0,
                tolerance=ON_EDGE * math.hypot(dx, dy),
                x_low=min(x1, x2) - ON_EDGE,
                x_high=max(x1, x2) + ON_EDGE,
                y_low=min(y1, y2) - ON_EDGE,
                y_high=max(y1, y2) + ON_EDGE,
            )
        )
    return Polygon(coordinates, tuple(edges))


# --- The exact tests --------------------------------------------------------------------


def within(box: Box, lng: float, lat: float) -> bool:
    if not box.south <= lat <= box.north:
        return False
    if box.west <= box.east:
        return box.west <= lng <= box.east
    return lng >= box.west or lng <= box.east


def distance(centre: Circle, lng: float, lat: float) -> float:
    """Haversine, in metres; `filters.sql` writes the same operations for PostgreSQL."""
    lat_rad = lat * RADIANS
    s1 = math.sin((lat_rad - centre.lat_rad) * 0.5)
    s2 = math.sin((lng * RADIANS - centre.lng_rad) * 0.5)
    a = s1 * s1 + centre.lat_cos * math.cos(lat_rad) * s2 * s2  # as SQL groups it: left first
    return DIAMETER * math.asin(min(math.sqrt(a), 1.0))


def on_edge(edge: Edge, lng: float, lat: float) -> bool:
    return (
        edge.x_low <= lng <= edge.x_high
        and edge.y_low <= lat <= edge.y_high
        and abs(edge.dx * (lat - edge.y1) - edge.dy * (lng - edge.x1)) <= edge.tolerance
    )


def crosses(edge: Edge, lng: float, lat: float) -> bool:
    """Whether the ray from the point towards growing longitude crosses the edge."""
    return (edge.y1 > lat) != (edge.y2 > lat) and lng < edge.x1 + (lat - edge.y1) * edge.slope


def inside(shape: Polygon, lng: float, lat: float) -> bool:
    odd = False
    for edge in shape.edges:
        if on_edge(edge, lng, lat):
            return True
        if crosses(edge, lng, lat):
            odd = not odd
    return odd


# Bands (below) are made for polygons of at most BAND_EDGES edges, about BAND_CUTS of them, and
# decide only for points at least BAND_MARGIN degrees away from their own and the edges' lines.
BAND_EDGES = 64
BAND_CUTS = 24
BAND_MARGIN = 1e-6
INSIDE, OUTSIDE, UNDECIDED = 1, 0, 2


@dataclass(frozen=True, slots=True)
class Band:
    """A band of latitude of a polygon, from `south` to `north`, where the polygon is known
    to be inside (`stretches` of longitude) and outside (west of `west`, east of `east`)."""

    south: float
    north: float
    stretches: tuple[tuple[float, float], ...]
    west: float
    east: float


@lru_cache(maxsize=256)
def bands(shape: Polygon) -> tuple[Band, ...]:
    """The polygon cut into bands of latitude that decide most points without the exact test,
    which is then left to a polygon's rim; none for a polygon of more than BAND_EDGES edges.

    Cuts are made at the vertices (so each edge spans a band whole or not at all) and between
    them. In a band whose edges do not cross each other, the edges keep one order, and by the
    even-odd rule the inside is between the first and second, third and fourth...: each pair
    gives the stretch between its two edges' innermost longitudes. Nothing is west or east of
    every edge. A band where edges cross gives no stretch.
    """
    if len(shape.edges) > BAND_EDGES:
        return ()
    levels = sorted(set(shape.coordinates[1::2]))
    height = levels[-1] - levels[0]
    if height <= 0:
        return ()
    found: list[Band] = []
    for low, high in itertools.pairwise(levels):
        cuts = max(1, math.ceil(BAND_CUTS * (high - low) / height))
        step = (high - low) / cuts
        spanning = [e for e in shape.edges if min(e.y1, e.y2) <= low and max(e.y1, e.y2) >= high]
        for i in range(cuts):
            found.append(
                _band(spanning, low + i * step, high if i + 1 == cuts else low + (i + 1) * step)
            )
    return tuple(found)


def _band(spanning: list[Edge], south: float, north: float) -> Band:
    def at(edge: Edge, lat: float) -> float:
        return edge.x1 + (lat - edge.y1) * edge.slope

    by_south = sorted(spanning, key=lambda edge: at(edge, south))
    by_north = sorted(spanning, key=lambda edge: at(edge, north))
    ends = [at(edge, lat) for edge in spanning for lat in (south, north)]
    west, east = min(ends) - BAND_MARGIN, max(ends) + BAND_MARGIN
    stretches = []
    if by_south == by_north and len(spanning) % 2 == 0:
        for left, right in zip(by_south[0::2], by_south[1::2], strict=True):
            low = max(at(left, south), at(left, north)) + BAND_MARGIN
            high = min(at(right, south), at(right, north)) - BAND_MARGIN
            if low < high:
                stretches.append((low, high))
    return Band(south, north, tuple(stretches), west, east)


def banded(shape: Polygon, lng: float, lat: float) -> int:
    """What the polygon's bands say of a point: INSIDE, OUTSIDE or UNDECIDED (the exact test
    decides). `filters.sql` writes the same decision for the databases."""
    found = bands(shape)
    if not found:
        return UNDECIDED
    # The band a latitude falls in, as SQL's nested comparisons find it.
    low, high = 0, len(found)
    while high - low > 1:
        middle = (low + high) // 2
        if lat < found[middle].south:
            high = middle
        else:
            low = middle
    band = found[low]
    if not band.south + BAND_MARGIN < lat < band.north - BAND_MARGIN:
        return UNDECIDED
    if any(west <= lng <= east for west, east in band.stretches):
        return INSIDE
    if lng < band.west or lng > band.east:
        return OUTSIDE
    return UNDECIDED


def contains(shape: Shape, lng: float, lat: float) -> bool:
    if isinstance(shape, Box):
        return within(shape, lng, lat)
    if isinstance(shape, Circle):
        return distance(shape, lng, lat) <= shape.meters
    return inside(shape, lng, lat)


# --- SQLite's functions: the same tests, called by its statements -------------------------


def polygon_text(shape: Polygon) -> str:
    """The polygon as SQLite's statements pass it to `sqlite_inside`."""
    return orjson.dumps(shape.coordinates).decode()


@lru_cache(maxsize=64)
def _polygon_from_text(text: str) -> Polygon:
    return polygon(tuple(orjson.loads(text)))


def sqlite_inside(lng: float | None, lat: float | None, text: str) -> int | None:
    if lng is None or lat is None:
        return None
    return int(inside(_polygon_from_text(text), lng, lat))


def sqlite_distance(
    lng: float | None, lat: float | None, lng_rad: float, lat_rad: float, lat_cos: float
) -> float | None:
    """`units_distance(lng, lat, centre's lng_rad, lat_rad, lat_cos)`, as PostgreSQL's."""
    if lng is None or lat is None:
        return None
    return distance(Circle(0.0, 0.0, 0.0, lng_rad, lat_rad, lat_cos), lng, lat)


# --- Coarse boxes, for an index ---------------------------------------------------------


def split(box: Box) -> tuple[Bounds, ...]:
    """The box as boxes that do not cross the antimeridian: itself, or its two sides."""
    if box.west <= box.east:
        return ((box.west, box.south, box.east, box.north),)
    return ((box.west, box.south, 180.0, box.north), (-180.0, box.south, box.east, box.north))


def bounds(shape: Shape) -> tuple[Bounds, ...]:
    """Boxes (one, or two either side of the antimeridian) holding every point the shape
    takes, widened by MARGIN."""
    if isinstance(shape, Box):
        return tuple(_widened(*box) for box in split(shape))
    if isinstance(shape, Circle):
        return _circle_bounds(shape)
    xs, ys = shape.coordinates[0::2], shape.coordinates[1::2]
    return (_widened(min(xs), min(ys), max(xs), max(ys)),)


def _widened(west: float, south: float, east: float, north: float) -> Bounds:
    return (west - MARGIN, south - MARGIN, east + MARGIN, north + MARGIN)


def _circle_bounds(shape: Circle) -> tuple[Bounds, ...]:
    """The circle's extent: its latitudes, and the longitudes of its widest point (all of
    them when it holds a pole, or nearly)."""
    angle = shape.meters / EARTH_RADIUS
    reach = math.degrees(angle)
    south, north = shape.lat - reach, shape.lat + reach
    if south <= -90 or north >= 90:
        return (_widened(-180.0, max(south, -90.0), 180.0, min(north, 90.0)),)
    ratio = math.sin(angle) / math.cos(shape.lat * RADIANS)
    if ratio >= 1 - 1e-9:
        return (_widened(-180.0, south, 180.0, north),)
    spread = math.degrees(math.asin(ratio))
    west, east = shape.lng - spread, shape.lng + spread
    if west < -180:
        return (_widened(west + 360, south, 180.0, north), _widened(-180.0, south, east, north))
    if east > 180:
        return (_widened(west, south, 180.0, north), _widened(-180.0, south, east - 360, north))
    return (_widened(west, south, east, north),)
