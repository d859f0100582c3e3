"""Imports: rows of a file become units through the one writer of unit changes.

Each row is validated exactly like a create (or a PUT, for an upsert of a unit that exists)
and judged against the requesting key's policy; a unit it changes gets its version, history
entry and event. Modes: `create` (every row a new unit; `id` and the other server fields are
ignored) or `upsert` (by `id`: the unit is replaced if it exists, else created with that id;
a row equal to the stored unit, compared as a PUT would, writes nothing). The report counts
the rows created, updated and unchanged (a dry run: what it would do).

- Not atomic: rows are written in batches, each committed together with the job's checkpoint
  (the last row handled, the counts, the errors so far), so a job taken over after a crash
  resumes after its last committed batch and writes no row twice.
- Atomic: every row is validated first; any failure fails the job with nothing written, else
  all rows are written in one transaction (on SQLite it holds the only write lock until done).
- Dry run: the same checks and report, nothing written.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.auth.service import Principal
from units_api.db import Database
from units_api.errors import ValidationFailed, bound_error
from units_api.filters.parser import parse_filter
from units_api.imports.readers import DEFAULT_MAX_EXPANDED, Row, open_reader
from units_api.jobs import queue
from units_api.jobs.work import JobFailed, take
from units_api.units import changes, service
from units_api.units.service import Vocabularies

KIND = "import"
BATCH = 1000  # rows a transaction writes (and a checkpoint covers)
READ_AHEAD = 2  # chunks read (and validated) ahead of the one being written
_YIELD_EVERY = 10  # rows read between turns of the event loop (a chunk being written goes on)
MAX_LISTED_ERRORS = 1000
MODES = ("create", "upsert")


@dataclass(frozen=True, slots=True)
class ImportParams:
    format: str
    mode: str
    dry_run: bool
    atomic: bool
    file: str  # the uploaded file's storage key
    policy: str | None  # the requesting key's, as it was when the import was asked for
    actor: dict[str, Any]
    # Where the upload was put (jobs.storage: Storage.place): a job run by another machine
    # with local files can name the one holding it. Empty from the command line, and in jobs
    # queued before it was recorded.
    place: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> ImportParams:
        return cls(
            params["format"],
            params["mode"],
            params["dryRun"],
            params["atomic"],
            params["upload"],
            params.get("policy"),
            params["actor"],
            params.get("place") or {},
        )

    def as_params(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "mode": self.mode,
            "dryRun": self.dry_run,
            "atomic": self.atomic,
            "upload": self.file,
            "policy": self.policy,
            "actor": self.actor,
            "place": dict(self.place),
        }


@dataclass(slots=True)
class Report:
    """How far an import is and what it found; saved as the job's checkpoint."""

    row: int = 0  # the last data row handled
    complete: bool = False  # an atomic import: written and committed
    ok: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    created: int = 0
    updated: int = 0
    unchanged: int = 0  # upserted rows equal to the stored unit: nothing written

    def fail(self, number: int, errors: list[tuple[str, str]]) -> None:
        self.failed += 1
        room = MAX_LISTED_ERRORS - len(self.errors)
        self.errors += [
            {"row": number, "field": bound_error(name), "message": bound_error(message)}
            for name, message in errors[:room]
        ]

    def result(self) -> dict[str, Any]:
        return {
            "rowsTotal": self.row,
            "rowsOk": self.ok,
            "rowsFailed": self.failed,
            "rowsCreated": self.created,
            "rowsUpdated": self.updated,
            "rowsUnchanged": self.unchanged,
            "errors": self.errors,
        }


class Tracker(Protocol):
    """Where an import reports: the job (progress, checkpoints) or the command line."""

    async def progress(self, done: int, total: int | None) -> None: ...

    async def checkpoint(
        self, conn: AsyncConnection, state: dict[str, Any], done: int, total: int | None
    ) -> None: ...


@dataclass(slots=True)
class _Chunk:
    """Rows read after row `first`, through row `last`: the valid ones, and the failures."""

    first: int
    items: list[_Item] = field(default_factory=list)
    failures: list[tuple[int, list[tuple[str, str]]]] = field(default_factory=list)
    last: int = 0

    def __post_init__(self) -> None:
        self.last = self.last or self.first


@dataclass(slots=True)
class _Judged:
    """A chunk judged: how many rows are fine (and of them how many create, update or change
    nothing), the failures, and the rows to write."""

    ok: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    failures: list[tuple[int, list[tuple[str, str]]]] = field(default_factory=list)
    rows: list[changes.Rows] = field(default_factory=list)


