"""A polygon's bands (filters.geo.bands) decide a point only as the exact test does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from units_api.filters import geo

# Coordinates on a coarse grid give level edges, shared latitudes, collinear and crossing
# edges; the fine ones give everything else.
COARSE = st.integers(-4, 4).map(float)
FINE = st.floats(-3, 3, allow_nan=False)
coordinates = st.one_of(COARSE, FINE)
vertices = st.lists(st.tuples(coordinates, coordinates), min_size=3, max_size=12)


def shape(points: list[tuple[float, float]]) -> geo.Polygon:
    return geo.polygon(tuple(value for point in points for value in point))


@settings(max_examples=300, deadline=None)
@given(points=vertices, probes=st.lists(st.tuples(coordinates, coordinates), max_size=40))
def test_bands_never_contradict_the_exact_test(
    points: list[tuple[float, float]], probes: list[tuple[float, float]]
) -> None:
    polygon = shape(points)
    # Points on the vertices and along the edges, where a wrong band would show first.
    on_edges = [
        (x1 + (x2 - x1) * t, y1 + (y2 - y1) * t)
        for (x1, y1), (x2, y2) in zip(points, points[1:] + points[:1], strict=True)
        for t in (0.0, 0.25, 0.5)
    ]
    for lng, lat in probes + on_edges:
        decided = geo.banded(polygon, lng, lat)
        assert decided in (geo.UNDECIDED, int(geo.inside(polygon, lng, lat))), (lng, lat)


def test_bands_decide_most_points_of_a_plain_polygon() -> None:
    pentagon = shape([(-1.5, -1.5), (1.5, -1.5), (1.8, 0.4), (0.0, 1.5), (-1.6, 0.6)])
    # Within its bounding box, as the index's coarse test leaves them.
    grid = [(x / 50, y / 50) for x in range(-80, 91) for y in range(-75, 76)]
    decided = [geo.banded(pentagon, x, y) for x, y in grid]
    assert decided.count(geo.UNDECIDED) < len(grid) * 0.1
    assert all(
        d == geo.UNDECIDED or d == geo.inside(pentagon, x, y)
        for d, (x, y) in zip(decided, grid, strict=True)
    )


def test_a_polygon_of_many_edges_has_no_bands() -> None:
    many = shape([(float(i % 7), float(i)) for i in range(geo.BAND_EDGES + 1)])
    assert geo.bands(many) == ()
