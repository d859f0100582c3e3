"""The unit record: how stored fields become the returned document, columns and diffs."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import orjson

from units_api.clock import format_time, parse_time, utcnow
from units_api.filters.geo import point
from units_api.http.json import dumps_plain, load_stored
from units_api.ids import uuid7
from units_api.units.schemas import EDITABLE_FIELDS
from units_api.units.tables import FIELD_COLUMNS, PRESENT_COLUMNS


def _present(value: Any) -> bool:
    """Whether a field holds a value, as a filter's `=null=false` asks: an array, an element
    that is not null."""
    if isinstance(value, list):
        return any(item is not None for item in value)
    return value is not None


def new_publishing() -> dict[str, Any]:
    return {"status": "draft", "publishedAt": None, "scheduledAt": None, "channels": []}


def new_availability(at: datetime) -> dict[str, Any]:
    return {"status": "available", "reservedUntil": None, "changedAt": format_time(at)}


@dataclass(slots=True)
class UnitRecord:
    id: uuid.UUID
    version: int
    created_at: datetime
    updated_at: datetime
    fields: dict[str, Any]
    publishing: dict[str, Any]
    availability: dict[str, Any]

    @classmethod
    def new(
        cls, fields: dict[str, Any], unit_id: uuid.UUID | None = None, now: datetime | None = None
    ) -> UnitRecord:
        """A new unit with `fields`: version 1, a draft, available, created `now` (by default
        this moment), with the id `unit_id` or a new one."""
        now = now or utcnow()
        return cls(unit_id or uuid7(), 1, now, now, fields, new_publishing(), new_availability(now))

    def document(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            **self.fields,
            "createdAt": format_time(self.created_at),
            "updatedAt": format_time(self.updated_at),
            "version": self.version,
            "publishing": self.publishing,
            "availability": self.availability,
        }

    def render(self) -> bytes:
        return dumps_plain(self.document())

    def columns(self) -> dict[str, Any]:
        values = {column: self.fields.get(field) for field, column in FIELD_COLUMNS.items()}
        values.update(
            version=self.version,
            updated_at=self.updated_at,
            publishing_status=self.publishing["status"],
            published_at=parse_time(self.publishing["publishedAt"]),
            scheduled_at=parse_time(self.publishing["scheduledAt"]),
            availability_status=self.availability["status"],
            reserved_until=parse_time(self.availability["reservedUntil"]),
            doc=self.render().decode(),
        )
        location = self.fields.get("unitLocation")
        located = point(location.get("coordinates") if isinstance(location, dict) else None)
        values["lng"], values["lat"] = located or (None, None)
        values["channels"] = dumps_plain(self.publishing["channels"]).decode()
        for field, column in PRESENT_COLUMNS.items():
            values[column] = _present(self.fields.get(field))
        return values

    @classmethod
    def from_row(cls, unit_id: uuid.UUID, row: Mapping[Any, Any]) -> UnitRecord:
        stored = load_stored(row["doc"])
        return cls(
            id=unit_id,
            version=row["version"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            fields={name: stored.get(name) for name in EDITABLE_FIELDS},
            publishing=stored["publishing"],
            availability=stored["availability"],
        )


# What every update of a unit writes, whatever it changes.
_ALWAYS_UPDATED = ("version", "updated_at", "doc")


@lru_cache(maxsize=1024)
def columns_of(fields: frozenset[str]) -> tuple[str, ...]:
    """The columns an update of these editable fields alone writes (its publishing and
    availability as they were): the unit's columns that can differ from what is stored. The
    others hold what is stored already. SQLite rewrites the entries of every index over a
    column an UPDATE sets, changed or not: setting only these spares most of a unit's 13
    indexes (bench/README.md, "A bulk update writes only what it changes").

    So a column is right only if every write made it from the record as `columns` does: a
    change to how a column is derived from the record needs a migration that fills it again
    for every unit (as 0021 and 0026 do), or units not edited since keep the old value."""
    names = list(_ALWAYS_UPDATED)
    for field in sorted(fields):
        for column in (FIELD_COLUMNS.get(field), PRESENT_COLUMNS.get(field)):
            if column is not None:
                names.append(column)
        if field == "unitLocation":
            names += ["lng", "lat"]
    return tuple(names)


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Field-level changes between two sets of editable fields."""
    changes: dict[str, dict[str, Any]] = {}
    for name in EDITABLE_FIELDS:
        old, new = before.get(name), after.get(name)
        if old != new:
            changes[name] = {"from": old, "to": new}
    return changes


def creation_changes(fields: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A new unit's changes: every field that is set, from empty (null, or [] for a list)."""
    changes: dict[str, dict[str, Any]] = {}
    for name in EDITABLE_FIELDS:
        new = fields.get(name)
        if new is not None and new != []:
            changes[name] = {"from": [] if isinstance(new, list) else None, "to": new}
    return changes


def actor_text(actor: dict[str, Any]) -> str:
    return orjson.dumps(actor).decode()
