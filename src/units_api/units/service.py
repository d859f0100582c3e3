"""Unit operations: the rules between the HTTP layer and the SQL.

Every write runs in the caller's transaction and writes, with the row, one history entry
and one outbox event. Writes lock the row first, so concurrent writers queue up instead of
overwriting each other.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import format_time, parse_time, utcnow
from units_api.db import Connection, Database
from units_api.errors import NotFound, ValidationFailed
from units_api.filters.evaluate import Predicate
from units_api.filters.tree import Node
from units_api.http.etag import check_if_match
from units_api.http.json import load_stored
from units_api.http.paging import INTEGER, Keyset
from units_api.units import changes, repository
from units_api.units.columns import STATUS_COLUMNS
from units_api.units.filtering import unit_predicate
from units_api.units.gathering import Gatherer
from units_api.units.record import UnitRecord, diff
from units_api.units.schemas import EDITABLE_FIELDS, SERVER_FIELDS
from units_api.units.validation import check_patch_keys, validate_patched, validate_unit

Vocabularies = Mapping[str, tuple[str, ...]]
# History pages newest first, after the last entry's id.
HISTORY_KEYSET = Keyset("history", (INTEGER,))
# What a file's row may carry beside a unit's fields (an export writes them): ignored.
_READ_ONLY = frozenset((*SERVER_FIELDS, *STATUS_COLUMNS))


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
class RecordedCaller:
    """A caller as work done for it later (a job) recorded it: its actor, and its policy as
    it was when it asked."""

    actor: dict[str, Any]
    policy_tree: Node | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """What a write answers with: the rendered record and its version."""

    id: uuid.UUID
    version: int
    body: bytes


def _not_found(unit_id: uuid.UUID) -> NotFound:
    return NotFound(f"No unit {unit_id}.")


def _check_body_id(body: Mapping[str, Any], unit_id: uuid.UUID) -> None:
    sent = body.get("id")
    if sent is not None and str(sent).lower() != str(unit_id):
        raise ValidationFailed([("id", "must match the unit id in the path")])


def _admit(who: Caller) -> Predicate | None:
    """The caller's policy as a test of a unit's document (None: every unit)."""
    return None if who.policy_tree is None else unit_predicate(who.policy_tree)


def _created(
    fields: dict[str, Any],
    action: str = "create",
    unit_id: uuid.UUID | None = None,
    now: datetime | None = None,
) -> changes.Change:
    """A new unit with `fields` (and the id `unit_id`, or a new one): its creation."""
    return changes.created(UnitRecord.new(fields, unit_id, now), action)


def _updated(record: UnitRecord, fields: dict[str, Any], action: str) -> changes.Change | None:
    """`record` given `fields`: its update, or None when it has them already (nothing is
    written: no version, history entry or event)."""
    diffs = diff(record.fields, fields)
    if not diffs:
        return None
    record.fields = fields
    return changes.updated(record, action, diffs)


async def create(conn: Connection, body: Any, who: Caller, vocabularies: Vocabularies) -> Written:
    change = _created(validate_unit(body, vocabularies))
    await changes.write(conn, "insert", [change], who.actor, last=True, admit=_admit(who))
    record = change.record
    return Written(record.id, record.version, change.doc.encode())


async def create_gathered(
    gatherer: Gatherer, body: Any, who: Caller, vocabularies: Vocabularies
) -> Written:
    """`create`, written with the creates that arrive beside it (`gathering.py`)."""
    change = _created(validate_unit(body, vocabularies))
    await gatherer.write(changes.prepare("insert", [change], who.actor, _admit(who)))
    record = change.record
    return Written(record.id, record.version, change.doc.encode())


async def get(conn: Connection, unit_id: uuid.UUID, who: Caller) -> tuple[bytes, int]:
    row = await repository.fetch_doc(conn, unit_id)
    admit = _admit(who)
    if row is None or (admit is not None and not admit(load_stored(row[0]))):
        raise _not_found(unit_id)
    return row[0].encode(), row[1]


async def _read(
    conn: Connection, unit_id: uuid.UUID, if_match: str | None, who: Caller, lock: bool
) -> UnitRecord:
    """The unit as the caller may see it; with `lock`, locked until the transaction ends."""
    return _readable(await repository.fetch_current(conn, unit_id, lock), unit_id, if_match, who)


def _readable(
    row: Mapping[Any, Any] | None, unit_id: uuid.UUID, if_match: str | None, who: Caller
) -> UnitRecord:
    """The unit read as `row`, as the caller may see it."""
    admit = _admit(who)
    record = None if row is None else UnitRecord.from_row(unit_id, row)
    if record is None or (admit is not None and not admit(record.document())):
        raise _not_found(unit_id)
    check_if_match(if_match, record.version)
    return record


async def locked(
    conn: Connection, unit_id: uuid.UUID, if_match: str | None, who: Caller
) -> UnitRecord:
    """The unit as the caller may see it, locked for the rest of the transaction."""
    return await _read(conn, unit_id, if_match, who, lock=True)


# Reads of a unit to update: twice without a lock (the write checks the version read), then
# under a row lock, so a unit that keeps moving is still updated. On SQLite, whose writer
# holds the database, the first read locks.
_OPTIMISTIC = (False, False, True)


@dataclass(slots=True)
class Gathered:
    """Where a PUT or PATCH runs when its write is gathered with others: its reads each on a
    connection of their own (SQLite: on the loop's thread, `inline_reads.py`), its write by
    `gatherer`; a unit that moved on twice is then updated under a lock, alone."""

    db: Database
    gatherer: Gatherer


async def _update(
    conn: Connection | Gathered,
    unit_id: uuid.UUID,
    if_match: str | None,
    who: Caller,
    action: str,
    new_fields: Callable[[UnitRecord], dict[str, Any]],
    locks: tuple[bool, ...] | None = None,
) -> Written:
    """`new_fields` written to the unit, read as `locks` says (by default `_OPTIMISTIC` on
    PostgreSQL, a locking read on SQLite)."""
    if isinstance(conn, Gathered):
        return await _update_gathered(
            conn.db, conn.gatherer, unit_id, if_match, who, action, new_fields
        )
    if locks is None:
        locks = _OPTIMISTIC if conn.dialect.name == "postgresql" else (True,)
    for lock in locks:
        record = await _read(conn, unit_id, if_match, who, lock)
        change = _updated(record, new_fields(record), action)
        if change is None:
            return Written(record.id, record.version, record.render())
        try:
            await changes.write(conn, "update", [change], who.actor, True, _admit(who))
        except changes.Moved:
            continue
        return Written(record.id, record.version, change.doc.encode())
    raise AssertionError("a locked unit cannot move")


async def _update_gathered(
    db: Database,
    gatherer: Gatherer,
    unit_id: uuid.UUID,
    if_match: str | None,
    who: Caller,
    action: str,
    new_fields: Callable[[UnitRecord], dict[str, Any]],
) -> Written:
    for _ in _OPTIMISTIC[:-1]:
        row = await repository.fetch_current_unlocked(db, unit_id)
        record = _readable(row, unit_id, if_match, who)
        change = _updated(record, new_fields(record), action)
        if change is None:
            return Written(record.id, record.version, record.render())
        try:
            await gatherer.write(changes.prepare("update", [change], who.actor, _admit(who)))
        except changes.Moved:
            continue
        return Written(record.id, record.version, change.doc.encode())
    async with db.operation() as conn:
        return await _update(conn, unit_id, if_match, who, action, new_fields, locks=(True,))


@dataclass(slots=True)
class Decision:
    """What writing new fields to one unit comes to: its `change` to write (`created`: a new
    unit), nothing (no change: the unit has them already), or its refusal (`refused`: the
    field to blame and why)."""

    change: changes.Change | None = None
    created: bool = False
    refused: tuple[str, str] | None = None


@dataclass(slots=True)
class Decided:
    """A batch's decisions, in its order, and the rows that write them (`changes.write_rows`:
    the new units', then the updated ones'), when they were asked for."""

    decisions: list[Decision]
    rows: list[changes.Rows]


def decide(
    stored: UnitRecord | None,
    fields: dict[str, Any],
    admit: Predicate | None,
    action: str,
    unit_id: uuid.UUID | None = None,
    now: datetime | None = None,
) -> Decision:
    """Writing `fields` to the unit `stored` (None: a new unit, with the id `unit_id` or a new
    one) for a caller whose policy is `admit`: a unit outside it is refused as missing, and so
    is a write that would leave the unit outside it. The change is the one `create` and
    `_update` make; they judge the policy where they read the unit (a 404) and in the writer
    (a 403)."""
    if stored is not None and admit is not None and not admit(stored.document()):
        return Decision(refused=("id", "no such unit"))
    if stored is None:
        change = _created(fields, action, unit_id, now)
    elif (updated := _updated(stored, fields, action)) is not None:
        change = updated
    else:
        return Decision()
    if admit is not None and not admit(_as_stored(change.record, stored is not None)):
        return Decision(refused=("", "the unit would fall outside this key's policy"))
    return Decision(change, created=stored is None)


def _as_stored(record: UnitRecord, updated: bool) -> dict[str, Any]:
    """The unit's document as it will be stored (an update moves it to the next version)."""
    document = record.document()
    if updated:
        document["version"] = record.version + 1
    return document


