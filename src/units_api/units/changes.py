"""The one writer of unit changes: the unit row (its point for map search included), its
history entry, its outbox event, its search words and the unit count, for one unit or a batch.

Single writes, the state machines, bulk updates and seeding all write through here, inside
the caller's transaction. The writer owns versions: an update or a delete moves the record
to its next version and time before anything is written.

PostgreSQL: a batch is one statement, a chain of data-modifying CTEs over its rows (arrays,
or plain parameters for one unit), run as a prepared statement on the transaction's own
asyncpg connection, so a single write is one round trip; large inserts go through binary
COPY instead. SQLite: one
statement per table (its single writer makes round trips cheap), events are given their
feed positions at once (see `events/sequencer.py`), and the points' R*Tree is kept beside units.
"""

# The statements below are built once, at import, from the tables' own column names; every
# value is a parameter.
# ruff: noqa: S608

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import bindparam, delete, select, text, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api import tracing
from units_api.clock import utcnow
from units_api.db import EVENTS_WRITTEN, Connection, Number, driver_connection
from units_api.errors import Forbidden
from units_api.events.sequencer import take_positions
from units_api.events.tables import events
from units_api.filters.evaluate import Predicate
from units_api.http.json import dumps_plain
from units_api.ids import uuid7
from units_api.search.normalize import touches_search
from units_api.search.words import (
    SIGNATURE_COLUMNS,
    SIGNATURE_PARTS,
    IndexedText,
    index_text,
    search_rowid,
    signature,
)
from units_api.units.record import UnitRecord, actor_text, columns_of, creation_changes
from units_api.units.tables import COUNTER_SHARDS, unit_counters, unit_history, units

Kind = Literal["insert", "update", "delete"]
# From this many units an insert is copied in (COPY) rather than sent as arrays.
COPY_FROM = 500


class Moved(Exception):
    """An updated unit was no longer at the version it was read at: nothing was written."""


@dataclass(slots=True)
class Change:
    """One unit's change. `record` is the unit after the change (a delete: as it was); for
    an update or delete it still carries the version it was read at."""

    record: UnitRecord
    action: str  # the history entry's action: create, patch, bulk, publish...
    event: str  # the event type: unit.created, unit.updated, unit.published...
    changes: dict[str, Any]  # field-level diff, as history and the event show it
    search: bool = True  # whether its searchable text changed (its words are rewritten)
    doc: str = ""  # set by the writer: the record as the event carries it
    # An update of these editable fields alone, its publishing and availability as they were
    # (the fields of `changes`): SQLite writes only their columns. None: any column may change.
    touched: frozenset[str] | None = None


def created(record: UnitRecord, action: str = "create") -> Change:
    return Change(record, action, "unit.created", creation_changes(record.fields))


def updated(record: UnitRecord, action: str, diffs: dict[str, Any]) -> Change:
    """`record` given new editable fields (`diffs`, by `record.diff`), nothing else of it
    changed: SQLite writes only their columns."""
    return Change(
        record, action, "unit.updated", diffs, touches_search(diffs), touched=frozenset(diffs)
    )


def deleted(record: UnitRecord) -> Change:
    return Change(record, "delete", "unit.deleted", {}, search=False)


@dataclass(slots=True)
class Rows:
    """A batch as the tables receive it: made by `prepare`, written by `write_rows` (it can be
    made in another process)."""

    kind: Kind
    units: list[dict[str, Any]]
    history: list[dict[str, Any]]
    events: list[dict[str, Any]]
    words: list[tuple[uuid.UUID, datetime, IndexedText]]
    deleted_docs: list[str]  # a delete's records as they were
    trace_context: str | None = None  # the writer's traceparent, kept with its events
    # An update's columns that can differ from what is stored, by unit (None: every column):
    # SQLite sets no other (`record.columns_of`).
    columns: list[tuple[str, ...] | None] = field(default_factory=list)


