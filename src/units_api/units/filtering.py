"""The unit's fields as filters see them, and the one way units code judges a filter: as a SQL
condition, or in Python on a document."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import ColumnElement

from units_api.filters.evaluate import Predicate, compile_filter
from units_api.filters.fields import Catalogue, Field, Location, model_fields
from units_api.filters.geo import SHAPES, split
from units_api.filters.sql import distance_from, nearest_first, to_condition
from units_api.filters.tree import Comparison, Node, comparisons, required
from units_api.filters.values import resolve
from units_api.units.schemas import UnitFields
from units_api.units.tables import FIELD_COLUMNS, units

_SERVER_FIELDS = {
    "id": Field("uuid", column="id", path=("id",)),
    "createdAt": Field("time", column="created_at", path=("createdAt",)),
    "updatedAt": Field("time", column="updated_at", path=("updatedAt",)),
    "version": Field("integer", column="version", path=("version",)),
    "status": Field(
        "text", column="publishing_status", path=("publishing", "status"), lowercase=True
    ),
    "availability": Field(
        "text", column="availability_status", path=("availability", "status"), lowercase=True
    ),
    "channel": Field("text", array=("publishing", "channels")),
    # Map search: the GeoJSON Point's coordinates, in the lng and lat columns; on SQLite
    # indexed in the R*Tree `unit_locations`, keyed as the search table is
    # (units/changes.py writes both; migration 0010).
    "unitLocation": Field(
        "location",
        path=("unitLocation", "coordinates"),
        location=Location(lng="lng", lat="lat", rtree="unit_locations", rtree_key="unit_id"),
    ),
}

UNIT_CATALOGUE = Catalogue(
    fields=model_fields(UnitFields, columns=FIELD_COLUMNS, server=_SERVER_FIELDS),
    table=units,
    document="doc",
)


def unit_condition(node: Node | None, dialect: str, parameter: str = "p") -> ColumnElement[bool]:
    """The condition a filter (or a key's policy) puts on `units` rows; true for none."""
    return to_condition(node, UNIT_CATALOGUE, dialect, parameter)


def located(node: Node | None) -> bool:
    """Whether a filter searches the map."""
    return node is not None and any(found.operator in SHAPES for found in comparisons(node))


def bounded(node: Node | None) -> bool:
    """Whether every match of a filter is in one box an index can walk: an `=inside=`, or a
    `=within=` that does not cross the antimeridian, joined to the rest by AND."""
    return node is not None and any(_one_box(found) for found in required(node))


def _one_box(found: Comparison) -> bool:
    if found.operator == "within":
        _, (box,) = resolve(found, UNIT_CATALOGUE, "p")
        return len(split(box)) == 1
    return found.operator == "inside"


def unit_near(node: Node | None) -> Comparison | None:
    """The filter's `=near=`, when it has exactly one and every match satisfies it (it is
    joined to the rest by AND): the point a sort by distance measures from."""
    if node is None:
        return None
    nears = [found for found in comparisons(node) if found.operator == "near"]
    return nears[0] if len(nears) == 1 and nears[0] in required(node) else None


def nearest_units(
    near: Comparison, located: ColumnElement[bool], count: int
) -> ColumnElement[bool] | None:
    """PostgreSQL: of the units `located` finds, those no farther than some `count` of them
    (`filters.sql.nearest_first`), which hold the first `count` nearest first."""
    return nearest_first(near, UNIT_CATALOGUE, located, count)


def unit_distance(near: Comparison) -> ColumnElement[float]:
    """Each unit's distance in metres from a `=near=` comparison's point (the same SQL on
    both databases)."""
    return distance_from(near, UNIT_CATALOGUE)


@lru_cache(maxsize=1024)
def unit_predicate(node: Node, parameter: str = "policy") -> Predicate:
    """Whether a unit's document (as the API returns it) matches a filter or policy; compiled
    once per filter."""
    return compile_filter(node, UNIT_CATALOGUE, parameter)