def decide_many(
    stored: Mapping[uuid.UUID, UnitRecord],
    wanted: Sequence[tuple[uuid.UUID | None, dict[str, Any]]],
    who: Caller,
    action: str,
    rows: bool,
) -> Decided:
    """Writing each of `wanted` (a unit's id, or None for a new unit, and its new fields),
    given those of the units that exist (`stored`), by `who`: each one's decision, and with
    `rows`, the rows that write them."""
    admit, now = _admit(who), utcnow()
    decisions = [
        decide(
            None if unit_id is None else stored.get(unit_id), fields, admit, action, unit_id, now
        )
        for unit_id, fields in wanted
    ]
    return Decided(decisions, _rows(decisions, who.actor) if rows else [])


def _rows(decisions: list[Decision], actor: dict[str, Any]) -> list[changes.Rows]:
    inserts = [d.change for d in decisions if d.change is not None and d.created]
    updates = [d.change for d in decisions if d.change is not None and not d.created]
    made = [changes.prepare("insert", inserts, actor)] if inserts else []
    return made + ([changes.prepare("update", updates, actor)] if updates else [])


async def locked_many(
    conn: AsyncConnection, unit_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, UnitRecord]:
    """The units with these ids that exist, locked for the rest of the transaction."""
    rows = await repository.fetch_many_for_update(conn, unit_ids, None)
    return {unit_id: UnitRecord.from_row(unit_id, row) for unit_id, row in rows.items()}


