"""The unit's fields as filters see them, and the one way units code judges a filter: as a SQL
condition, or in Python on a document."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy import ColumnElement

from units_api.filters.evaluate import Predicate, compile_filter
from units_api.filters.fields import Catalogue, Field, model_fields
from units_api.filters.sql import to_condition
from units_api.filters.tree import Node
from units_api.units.schemas import UnitFields
from units_api.units.tables import FIELD_COLUMNS, units

_SERVER_FIELDS = {
    "id": Field("uuid", column="id", path=("id",)),
    "createdAt": Field("time", column="created_at", path=("createdAt",)),
    "updatedAt": Field("time", column="updated_at", path=("updatedAt",)),
    "version": Field("integer", column="version", path=("version",)),
    "status": Field("text", column="publishing_status", path=("publishing", "status")),
    "availability": Field("text", column="availability_status", path=("availability", "status")),
    "channel": Field("text", array=("publishing", "channels")),
}

UNIT_CATALOGUE = Catalogue(
    fields=model_fields(UnitFields, columns=FIELD_COLUMNS, server=_SERVER_FIELDS),
    table=units,
    document="doc",
)


def unit_condition(node: Node | None, dialect: str, parameter: str = "p") -> ColumnElement[bool]:
    """The condition a filter (or a key's policy) puts on `units` rows; true for none."""
    return to_condition(node, UNIT_CATALOGUE, dialect, parameter)


@lru_cache(maxsize=1024)
def unit_predicate(node: Node, parameter: str = "policy") -> Predicate:
    """Whether a unit's document (as the API returns it) matches a filter or policy; compiled
    once per filter."""
    return compile_filter(node, UNIT_CATALOGUE, parameter)