@dataclass(slots=True)
class _Item:
    number: int
    unit_id: uuid.UUID | None
    fields: dict[str, Any]


def _errors(exc: ValidationFailed) -> list[tuple[str, str]]:
    return [(error["field"], error["message"]) for error in exc.errors]


def _item(row: Row, mode: str, vocabularies: Vocabularies) -> _Item | list[tuple[str, str]]:
    """The row's unit id (upsert) and validated fields, or its errors."""
    if row.body is None:
        return row.errors
    raw_id = row.body.get("id")
    errors = list(row.errors)
    unit_id = None
    if mode == "upsert" and raw_id is not None:
        try:
            unit_id = uuid.UUID(str(raw_id))
        except ValueError:
            errors.append(("id", "must be a unit id (a UUID)"))
    try:
        fields = service.validate_row(row.body, vocabularies)
    except ValidationFailed as exc:
        errors += _errors(exc)
    if errors:
        return errors
    return _Item(row.number, unit_id, fields)


class Importer:
    def __init__(
        self,
        db: Database,
        params: ImportParams,
        vocabularies: Vocabularies,
        tracker: Tracker,
        report: Report | None = None,
        max_expanded: int = DEFAULT_MAX_EXPANDED,
    ) -> None:
        self.db = db
        self.max_expanded = max_expanded
        self.params = params
        self.vocabularies = vocabularies
        self.tracker = tracker
        self.report = report or Report()
        policy = parse_filter(params.policy, "policy") if params.policy else None
        self.who = service.RecordedCaller(params.actor, policy)

    async def _chunks(self, rows: Iterator[Row]) -> AsyncIterator[_Chunk]:
        """The rows after the report's last, read and validated, in chunks of at most BATCH
        rows (a unit named twice starts a new one, so the first write goes first). The
        event loop runs between rows, so a chunk can be written while the next is read."""
        resumed = self.report.row
        chunk = _Chunk(resumed)
        ids: set[uuid.UUID] = set()
        for row in rows:
            if row.number <= resumed:
                continue
            item = _item(row, self.params.mode, self.vocabularies)
            if isinstance(item, list):
                chunk.failures.append((row.number, item))
            else:
                if item.unit_id is not None and item.unit_id in ids:
                    yield chunk
                    chunk, ids = _Chunk(chunk.last), set()
                chunk.items.append(item)
                if item.unit_id is not None:
                    ids.add(item.unit_id)
            chunk.last = row.number
            if row.number % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if chunk.last - chunk.first >= BATCH:
                yield chunk
                chunk, ids = _Chunk(chunk.last), set()
        yield chunk

    async def _apply(self, conn: AsyncConnection, chunk: _Chunk, write: bool) -> None:
        """Judge a chunk against the units it names and the policy, write it (in `conn`'s
        transaction) and count it in the report."""
        stored = {}
        if self.params.mode == "upsert":
            ids = [item.unit_id for item in chunk.items if item.unit_id is not None]
            if ids:
                stored = await service.locked_many(conn, ids)
        await self._write(conn, chunk, self._judge(chunk, stored, write))

    def _judge(self, chunk: _Chunk, stored: Mapping[uuid.UUID, Any], write: bool) -> _Judged:
        """What a chunk changes, given those of the units it names that exist (`stored`),
        and its failures; with `write`, the rows to write, made."""
        wanted = [(item.unit_id, item.fields) for item in chunk.items]
        decided = service.decide_many(stored, wanted, self.who, "import", rows=write)
        judged = _Judged(failures=list(chunk.failures), rows=decided.rows)
        for item, decision in zip(chunk.items, decided.decisions, strict=True):
            if decision.refused is not None:
                judged.failures.append((item.number, [decision.refused]))
                continue
            judged.ok += 1
            if decision.change is None:
                judged.unchanged += 1
            elif decision.created:
                judged.created += 1
            else:
                judged.updated += 1
        return judged

    async def _write(self, conn: AsyncConnection, chunk: _Chunk, judged: _Judged) -> None:
        """Write a judged chunk's rows in `conn`'s transaction, and count it in the report
        (its failures in row order)."""
        for rows in judged.rows:
            await changes.write_rows(conn, rows)
        self.report.ok += judged.ok
        self.report.created += judged.created
        self.report.updated += judged.updated
        self.report.unchanged += judged.unchanged
        for number, errors in sorted(judged.failures, key=lambda failure: failure[0]):
            self.report.fail(number, errors)
        self.report.row = chunk.last

    async def run(self, path: Path) -> Report:
        if self.report.complete:
            return self.report  # written and committed before a crash; only the end remains
        if self.params.atomic:
            await self._run_atomic(path)
        else:
            await self._run_in_batches(path)
        return self.report

    async def _check(self, path: Path, share: int) -> None:
        """Judge every row after the report's last (nothing written), reporting progress up
        to `share` of 1000."""
        reader = open_reader(self.params.format, path, self.max_expanded)
        async for chunk in self._chunks(reader.rows()):
            async with self.db.read() as conn:
                await self._apply(conn, chunk, write=False)
            await self.tracker.progress(_permille(reader.fraction()) * share // 1000, 1000)

    async def _run_in_batches(self, path: Path) -> None:
        """Each chunk in a transaction of its own with the checkpoint. Chunks are read (and
        new units' rows made) up to READ_AHEAD ahead of the one being written, so the process
        reads while the database writes rather than waiting for it."""
        if self.params.dry_run:
            await self._check(path, 1000)
            return
        reader = open_reader(self.params.format, path, self.max_expanded)
        ready: asyncio.Queue[tuple[_Chunk, _Judged | None, int] | None] = asyncio.Queue(READ_AHEAD)

        async def read() -> None:
            async for chunk in self._chunks(reader.rows()):
                # New units depend on nothing stored: their rows are made here. An upsert
                # judges a chunk on its units, locked in the chunk's transaction.
                judged = (
                    self._judge(chunk, {}, write=True) if self.params.mode == "create" else None
                )
                await ready.put((chunk, judged, _permille(reader.fraction())))
            await ready.put(None)

        reading = asyncio.create_task(read())
        try:
            while (item := await take(ready, reading)) is not None:
                chunk, judged, done = item
                async with self.db.transaction() as conn:
                    if judged is None:
                        await self._apply(conn, chunk, write=True)
                    else:
                        await self._write(conn, chunk, judged)
                    await self.tracker.checkpoint(conn, asdict(self.report), done, 1000)
        finally:
            if not reading.done():
                reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)

    async def _run_atomic(self, path: Path) -> None:
        """Judge every row; then, if none failed, write them all in one transaction."""
        await self._check(path, 1000 if self.params.dry_run else 500)
        if self.report.failed:
            raise _Refused
        if self.params.dry_run:
            return
        self.report = Report()
        reader = open_reader(self.params.format, path, self.max_expanded)
        # SQLite: the transaction holds the only write lock, so progress waits for the end.
        progress = self.db.dialect != "sqlite"
        async with self.db.transaction() as conn:
            async for chunk in self._chunks(reader.rows()):
                await self._apply(conn, chunk, write=True)
                if self.report.failed:
                    raise _Refused  # a unit moved out of the policy meanwhile: write nothing
                if progress:
                    await self.tracker.progress(500 + _permille(reader.fraction()) // 2, 1000)
            self.report.complete = True
            await self.tracker.checkpoint(conn, asdict(self.report), 1000, 1000)


class _Refused(Exception):
    """An atomic import found failing rows: nothing was written."""


def _permille(fraction: float) -> int:
    return int(fraction * 1000)


async def run_import(
    db: Database,
    params: ImportParams,
    path: Path,
    vocabularies: Vocabularies,
    tracker: Tracker,
    resume: Mapping[str, Any] | None = None,
    max_expanded: int = DEFAULT_MAX_EXPANDED,
) -> Report:
    """Import the file at `path`; the report. An atomic import with failing rows raises
    JobFailed carrying its report, having written nothing. What the file expands to (gzip,
    an xlsx's parts) is at most `max_expanded` bytes."""
    resumed = Report(**resume) if resume else None
    importer = Importer(db, params, vocabularies, tracker, resumed, max_expanded)
    try:
        return await importer.run(path)
    except _Refused:
        report = importer.report
        raise JobFailed(
            f"{report.failed} row(s) failed; the import is atomic, so nothing was written.",
            row_count=report.row,
            result=orjson.dumps(report.result()).decode(),
        ) from None


async def create(
    conn: AsyncConnection, job_id: uuid.UUID, params: ImportParams, who: Principal
) -> uuid.UUID:
    return await queue.enqueue(
        conn, KIND, params.as_params(), owner_key_id=who.key_id, job_id=job_id
    )