def prepare(
    kind: Kind, batch: Sequence[Change], actor: dict[str, Any], admit: Predicate | None = None
) -> Rows:
    """The rows of a batch; moves updated and deleted records to their next version. A
    record that `admit` refuses (as it will be stored) is Forbidden, and nothing is made."""
    now = utcnow()
    actor_json = actor_text(actor)
    trace = tracing.traceparent() if tracing.on else None
    rows = Rows(kind, [], [], [], [], [], trace)
    for change in batch:
        record = change.record
        if kind == "delete":
            doc = record.render().decode()  # the event carries the unit as it was
            rows.deleted_docs.append(doc)
        if kind != "insert":
            record.version += 1
            record.updated_at = now
        if admit is not None and not admit(record.document()):
            raise Forbidden("The result would fall outside this API key's policy.")
        if kind != "delete":
            columns = record.columns()
            doc = columns["doc"]
            rows.units.append({"id": record.id, "created_at": record.created_at, **columns})
        if kind == "update":
            rows.columns.append(None if change.touched is None else columns_of(change.touched))
        change.doc = doc
        changes = dumps_plain(change.changes).decode()
        data = '{"unit":' + doc + (',"changes":' + changes if kind == "update" else "") + "}"
        rows.history.append(
            {
                "unit_id": record.id,
                "version": record.version,
                "at": record.updated_at,
                "actor": actor_json,
                "action": change.action,
                "changes": changes,
            }
        )
        rows.events.append(
            {
                "id": uuid7(),
                "type": change.event,
                "occurred_at": now,
                "unit_id": record.id,
                "version": record.version,
                "actor": actor_json,
                "data": data,
            }
        )
        if trace is not None:
            rows.events[-1]["trace_context"] = trace
        if kind != "delete" and change.search:
            rows.words.append((record.id, record.created_at, index_text(record.fields)))
    return rows


async def write(
    conn: Connection,
    kind: Kind,
    batch: Sequence[Change],
    actor: dict[str, Any],
    last: bool = False,
    admit: Predicate | None = None,
) -> None:
    """Write a batch of one kind of change (inserts, updates or deletes) in `conn`'s
    transaction. `last`: the operation runs no statement after this one. `admit`: the
    caller's policy, judged on each record as it will be stored.

    An update writes only units still at the version they were read at; a unit read without
    a lock that has moved on since raises Moved, and nothing is written.
    """
    if batch:
        await write_rows(conn, prepare(kind, batch, actor, admit), last)


async def write_rows(conn: Connection, rows: Rows, last: bool = False) -> None:
    if not rows.history:
        return
    conn.info[EVENTS_WRITTEN] = True
    if isinstance(conn, AsyncConnection) and conn.dialect.name != "postgresql":
        await _write_sqlite(conn, rows)
        return
    copy = rows.kind == "insert" and len(rows.units) >= COPY_FROM
    driver = await driver_connection(conn, alone=last and not copy)
    if copy:
        await _copy_postgres(driver, rows)
        return
    one = len(rows.history) == 1
    arguments = _pg_arguments(rows)
    if one:
        arguments = [arguments[0], *(column[0] for column in arguments[1:])]
    statements = _PG_STATEMENTS
    if rows.trace_context is not None:
        statements = _PG_TRACED_STATEMENTS
        arguments.append(rows.trace_context)
    written = await driver.fetchval(statements[rows.kind, one], *arguments)
    if written != len(rows.history):
        # A unit read without a lock had moved on: alone, it wrote nothing; in a batch (units
        # gathered, `gathering.py`), the batch's transaction is rolled back. In a batch of
        # locked units no unit can move.
        raise Moved


# --- PostgreSQL -------------------------------------------------------------------------

_PG = postgresql.dialect()  # type: ignore[no-untyped-call]
_UNIT_COLUMNS = [column.name for column in units.columns]
_DELETED_COLUMNS = ["id", "version", "updated_at", "doc"]
_NUMERIC_COLUMNS = frozenset(c.name for c in units.columns if isinstance(c.type, Number))
# Per row besides the unit's columns: its history entry's and event's own values.
_EXTRA_COLUMNS = {
    "action": "text",
    "changes": "text",
    "event_id": "uuid",
    "event_type": "text",
    "occurred_at": "timestamptz",
    "words": "text",
    "ranking": "text",
    **dict.fromkeys(SIGNATURE_COLUMNS, "int8"),
}
# The search row's signature (search.words.signature), one column per part.
_SIGNED = ", ".join(SIGNATURE_COLUMNS)
_SIGNED_AGAIN = ", ".join(f"{name} = excluded.{name}" for name in SIGNATURE_COLUMNS)
# The counter shard of the change trigger (the transaction's): a transaction holds one row.
_SHARD = f"shard = txid_current() % {COUNTER_SHARDS}"
_EVENT_DATA = {
    "insert": """'{"unit":' || doc || '}'""",
    "update": """'{"unit":' || doc || ',"changes":' || changes || '}'""",
    "delete": """'{"unit":' || doc || '}'""",
}


