"""The unit's fields as filters see them, and the one way units code judges a filter: as a SQL
condition, or in Python on a document."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import ColumnElement, and_

from units_api.filters.evaluate import Predicate, compile_filter
from units_api.filters.fields import Catalogue, Field, Location, model_fields
from units_api.filters.maps import MapPlan
from units_api.filters.sql import to_condition, translate
from units_api.filters.tree import Node
from units_api.units.schemas import UnitFields
from units_api.units.tables import FIELD_COLUMNS, PRESENT_COLUMNS, units

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
    # Also in the `channels` column, as a JSON array (units/changes.py writes it; 0026).
    "channel": Field("text", array=("publishing", "channels"), column="channels"),
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
    fields=model_fields(
        UnitFields, columns=FIELD_COLUMNS, server=_SERVER_FIELDS, present=PRESENT_COLUMNS
    ),
    table=units,
    document="doc",
)


def unit_condition(node: Node | None, dialect: str, parameter: str = "p") -> ColumnElement[bool]:
    """The condition a filter (or a key's policy) puts on `units` rows; true for none."""
    return to_condition(node, UNIT_CATALOGUE, dialect, parameter)


def unit_filters(
    node: Node | None, policy: Node | None, dialect: str, parameter: str = "p"
) -> tuple[ColumnElement[bool], MapPlan]:
    """The condition a filter and a key's policy put on `units` rows, and what they ask of the
    map (a distance is measured from the filter's `=near=` alone)."""
    filtered, place = translate(node, UNIT_CATALOGUE, dialect, parameter)
    policed, policy_place = translate(policy, UNIT_CATALOGUE, dialect, "policy")
    return and_(filtered, policed), place.beside(policy_place)


@lru_cache(maxsize=1024)
def unit_predicate(node: Node, parameter: str = "policy") -> Predicate:
    """Whether a unit's document (as the API returns it) matches a filter or policy; compiled
    once per filter."""
    return compile_filter(node, UNIT_CATALOGUE, parameter)
