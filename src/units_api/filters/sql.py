"""Translating a filter tree to a SQLAlchemy condition, on SQLite and PostgreSQL.

Values are always bound parameters. A field with a column compares it directly (an array's
column holds it as JSON text), and `=null=` reads a field's presence column when it has one;
others are read from the stored document with the dialect's JSON functions; a path into an
array matches when ANY element does (an EXISTS over the array's elements). `filters.evaluate`
judges documents by the same rules in Python.

Null semantics, per value (and per element for arrays): `==`, ordering and `=in=` are false
on null; `!=` and `=out=` are true on null; `=null=true` matches null.

A map operator on a location field is two tests: a coarse one an index answers (the
shape's bounding boxes, `filters.geo.bounds`: PostgreSQL's GiST index on `point(lng, lat)`
with `<@ box`, SQLite's R*Tree), then the exact one on the row's own longitude and latitude,
with `filters.geo`'s formulas: written out in SQL on PostgreSQL (the distance in a SQL
function, `units_distance`, that PostgreSQL inlines), its Python functions called on SQLite
(registered on each connection, `db.py`). On PostgreSQL a box needs only the first:
`point <@ box` compares a point's coordinates with the box's edges exactly.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    Boolean,
    ColumnElement,
    Double,
    Numeric,
    Table,
    and_,
    bindparam,
    cast,
    column,
    func,
    literal,
    not_,
    or_,
    select,
    table,
    text,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from units_api.filters import geo
from units_api.filters.fields import Catalogue, Field, Location
from units_api.filters.maps import NO_MAP, MapPlan, Near, Placed, map_plan
from units_api.filters.tree import And, Comparison, Node, Or
from units_api.filters.values import resolve


def _like_pattern(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


class Translator:
    def __init__(self, catalogue: Catalogue, dialect: str, parameter: str = "p") -> None:
        self.catalogue = catalogue
        self.table = catalogue.table
        self.dialect = dialect
        self.parameter = parameter
        self.placed: dict[Comparison, Placed] = {}  # the map comparisons, as resolved

    def condition(self, node: Node) -> ColumnElement[bool]:
        if isinstance(node, And):
            return and_(*(self.condition(child) for child in node.children))
        if isinstance(node, Or):
            return or_(*(self.condition(child) for child in node.children))
        return self.comparison(node)

    def comparison(self, node: Comparison) -> ColumnElement[bool]:
        field, values = resolve(node, self.catalogue, self.parameter)
        if field.location is not None:
            if node.operator in geo.SHAPES:
                self.placed[node] = (field.location, values[0])
            return self._location(field.location, node.operator, values)
        if node.operator == "null" and (presence := field.presence(values[0])) is not None:
            present = self.table.c[presence]
            return not_(present) if values[0] else present
        if field.array is not None:
            return self._any_element(field, node.operator, values)
        return self._compare(
            self._scalar(field), field.kind, node.operator, values, field.lowercase
        )

    # Where a value lives.

    def _record(self) -> Any:
        document = self.table.c[self.catalogue.document]
        return cast(document, JSONB) if self.dialect == "postgresql" else document

    def _json_value(self, document: Any, path: tuple[str, ...], kind: str) -> Any:
        if self.dialect == "postgresql":
            text = func.jsonb_extract_path_text(document, *(literal(p) for p in path))
            if kind in ("number", "integer"):
                return cast(text, Numeric)
            return cast(text, Boolean) if kind == "boolean" else text
        return func.json_extract(document, "$." + ".".join(path))

    def _scalar(self, field: Field) -> Any:
        if field.column is not None:
            return self.table.c[field.column]
        return self._json_value(self._record(), field.path, field.kind)

    def _any_element(self, field: Field, op: str, values: list[Any]) -> ColumnElement[bool]:
        assert field.array is not None
        stored = self.table.c[field.column] if field.column is not None else None
        if self.dialect == "postgresql":
            array: Any
            if stored is not None:
                array = cast(stored, JSONB)
            else:
                array = func.coalesce(
                    func.jsonb_extract_path(self._record(), *(literal(p) for p in field.array)),
                    literal("[]", JSONB),
                )
            unnest = func.jsonb_array_elements if field.path else func.jsonb_array_elements_text
            elements = unnest(array).table_valued("value").alias("element")
        else:
            each = (
                func.json_each(stored)
                if stored is not None
                else func.json_each(self._record(), "$." + ".".join(field.array))
            )
            elements = each.table_valued("value").alias("element")
        element = elements.c.value
        value = self._json_value(element, field.path, field.kind) if field.path else element
        matches = self._compare(value, field.kind, op, values)
        return select(literal(1)).select_from(elements).where(matches).exists()

    def _location(self, where: Location, op: str, values: list[Any]) -> ColumnElement[bool]:
        lng, lat = self.table.c[where.lng], self.table.c[where.lat]
        if op == "null":
            located: ColumnElement[bool] = lng.is_(None) if values[0] else lng.is_not(None)
            return located
        shape: geo.Shape = values[0]
        if self.dialect == "postgresql" and isinstance(shape, geo.Box):
            # GiST's `point <@ box` compares exactly (no fuzz): the index's test is the test.
            return self._pg_within(where, geo.split(shape))
        return and_(self._coarse(where, shape), exact(lng, lat, shape, self.dialect))

    def _pg_within(self, where: Location, boxes: tuple[geo.Bounds, ...]) -> ColumnElement[bool]:
        point = func.point(self.table.c[where.lng], self.table.c[where.lat])
        return or_(*(point.op("<@")(_pg_box(*box)) for box in boxes))

    def _coarse(self, where: Location, shape: geo.Shape) -> ColumnElement[bool]:
        boxes = geo.bounds(shape)
        if self.dialect == "postgresql":
            return self._pg_within(where, boxes)
        rtree = table(where.rtree, *(column(name) for name in _RTREE), column(where.rtree_key))
        found = [
            select(rtree.c[where.rtree_key]).where(
                rtree.c.max_lng >= _float(west),
                rtree.c.min_lng <= _float(east),
                rtree.c.max_lat >= _float(south),
                rtree.c.min_lat <= _float(north),
            )
            for west, south, east, north in boxes
        ]
        return self.table.c[where.key].in_(found[0] if len(found) == 1 else union_all(*found))

    # How it compares.

    def _compare(
        self, expr: Any, kind: str, op: str, values: list[Any], lowercase: bool = False
    ) -> ColumnElement[bool]:
        if op == "null":
            is_null: ColumnElement[bool] = expr.is_(None) if values[0] else expr.is_not(None)
            return is_null
        if self.dialect == "sqlite" and kind in ("number", "boolean"):
            # SQLite's JSON functions give REAL for numbers and 1/0 for booleans.
            values = [float(v) if kind == "number" else int(v) for v in values]
        elif kind == "boolean":
            # Bound explicitly: SQLAlchemy refuses to order by a bare True or False.
            values = [literal(v, Boolean) for v in values]
        if kind == "text" and op in ("eq", "ne", "in", "out"):
            positive = self._text_match(expr, op, values, lowercase)
        elif op in ("eq", "ne"):
            positive = expr == values[0]
        elif op in ("in", "out"):
            positive = expr.in_(values)
        else:
            if kind == "text" and self.dialect == "postgresql":
                expr = expr.collate("C")
            positive = {
                "lt": expr < values[0],
                "le": expr <= values[0],
                "gt": expr > values[0],
                "ge": expr >= values[0],
            }[op]
        if op in ("ne", "out"):
            return or_(expr.is_(None), not_(and_(expr.is_not(None), positive)))
        return and_(expr.is_not(None), positive)

    @staticmethod
    def _text_match(expr: Any, op: str, values: list[str], lowercase: bool) -> ColumnElement[bool]:
        lowered = expr if lowercase else func.lower(expr)
        if op in ("in", "out"):
            matched: ColumnElement[bool] = lowered.in_([value.lower() for value in values])
            return matched
        value = values[0]
        if "*" in value:
            return lowered.like(_like_pattern(value.lower()), escape="\\")
        return lowered == value.lower()


# --- Map search ---------------------------------------------------------------------------

_RTREE = ("min_lng", "max_lng", "min_lat", "max_lat")


# One instance of each type: a type made per value cost each statement's build.
_DOUBLE: Double[float] = Double()
_DOUBLES = ARRAY(_DOUBLE)


def _float(value: float) -> Any:
    return literal(value, _DOUBLE)


def _pg_box(west: float, south: float, east: float, north: float) -> Any:
    low, high = func.point(_float(west), _float(south)), func.point(_float(east), _float(north))
    return func.box(low, high)


def distance_from(near: Near, table: Table) -> ColumnElement[float]:
    """The distance in metres of each row's point from a `=near=` comparison's centre."""
    return distance(table.c[near.location.lng], table.c[near.location.lat], near.circle)


def nearest_first(
    near: Near, table: Table, located: ColumnElement[bool], count: int
) -> ColumnElement[bool] | None:
    """PostgreSQL: a condition keeping, of the rows `located` finds (every one of them within
    the `=near=` circle), those no farther from its centre than some `count` of them are: the
    first `count` rows nearest first are among them, and they are few, so the exact sort by
    distance reads few rows. None where it does not apply (a circle reaching a pole or the
    antimeridian, or of no size).

    A walk of the point index nearest first (`<->`, planar in degrees) reads `count` rows;
    the largest of their exact distances is the bound. Its planar order is not the exact one,
    but any `count` rows bound the `count`-th nearest from above, so the page is the same. The
    points within the bound lie in the circle's box scaled by bound / radius around the
    centre (its longitudes' reach, asin(sin(a) / cos(lat)), is convex in the angle a), which
    the index then answers."""
    circle = near.circle
    boxes = geo.bounds(circle)
    west, south, east, north = boxes[0]
    if len(boxes) != 1 or circle.meters <= 0 or west <= -180 or east >= 180:
        return None
    lng, lat = table.c[near.location.lng], table.c[near.location.lat]
    point = func.point(lng, lat)
    measured = distance(lng, lat, circle)
    walk = (
        select(measured.label("meters"))
        .where(located)
        .order_by(point.op("<->")(func.point(_float(circle.lng), _float(circle.lat))))
        .limit(count)
        .subquery("nearest")
    )
    # Degrees of reach per metre of the bound, the box's MARGIN kept whole.
    per_lng = (east - west - 2 * geo.MARGIN) / 2 / circle.meters
    per_lat = (north - south - 2 * geo.MARGIN) / 2 / circle.meters
    bound = func.max(walk.c.meters)  # computed once, however often named
    reach_lng = bound * _float(per_lng) + _float(geo.MARGIN)
    reach_lat = bound * _float(per_lat) + _float(geo.MARGIN)
    box = func.box(
        func.point(_float(circle.lng) - reach_lng, _float(circle.lat) - reach_lat),
        func.point(_float(circle.lng) + reach_lng, _float(circle.lat) + reach_lat),
    )
    # One subquery (the statement runs it once): its box holds every point within the bound.
    within: ColumnElement[bool] = point.op("<@")(select(box).scalar_subquery())
    return within


def exact(lng: Any, lat: Any, shape: geo.Shape, dialect: str) -> ColumnElement[bool]:
    """Whether the point (lng, lat) is in the shape, as `filters.geo.contains` decides."""
    if isinstance(shape, geo.Box):
        latitude = and_(lat >= _float(shape.south), lat <= _float(shape.north))
        west, east = lng >= _float(shape.west), lng <= _float(shape.east)
        return and_(latitude, and_(west, east) if shape.west <= shape.east else or_(west, east))
    if isinstance(shape, geo.Circle):
        near: ColumnElement[bool] = distance(lng, lat, shape) <= _float(shape.meters)
        return near
    return _inside(lng, lat, shape, dialect)


def _inside(lng: Any, lat: Any, shape: geo.Polygon, dialect: str) -> ColumnElement[bool]:
    """`filters.geo.inside`, asked only of the points the polygon's bands leave undecided
    (geo.banded, written here with the same comparisons): most points of a polygon are then
    decided by a few comparisons. Written as text (built as an expression, it cost a request
    more than the query itself), the bands' numbers in it (see `_banded`)."""
    x, y = f"{lng.table.name}.{lng.name}", f"{lat.table.name}.{lat.name}"
    if dialect == "postgresql":
        test, binds = _pg_inside(x, y, shape)
    else:
        polygon: BindParameter[Any] = bindparam("polygon", geo.polygon_text(shape), unique=True)
        test, binds = f"units_inside({x}, {y}, :polygon) = 1", [polygon]
    decided = _banded(x, y, shape)
    if decided is None:
        return and_(text(test).bindparams(*binds))
    sql = (
        f"(CASE {decided} WHEN {geo.INSIDE} THEN TRUE WHEN {geo.OUTSIDE} THEN FALSE "
        f"ELSE {test} END)"
    )
    return and_(text(sql).bindparams(*binds))


@lru_cache(maxsize=256)
def _banded(x: str, y: str, shape: geo.Polygon) -> str | None:
    """`geo.banded` in SQL for the point (x, y): a CASE finding the point's band in a few
    comparisons of its latitude, then the band's decision. The bands' numbers are written in
    (each `repr` of a float, read back as that float): bound, their hundreds of parameters
    cost a request more than the rest of its statement. Only a polygon's rim depends on them
    to the last bit, and the bands keep BAND_MARGIN away from every edge, so even a reader
    rounding them differently decides no point otherwise than the exact test."""
    found = geo.bands(shape)
    if not found:
        return None

    def leaf(band: geo.Band) -> str:
        stretches = [f"({x} >= {w!r} AND {x} <= {e!r})" for w, e in band.stretches]
        inside = f"WHEN {' OR '.join(stretches)} THEN {geo.INSIDE} " if stretches else ""
        south, north = band.south + geo.BAND_MARGIN, band.north - geo.BAND_MARGIN
        return (
            f"CASE WHEN {y} > {south!r} AND {y} < {north!r} THEN CASE {inside}"
            f"WHEN {x} < {band.west!r} OR {x} > {band.east!r} THEN {geo.OUTSIDE} "
            f"ELSE {geo.UNDECIDED} END ELSE {geo.UNDECIDED} END"
        )

    def search(low: int, high: int) -> str:
        if high - low == 1:
            return leaf(found[low])
        middle = (low + high) // 2
        below, above = search(low, middle), search(middle, high)
        return f"CASE WHEN {y} < {found[middle].south!r} THEN {below} ELSE {above} END"

    return search(0, len(found))


def distance(lng: Any, lat: Any, centre: geo.Circle) -> ColumnElement[float]:
    """The great-circle distance in metres from `centre`, as `filters.geo.distance` gives it
    (null without a point): `units_distance`, the same formula on both databases (SQLite's is
    that Python function, PostgreSQL's a SQL function, inlined into the statement, created by
    migration 0010)."""
    found: ColumnElement[float] = func.units_distance(
        lng,
        lat,
        _float(centre.lng_rad),
        _float(centre.lat_rad),
        _float(centre.lat_cos),
        type_=_DOUBLE,
    )
    return found


# The per-edge values `filters.geo.on_edge` and `crosses` read, one array of each.
_EDGE_VALUES: tuple[str, ...] = (
    *("x1", "y1", "y2", "dx", "dy", "slope", "tolerance"),
    *("x_low", "x_high", "y_low", "y_high"),
)
# `filters.geo.inside` for PostgreSQL, per row over the polygon's edges. Only edges level with
# the point can hold it or be crossed: the others cost two comparisons each. Written as text
# (the point's columns and the arrays filled in): built as an expression, it cost a request
# more than the query itself.
_PG_INSIDE = (
    "(SELECT bool_or({lng} >= edge.x_low AND {lng} <= edge.x_high"
    " AND {lat} >= edge.y_low AND {lat} <= edge.y_high"
    " AND abs(edge.dx * ({lat} - edge.y1) - edge.dy * ({lng} - edge.x1)) <= edge.tolerance)"
    " OR count(*) FILTER (WHERE (edge.y1 > {lat}) <> (edge.y2 > {lat})"
    " AND {lng} < edge.x1 + ({lat} - edge.y1) * edge.slope) % 2 = 1"
    " FROM unnest({arrays}) AS edge({names})"
    " WHERE {lat} >= edge.y_low AND {lat} <= edge.y_high) IS TRUE"
)


def _pg_inside(x: str, y: str, shape: geo.Polygon) -> tuple[str, list[BindParameter[Any]]]:
    sql = _PG_INSIDE.format(
        lng=x,
        lat=y,
        arrays=", ".join(f"CAST(:{name} AS float8[])" for name in _EDGE_VALUES),
        names=", ".join(_EDGE_VALUES),
    )
    arrays = [
        bindparam(name, [getattr(edge, name) for edge in shape.edges], _DOUBLES, unique=True)
        for name in _EDGE_VALUES
    ]
    return sql, arrays


def to_condition(
    node: Node | None, catalogue: Catalogue, dialect: str, parameter: str = "p"
) -> ColumnElement[bool]:
    """The SQL condition a filter puts on the rows of the catalogue's table (true for none)."""
    if node is None:
        return true()
    return Translator(catalogue, dialect, parameter).condition(node)


def translate(
    node: Node | None, catalogue: Catalogue, dialect: str, parameter: str = "p"
) -> tuple[ColumnElement[bool], MapPlan]:
    """The SQL condition of a filter, and what it asks of the map (filters.maps), from one
    reading of its values."""
    if node is None:
        return true(), NO_MAP
    translator = Translator(catalogue, dialect, parameter)
    condition = translator.condition(node)
    return condition, map_plan(node, translator.placed)