def _param_type(name: str) -> str:
    """A column's parameter type: its own, but a number is sent as its exact text and cast
    (asyncpg's binary numeric encoding cost a unit's five numbers ~40 us of client CPU; the
    text is a few bytes and PostgreSQL reads it exactly)."""
    return "text" if name in _NUMERIC_COLUMNS else str(units.c[name].type.compile(dialect=_PG))


def _rows_cte(names: list[str], one: bool) -> str:
    """`r`: the batch's rows ($1 is the actor), one array parameter per column; for a single
    unit one plain parameter per column, which costs the client a third less to send."""
    types = [_param_type(n) for n in names]
    types += list(_EXTRA_COLUMNS.values())
    columns = [*names, *_EXTRA_COLUMNS]
    casts = [
        f"::{units.c[column].type.compile(dialect=_PG)}" if column in _NUMERIC_COLUMNS else ""
        for column in columns
    ]
    if one:
        values = ", ".join(
            f"${i + 2}::{kind}{casts[i]} AS {columns[i]}" for i, kind in enumerate(types)
        )
        return f"r AS (SELECT {values})"
    arrays = ", ".join(
        f"${i + 2}::{kind}[]{casts[i] and casts[i] + '[]'}" for i, kind in enumerate(types)
    )
    return f"r AS (SELECT * FROM unnest({arrays}) AS r({', '.join(columns)}))"


def _pg_statement(kind: Kind, one: bool, traced: bool = False) -> str:
    """One statement for a batch: the rows, then one data-modifying CTE per table. It gives
    the number of units written: an update writes only units still at the version before
    the row's, and only their history, events and words. `traced`: the events keep the
    writer's trace context, the last parameter."""
    names = _DELETED_COLUMNS if kind == "delete" else _UNIT_COLUMNS
    trace_column, trace_value = "", ""
    if traced:
        trace_column = ", trace_context"
        trace_value = f", ${len(names) + len(_EXTRA_COLUMNS) + 2}::text"
    if kind == "insert":
        columns = ", ".join(_UNIT_COLUMNS)
        unit = f"INSERT INTO units ({columns}) SELECT {columns} FROM r RETURNING id"
    elif kind == "update":
        kept = ("id", "created_at")
        assignments = ", ".join(f"{n} = r.{n}" for n in _UNIT_COLUMNS if n not in kept)
        unit = (
            f"UPDATE units SET {assignments} FROM r "
            "WHERE units.id = r.id AND units.version = r.version - 1 RETURNING units.id"
        )
    else:
        # Search rows go with their unit (ON DELETE CASCADE).
        unit = "DELETE FROM units WHERE id IN (SELECT id FROM r) RETURNING id"
    written = "r.id IN (SELECT id FROM u)"
    parts = [
        _rows_cte(names, one),
        f"u AS ({unit})",
        "h AS (INSERT INTO unit_history (unit_id, version, at, actor, action, changes) "
        f"SELECT id, version, updated_at, $1, action, changes FROM r WHERE {written})",
        "e AS (INSERT INTO events (id, type, occurred_at, unit_id, version, actor, data"
        f"{trace_column}) "
        f"SELECT event_id, event_type, occurred_at, id, version, $1, {_EVENT_DATA[kind]}"
        f"{trace_value} FROM r WHERE {written})",
    ]
    if kind != "delete":
        # The search row: the unit's words and its creation time, the order a search walks.
        parts.append(
            f"w AS (INSERT INTO unit_search (unit_id, created_at, vector, ranking, {_SIGNED}) "
            "SELECT id, created_at, array_to_tsvector(string_to_array(words, ' ')), "
            f"array_to_tsvector(string_to_array(ranking, ' ')), {_SIGNED} FROM r "
            f"WHERE words IS NOT NULL AND {written} "
            "ON CONFLICT (unit_id) DO UPDATE SET vector = excluded.vector, "
            f"ranking = excluded.ranking, {_SIGNED_AGAIN})"
        )
    if kind != "update":
        sign = "+" if kind == "insert" else "-"
        parts.append(
            f"c AS (UPDATE unit_counters SET n = n {sign} (SELECT count(*) FROM u) WHERE {_SHARD})"
        )
    return "WITH " + ",\n".join(parts) + "\nSELECT count(*) FROM u"


_PG_STATEMENTS: dict[tuple[Kind, bool], str] = {
    (kind, one): _pg_statement(kind, one)
    for kind in ("insert", "update", "delete")
    for one in (True, False)
}
_PG_TRACED_STATEMENTS: dict[tuple[Kind, bool], str] = {
    (kind, one): _pg_statement(kind, one, traced=True)
    for kind in ("insert", "update", "delete")
    for one in (True, False)
}