def validate_row(body: Mapping[str, Any], vocabularies: Vocabularies) -> dict[str, Any]:
    """A file row's unit fields, validated as a create's body; what an export writes beside
    them (the server's fields, the read-only status columns) is ignored."""
    fields = {name: value for name, value in body.items() if name not in _READ_ONLY}
    return validate_unit(fields, vocabularies)


async def replace(
    conn: Connection | Gathered,
    unit_id: uuid.UUID,
    body: Any,
    if_match: str | None,
    who: Caller,
    vocabularies: Vocabularies,
) -> Written:
    if isinstance(body, dict):
        _check_body_id(body, unit_id)
    return await _update(
        conn, unit_id, if_match, who, "replace", lambda _: validate_unit(body, vocabularies)
    )


async def patch(
    conn: Connection | Gathered,
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
    editable = {key: value for key, value in body.items() if key in EDITABLE_FIELDS}

    def merged(record: UnitRecord) -> dict[str, Any]:
        return validate_patched(record.fields, editable, vocabularies)

    return await _update(conn, unit_id, if_match, who, "patch", merged)


async def delete(conn: Connection, unit_id: uuid.UUID, if_match: str | None, who: Caller) -> None:
    record = await locked(conn, unit_id, if_match, who)
    await changes.write(conn, "delete", [changes.deleted(record)], who.actor)


def _history_entry(row: Mapping[Any, Any]) -> dict[str, Any]:
    return {
        "version": row["version"],
        "at": format_time(row["at"]),
        "actor": orjson.Fragment(row["actor"]),
        "action": row["action"],
        "changes": orjson.Fragment(row["changes"]),
    }


async def history(
    conn: Connection, unit_id: uuid.UUID, limit: int, cursor: str | None, who: Caller
) -> dict[str, Any]:
    admit = _admit(who)
    if admit is not None:
        row = await repository.fetch_doc(conn, unit_id)
        if row is None or not admit(load_stored(row[0])):
            raise _not_found(unit_id)  # a key bound by a policy cannot judge a deleted unit
    after = HISTORY_KEYSET.decode(cursor)
    before = after[0] if after else None
    rows = await repository.history_page(conn, unit_id, before, limit + 1)
    if not rows and before is None:
        raise _not_found(unit_id)
    shown, next_cursor = HISTORY_KEYSET.page(rows, limit, lambda row: (row["id"],))
    return {"data": [_history_entry(row) for row in shown], "nextCursor": next_cursor}


async def move_when_due(
    conn: Connection,
    unit_id: uuid.UUID,
    who: Caller,
    machine: str,
    due: tuple[str, str],
    action: str,
    event_type: str,
    move: Callable[[UnitRecord], None],
) -> bool:
    """Move a unit's `machine` state (`publishing`, `availability`) by `action` once its time
    has come: `due` is the status it must still have and the field holding that time. False
    when the unit no longer waits for it (moved by hand since, or not yet due)."""
    record = await locked(conn, unit_id, None, who)
    state: dict[str, Any] = getattr(record, machine)
    status, field = due
    when = parse_time(state[field])
    if state["status"] != status or when is None or when > utcnow():
        return False
    before = dict(state)
    move(record)
    diffs = {machine: {"from": before, "to": getattr(record, machine)}}
    await save_state(conn, record, who, action, event_type, diffs)
    return True


async def save_state(
    conn: Connection,
    record: UnitRecord,
    who: Caller,
    action: str,
    event_type: str,
    diffs: dict[str, Any],
) -> Written:
    """Persist a state machine's move: a new version, history entry and event."""
    change = changes.Change(record, action, event_type, diffs, search=False)
    await changes.write(conn, "update", [change], who.actor, admit=_admit(who))
    return Written(record.id, record.version, change.doc.encode())
