"""Unit operations: the rules between the HTTP layer and the SQL.

Every write runs in the caller's transaction and writes, with the row, one history entry
and one outbox event. Writes lock the row first, so concurrent writers queue up instead of
overwriting each other.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from sqlalchemy import ColumnElement
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import Database, format_time, utcnow, uuid7
from units_api.errors import Forbidden, NotFound, ValidationFailed
from units_api.events.recorder import record_event
from units_api.filters.sql import to_condition
from units_api.filters.tree import Node
from units_api.http.etag import check_if_match
from units_api.http.json import dumps
from units_api.http.paging import INTEGER, Keyset
from units_api.search import index as search_index
from units_api.search.normalize import record_tokens, touches_search
from units_api.units import repository
from units_api.units.merge_patch import merge_patch
from units_api.units.record import (
    UnitRecord,
    actor_text,
    creation_changes,
    diff,
    new_availability,
    new_publishing,
)
from units_api.units.schemas import EDITABLE_FIELDS
from units_api.units.validation import check_patch_keys, validate_unit

Vocabularies = Mapping[str, tuple[str, ...]]
# History pages newest first, after the last entry's id.
HISTORY_KEYSET = Keyset("history", (INTEGER,))


class Caller(Protocol):
    """Who acts: an API key's principal, or the service itself (scheduled work)."""

    @property
    def actor(self) -> dict[str, Any]: ...

    @property
    def policy_tree(self) -> Node | None: ...


@dataclass(frozen=True, slots=True)
class SystemCaller:
    name: str
    policy_tree: Node | None = None

    @property
    def actor(self) -> dict[str, Any]:
        return {"type": "system", "id": None, "name": self.name}


@dataclass(frozen=True, slots=True)
class Written:
    """What a write answers with: the rendered record and its version."""

    id: uuid.UUID
    version: int
    body: bytes


def parse_unit_id(raw: str) -> uuid.UUID:
    """An id that is not a UUID names no unit: 404, like any unknown id."""
    try:
        parsed = uuid.UUID(raw)
    except ValueError:
        raise NotFound(f"No unit {raw}.") from None
    if str(parsed) != raw.lower():
        raise NotFound(f"No unit {raw}.")
    return parsed


def _not_found(unit_id: uuid.UUID) -> NotFound:
    return NotFound(f"No unit {unit_id}.")


def _check_body_id(body: Mapping[str, Any], unit_id: uuid.UUID) -> None:
    sent = body.get("id")
    if sent is not None and str(sent).lower() != str(unit_id):
        raise ValidationFailed([("id", "must match the unit id in the path")])


def _policy(conn: AsyncConnection, who: Caller) -> ColumnElement[bool] | None:
    if who.policy_tree is None:
        return None
    return to_condition(who.policy_tree, conn.dialect.name, "policy")


async def _require_within_policy(conn: AsyncConnection, unit_id: uuid.UUID, who: Caller) -> None:
    """A write may not leave the caller's policy: checked by the database, in the transaction."""
    policy = _policy(conn, who)
    if policy is not None and not await repository.matches(conn, unit_id, policy):
        raise Forbidden("The result would fall outside this API key's policy.")


async def _log_change(
    conn: AsyncConnection,
    record: UnitRecord,
    action: str,
    changes: dict[str, Any],
    actor: dict[str, Any],
    event_type: str,
    event_data: dict[str, Any],
) -> None:
    await repository.insert_history(
        conn,
        {
            "unit_id": record.id,
            "version": record.version,
            "at": record.updated_at,
            "actor": actor_text(actor),
            "action": action,
            "changes": dumps(changes).decode(),
        },
    )
    await record_event(
        conn, event_type, unit_id=record.id, version=record.version, actor=actor, data=event_data
    )


async def create(
    conn: AsyncConnection, body: Any, who: Caller, vocabularies: Vocabularies
) -> Written:
    fields = validate_unit(body, vocabularies)
    now = utcnow()
    record = UnitRecord(
        id=uuid7(),
        version=1,
        created_at=now,
        updated_at=now,
        fields=fields,
        publishing=new_publishing(),
        availability=new_availability(now),
    )
    columns = record.columns()
    await repository.insert(conn, {"id": record.id, "created_at": now, **columns})
    await repository.bump_count(conn, 1)
    await search_index.write(conn, record.id, record_tokens(fields))
    await _require_within_policy(conn, record.id, who)
    document = orjson.Fragment(columns["doc"])
    await _log_change(
        conn,
        record,
        "create",
        creation_changes(fields),
        who.actor,
        "unit.created",
        {"unit": document},
    )
    return Written(record.id, record.version, columns["doc"].encode())