def _pg_arguments(rows: Rows) -> list[Any]:
    if rows.kind == "delete":
        units_part = [
            [row["unit_id"] for row in rows.history],
            [row["version"] for row in rows.history],
            [row["at"] for row in rows.history],
            rows.deleted_docs,
        ]
    else:
        units_part = [
            [_number_text(row[name]) for row in rows.units]
            if name in _NUMERIC_COLUMNS
            else [row[name] for row in rows.units]
            for name in _UNIT_COLUMNS
        ]
    words = {unit_id: found for unit_id, _, found in rows.words}
    return [
        rows.history[0]["actor"],
        *units_part,
        [row["action"] for row in rows.history],
        [row["changes"] for row in rows.history],
        [row["id"] for row in rows.events],
        [row["type"] for row in rows.events],
        [row["occurred_at"] for row in rows.events],
        [_joined(words, row["unit_id"], "lexemes") for row in rows.history],
        [_joined(words, row["unit_id"], "ranking") for row in rows.history],
        *_signature_columns([words.get(row["unit_id"]) for row in rows.history]),
    ]


def _signature_columns(found: list[IndexedText | None]) -> list[list[int | None]]:
    """The signatures of units' search words, as one list per signature column."""
    signed = [None if words is None else signature(words.lexemes) for words in found]
    return [
        [None if parts is None else parts[part] for parts in signed]
        for part in range(SIGNATURE_PARTS)
    ]


def _joined(words: dict[uuid.UUID, IndexedText], unit_id: uuid.UUID, part: str) -> str | None:
    found = words.get(unit_id)
    return None if found is None else " ".join(getattr(found, part))


def _number_text(value: Any) -> str | None:
    """A number as PostgreSQL reads it exactly (an int's or Decimal's own text)."""
    return None if value is None else str(value)


_SEARCH_FROM_ARRAYS = (
    f"INSERT INTO unit_search (unit_id, created_at, vector, ranking, {_SIGNED}) "
    "SELECT u, c, array_to_tsvector(string_to_array(w, ' ')), "
    f"array_to_tsvector(string_to_array(k, ' ')), {_SIGNED} "
    "FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], "
    + ", ".join(f"${5 + part}::int8[]" for part in range(SIGNATURE_PARTS))
    + f") AS t(u, c, w, k, {_SIGNED})"
)


async def _copy_postgres(driver: asyncpg.Connection, rows: Rows) -> None:
    """A large insert: binary COPY of units, history and events, then words and count."""
    for table, batch in ((units, rows.units), (unit_history, rows.history), (events, rows.events)):
        names = list(batch[0])
        records = [tuple(row[name] for name in names) for row in batch]
        await driver.copy_records_to_table(table.name, records=records, columns=names)
    await driver.execute(
        _SEARCH_FROM_ARRAYS,
        [unit_id for unit_id, _, _ in rows.words],
        [created_at for _, created_at, _ in rows.words],
        [" ".join(words.lexemes) for _, _, words in rows.words],
        [" ".join(words.ranking) for _, _, words in rows.words],
        *_signature_columns([words for _, _, words in rows.words]),
    )
    await driver.execute(f"UPDATE unit_counters SET n = n + $1 WHERE {_SHARD}", len(rows.units))


# --- SQLite -----------------------------------------------------------------------------

_INSERT_UNIT = units.insert()
_UPDATE_UNIT = update(units).where(
    units.c.id == bindparam("unit_id"), units.c.version == bindparam("read_version")
)
_DELETE_UNIT = delete(units).where(units.c.id == bindparam("unit_id"))
_KEYS = ("id", "created_at")
_INSERT_HISTORY = unit_history.insert()
_INSERT_EVENT = events.insert()
_BUMP_COUNT = (
    update(unit_counters)
    .where(unit_counters.c.shard == 0)
    .values(n=unit_counters.c.n + bindparam("delta"))
)
# The FTS rowid is taken from the unit id's random bits, so a unit's row is found without a
# lookup; the `ascii` tokenizer keeps the already-normalised words whole.
_FTS_DELETE = text("DELETE FROM unit_search WHERE rowid = :rowid")
_FTS_INSERT = text(
    "INSERT INTO unit_search (rowid, unit_id, body, ranking) VALUES (:rowid, :id, :body, :ranking)"
)


