"""Idempotency-Key: the first response to a key is stored and replayed for the TTL.

The key is claimed in its own short transaction (so a twin sees it in flight and gets a
409); the response is stored in the operation's own transaction, so it exists exactly when
the operation committed. A failed operation releases the key for a retry.

On PostgreSQL the operation's transaction also locks its claim while it runs: a claim still
in flight but no longer locked belongs to a transaction that ended without an answer (rolled
back, its connection cut at commit, its process gone, the release lost with the database), and
a retry takes it over at once. On SQLite such a claim is taken over after two minutes.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import orjson
from sqlalchemy import delete, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from units_api.clock import utcnow
from units_api.db import Connection, Database
from units_api.errors import IdempotencyInFlight, IdempotencyMismatch, InvalidHeader
from units_api.http.tables import idempotency_keys as table

HEADER = "idempotency-key"
HEADER_NAME = "Idempotency-Key"
# What _valid_key accepts, as HTTP leaves it (without whitespace at either end).
KEY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$",
}
REPLAYED = "Idempotent-Replayed"
_KEPT_HEADERS = ("content-type", "location", "etag")
# A claim this old belongs to a process that died mid-request; it may be taken over.
_ABANDONED_AFTER = timedelta(minutes=2)

Operation = Callable[[AsyncConnection], Awaitable[Response]]
# An operation whose statements all run on the driver (see Database.operation).
DriverOperation = Callable[[Connection], Awaitable[Response]]


def _valid_key(key: str) -> str:
    if not 1 <= len(key) <= 255 or not key.isascii() or not key.isprintable():
        raise InvalidHeader(HEADER_NAME, "must be 1 to 255 printable ASCII characters")
    return key


def request_fingerprint(method: str, path: str, body: bytes) -> str:
    digest = hashlib.sha256(f"{method} {path}\n".encode())
    digest.update(body)
    return digest.hexdigest()


def _replay(status: int, headers_json: str | None, body: bytes | None) -> Response:
    headers = orjson.loads(headers_json or "{}")
    headers[REPLAYED] = "true"
    return Response(content=body or b"", status_code=status, headers=headers)


class Idempotency:
    def __init__(self, db: Database, ttl_seconds: int) -> None:
        self._db = db
        self._ttl = timedelta(seconds=ttl_seconds)

    @staticmethod
    def asked(request: Request) -> bool:
        """Whether the request carries an Idempotency-Key."""
        return request.headers.get(HEADER) is not None

    async def run(
        self, request: Request, owner: str, body: bytes, operation: Operation, long: bool = False
    ) -> Response:
        """Run `operation` in one transaction, honouring the request's Idempotency-Key.
        `long`: the operation may write many rows (`Database.transaction`)."""
        if request.headers.get(HEADER) is None:
            async with self._db.transaction(lone=True, long=long) as conn:
                return await operation(conn)
        return await self._run_with_key(request, owner, body, operation, long)

    async def run_on_driver(
        self, request: Request, owner: str, body: bytes, operation: DriverOperation
    ) -> Response:
        """`run` for an operation whose statements all run on the driver: without a key, in
        `Database.operation` (with one, its response is stored in the same transaction)."""
        if request.headers.get(HEADER) is None:
            async with self._db.operation() as conn:
                return await operation(conn)
        return await self._run_with_key(request, owner, body, operation)

    async def _run_with_key(
        self, request: Request, owner: str, body: bytes, operation: Operation, long: bool = False
    ) -> Response:
        key = _valid_key(request.headers[HEADER])
        fingerprint = request_fingerprint(request.method, request.url.path, body)
        claimed = await self._claim(owner, key, fingerprint)
        if isinstance(claimed, Response):
            return claimed
        try:
            async with self._db.transaction(long=long) as conn:
                await self._hold(conn, owner, key, claimed)
                response = await operation(conn)
                await self._store(conn, owner, key, response)
            return response
        except BaseException:
            await asyncio.shield(self._release(owner, key))
            raise

    async def _claim(self, owner: str, key: str, request_hash: str) -> Response | datetime:
        """The stored answer to replay, or the time of this request's new claim."""
        now = utcnow()
        try:
            async with self._db.transaction() as conn:
                locking = conn.dialect.name == "postgresql"
                row = (
                    (
                        await conn.execute(
                            select(table)
                            .where(table.c.owner == owner, table.c.key == key)
                            # A claim locked by its operation is in flight: the insert fails.
                            .with_for_update(skip_locked=locking)
                        )
                    )
                    .mappings()
                    .first()
                )
                if row is not None and self._is_live(row, now, locking):
                    return self._existing(row, request_hash)
                if row is not None:
                    await conn.execute(
                        delete(table).where(table.c.owner == owner, table.c.key == key)
                    )
                await conn.execute(
                    table.insert().values(
                        owner=owner,
                        key=key,
                        request_hash=request_hash,
                        state="in_flight",
                        created_at=now,
                    )
                )
        except IntegrityError:
            raise IdempotencyInFlight(
                "A request with this Idempotency-Key is in progress."
            ) from None
        return now

    def _is_live(self, row: RowMapping, now: datetime, locking: bool) -> bool:
        """Whether `row` stands: a stored answer within the TTL, or a claim still in flight
        (on PostgreSQL one not locked by its operation is not: see the module's text)."""
        if row["state"] == "in_flight":
            return not locking and bool(row["created_at"] > now - _ABANDONED_AFTER)
        return bool(row["created_at"] > now - self._ttl)

    @staticmethod
    async def _hold(conn: AsyncConnection, owner: str, key: str, claimed: datetime) -> None:
        """PostgreSQL: lock this request's claim for the operation's transaction. A claim
        taken over meanwhile (by a twin that found it not yet locked) is the twin's: a 409."""
        if conn.dialect.name != "postgresql":
            return
        held = await conn.execute(
            select(table.c.key)
            .where(
                table.c.owner == owner,
                table.c.key == key,
                table.c.created_at == claimed,
                table.c.state == "in_flight",
            )
            .with_for_update()
        )
        if held.first() is None:
            raise IdempotencyInFlight("A request with this Idempotency-Key is in progress.")

    @staticmethod
    def _existing(row: RowMapping, request_hash: str) -> Response:
        if row["request_hash"] != request_hash:
            raise IdempotencyMismatch()
        if row["state"] != "done":
            raise IdempotencyInFlight("A request with this Idempotency-Key is in progress.")
        return _replay(row["status_code"], row["headers"], row["body"])

    async def _store(self, conn: AsyncConnection, owner: str, key: str, response: Response) -> None:
        headers = {k: v for k, v in response.headers.items() if k in _KEPT_HEADERS}
        await conn.execute(
            update(table)
            .where(table.c.owner == owner, table.c.key == key)
            .values(
                state="done",
                status_code=response.status_code,
                headers=orjson.dumps(headers).decode(),
                body=bytes(response.body),
            )
        )

    async def sweep(self) -> int:
        """Delete the records no request can replay any more; how many."""
        cutoff = utcnow() - max(self._ttl, _ABANDONED_AFTER)
        async with self._db.transaction() as conn:
            result = await conn.execute(delete(table).where(table.c.created_at < cutoff))
        return int(result.rowcount)

    async def _release(self, owner: str, key: str) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(
                delete(table).where(
                    table.c.owner == owner, table.c.key == key, table.c.state == "in_flight"
                )
            )