async def get(db: Database, unit_id: uuid.UUID, who: Caller) -> tuple[bytes, int]:
    if who.policy_tree is None:
        row = await repository.fetch_doc_fast(db, unit_id)
    else:
        async with db.read() as conn:
            row = await repository.fetch_doc(conn, unit_id, _policy(conn, who))
    if row is None:
        raise _not_found(unit_id)
    return row[0].encode(), row[1]


async def locked(
    conn: AsyncConnection, unit_id: uuid.UUID, if_match: str | None, who: Caller
) -> UnitRecord:
    """The unit as the caller may see it, locked for the rest of the transaction."""
    row = await repository.fetch_for_update(conn, unit_id, _policy(conn, who))
    if row is None:
        raise _not_found(unit_id)
    check_if_match(if_match, row["version"])
    return UnitRecord.from_row(unit_id, row)


async def _apply(
    conn: AsyncConnection,
    record: UnitRecord,
    fields: dict[str, Any],
    action: str,
    who: Caller,
) -> Written:
    changes = diff(record.fields, fields)
    if not changes:
        return Written(record.id, record.version, record.render())
    record.fields = fields
    record.version += 1
    record.updated_at = utcnow()
    columns = record.columns()
    await repository.update_row(conn, record.id, columns)
    if touches_search(changes):
        await search_index.write(conn, record.id, record_tokens(fields))
    await _require_within_policy(conn, record.id, who)
    data = {"unit": orjson.Fragment(columns["doc"]), "changes": changes}
    await _log_change(conn, record, action, changes, who.actor, "unit.updated", data)
    return Written(record.id, record.version, columns["doc"].encode())


async def replace(
    conn: AsyncConnection,
    unit_id: uuid.UUID,
    body: Any,
    if_match: str | None,
    who: Caller,
    vocabularies: Vocabularies,
) -> Written:
    if isinstance(body, dict):
        _check_body_id(body, unit_id)
    record = await locked(conn, unit_id, if_match, who)
    return await _apply(conn, record, validate_unit(body, vocabularies), "replace", who)


async def patch(
    conn: AsyncConnection,
    unit_id: uuid.UUID,
    body: Any,
    if_match: str | None,
    who: Caller,
    vocabularies: Vocabularies,
) -> Written:
    if not isinstance(body, dict):
        raise ValidationFailed([("", "a merge patch must be a JSON object")])
    check_patch_keys(body)
    _check_body_id(body, unit_id)
    record = await locked(conn, unit_id, if_match, who)
    editable = {key: value for key, value in body.items() if key in EDITABLE_FIELDS}
    merged = merge_patch(record.fields, editable)
    return await _apply(conn, record, validate_unit(merged, vocabularies), "patch", who)


async def delete(
    conn: AsyncConnection, unit_id: uuid.UUID, if_match: str | None, who: Caller
) -> None:
    record = await locked(conn, unit_id, if_match, who)
    last = record.render()
    await search_index.remove(conn, unit_id)
    await repository.delete_row(conn, unit_id)
    await repository.bump_count(conn, -1)
    record.version += 1
    record.updated_at = utcnow()
    await _log_change(
        conn, record, "delete", {}, who.actor, "unit.deleted", {"unit": orjson.Fragment(last)}
    )


def _history_entry(row: Mapping[Any, Any]) -> dict[str, Any]:
    return {
        "version": row["version"],
        "at": format_time(row["at"]),
        "actor": orjson.Fragment(row["actor"]),
        "action": row["action"],
        "changes": orjson.Fragment(row["changes"]),
    }


async def history(
    conn: AsyncConnection, unit_id: uuid.UUID, limit: int, cursor: str | None, who: Caller
) -> dict[str, Any]:
    policy = _policy(conn, who)
    if policy is not None and not await repository.matches(conn, unit_id, policy):
        raise _not_found(unit_id)  # a key bound by a policy cannot judge a deleted unit
    after = HISTORY_KEYSET.decode(cursor)
    before = after[0] if after else None
    rows = await repository.history_page(conn, unit_id, before, limit + 1)
    if not rows and before is None:
        raise _not_found(unit_id)
    shown, next_cursor = HISTORY_KEYSET.page(rows, limit, lambda row: (row["id"],))
    return {"data": [_history_entry(row) for row in shown], "nextCursor": next_cursor}


async def save_state(
    conn: AsyncConnection,
    record: UnitRecord,
    who: Caller,
    action: str,
    event_type: str,
    changes: dict[str, Any],
) -> Written:
    """Persist a state machine's move: a new version, history entry and event."""
    record.version += 1
    record.updated_at = utcnow()
    columns = record.columns()
    await repository.update_row(conn, record.id, columns)
    await _require_within_policy(conn, record.id, who)
    data = {"unit": orjson.Fragment(columns["doc"]), "changes": changes}
    await _log_change(conn, record, action, changes, who.actor, event_type, data)
    return Written(record.id, record.version, columns["doc"].encode())