# Map search's R*Tree of the units' points, keyed as the search table is, its auxiliary
# unit_id leading to the unit (filters.sql reads it for the coarse test only: it keeps 32-bit
# floats, rounded outwards).
_POINT_DELETE = text("DELETE FROM unit_locations WHERE id = :rowid")
_POINT_INSERT = text(
    "INSERT INTO unit_locations (id, min_lng, max_lng, min_lat, max_lat, unit_id) "
    "VALUES (:rowid, :lng, :lng, :lat, :lat, :id)"
)


def _updates(rows: Rows) -> list[list[dict[str, Any]]]:
    """An update's parameters, a list for each set of columns written: one statement each."""
    groups: dict[tuple[str, ...] | None, list[dict[str, Any]]] = {}
    for row, names in zip(rows.units, rows.columns, strict=True):
        if names is None:
            values = {name: value for name, value in row.items() if name not in _KEYS}
        else:
            values = {name: row[name] for name in names}
        values["unit_id"], values["read_version"] = row["id"], row["version"] - 1
        groups.setdefault(names, []).append(values)
    return list(groups.values())


async def _write_sqlite_points(conn: AsyncConnection, rows: Rows, ids: list[uuid.UUID]) -> None:
    placed = rows.units
    if rows.kind == "update":  # those whose point may have moved
        placed = [row for row, names in zip(placed, rows.columns, strict=True) if _moves(names)]
        ids = [row["id"] for row in placed]
    if rows.kind != "insert" and ids:
        await conn.execute(_POINT_DELETE, [{"rowid": search_rowid(i)} for i in ids])
    located = [
        {
            "rowid": search_rowid(row["id"]),
            "id": row["id"].hex,
            "lng": row["lng"],
            "lat": row["lat"],
        }
        for row in placed
        if row["lng"] is not None
    ]
    if located:
        await conn.execute(_POINT_INSERT, located)


def _moves(names: tuple[str, ...] | None) -> bool:
    return names is None or "lng" in names


_VERSIONS = select(units.c.id, units.c.version).where(
    units.c.id.in_(bindparam("ids", expanding=True))
)


async def moved_sqlite(conn: AsyncConnection, batches: Sequence[Rows]) -> list[int]:
    """SQLite, within the writer's turn (which no other write can enter): of these updates of
    one unit each, those that would find their unit moved on (`Moved`), by their place: its
    version is no longer the one read, or an earlier one here that is written updates it
    too."""
    ids = [rows.units[0]["id"] for rows in batches]
    stored = {unit_id: version for unit_id, version in await conn.execute(_VERSIONS, {"ids": ids})}
    moved: list[int] = []
    seen: set[uuid.UUID] = set()
    for place, rows in enumerate(batches):
        unit = rows.units[0]
        if unit["id"] in seen or stored.get(unit["id"]) != unit["version"] - 1:
            moved.append(place)
        else:
            seen.add(unit["id"])  # written: a later update of it would find it moved
    return moved


async def _write_sqlite(conn: AsyncConnection, rows: Rows) -> None:
    ids = [row["unit_id"] for row in rows.history]
    if rows.kind == "insert":
        await conn.execute(_INSERT_UNIT, rows.units)
    elif rows.kind == "update":
        written = 0
        for updates in _updates(rows):
            written += (await conn.execute(_UPDATE_UNIT, updates)).rowcount
        if written != len(rows.units):
            raise Moved
    else:
        await conn.execute(_DELETE_UNIT, [{"unit_id": unit_id} for unit_id in ids])
    await _write_sqlite_points(conn, rows, ids)
    replaced = ids if rows.kind == "delete" else [unit_id for unit_id, _, _ in rows.words]
    if rows.kind != "insert" and replaced:
        await conn.execute(_FTS_DELETE, [{"rowid": search_rowid(i)} for i in replaced])
    if rows.words:
        await conn.execute(
            _FTS_INSERT,
            [
                {
                    "rowid": search_rowid(unit_id),
                    "id": unit_id.hex,
                    "body": " ".join(words.lexemes),
                    "ranking": " ".join(words.ranking),
                }
                for unit_id, _, words in rows.words
            ],
        )
    await conn.execute(_INSERT_HISTORY, rows.history)
    await conn.execute(_INSERT_EVENT, rows.events)
    await take_positions(conn, len(rows.events))
    if rows.kind != "update":
        delta = len(ids) if rows.kind == "insert" else -len(ids)
        await conn.execute(_BUMP_COUNT, {"delta": delta})
