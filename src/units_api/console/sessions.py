"""Console sessions: signing in with a key, the cookie that stands for it, its CSRF token.

The cookie holds a random token; the database keeps the token's hash and the key's stored
hash, never the key. A session ends at sign-out, after its hours, or at the first request
after its key is revoked or expires (the key is checked as the API checks it)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.auth.service import Authenticator, Principal
from units_api.clock import utcnow
from units_api.console import repository
from units_api.db import Database
from units_api.errors import Unauthorized

COOKIE = "units_console"
MAX_TOKEN = 100
# The sign-in form's own token (no session yet): a cookie and a hidden field that must match.
SIGNIN_COOKIE = "units_console_signin"


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    token: str
    key_hash: str
    principal: Principal
    expires_at: datetime

    @property
    def csrf(self) -> str:
        return csrf_token(self.token)


def csrf_token(token: str) -> str:
    """The CSRF token of a session or sign-in form: derived from its secret cookie, which a
    page of another site can neither read nor send."""
    return hmac.new(token.encode(), b"console-csrf", hashlib.sha256).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


def same_token(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def session_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def start(
    conn: AsyncConnection, principal: Principal, key_hash: str, hours: float
) -> Session:
    """A new session acting as `principal`, whose key's stored hash is `key_hash`."""
    token = new_token()
    now = utcnow()
    expires = now + timedelta(hours=hours)
    values = {
        "id": session_id(token),
        "key_id": principal.key_id,
        "key_hash": key_hash,
        "created_at": now,
        "expires_at": expires,
    }
    await repository.insert(conn, values)
    return Session(session_id(token), token, key_hash, principal, expires)


async def find(conn: AsyncConnection, token: str) -> RowMapping | None:
    """The live session of a cookie's token, or None (unknown, or over its time). Its key
    is checked after, as the API checks it (`Authenticator.resolve`)."""
    row = await repository.by_id(conn, session_id(token))
    if row is None or row["expires_at"] <= utcnow():
        return None
    return row


@dataclass(slots=True)
class _Known:
    row: RowMapping
    loaded: float


class Sessions:
    """Console sessions as the pages meet them: a cookie's session read from the database,
    trusted by this process for `cache_seconds` as the key itself is (`Authenticator`), its
    key checked on every request as the API checks a key."""

    LIMIT = 10_000  # sessions a process remembers; past it, those over their time leave

    def __init__(self, db: Database, authenticator: Authenticator, cache_seconds: float) -> None:
        self._db = db
        self._authenticator = authenticator
        self._ttl = cache_seconds
        self._known: dict[str, _Known] = {}

    async def resume(self, token: str | None) -> Session | None:
        """The live session of a cookie's token; a session whose key was revoked or has
        expired is ended, and None returned."""
        if not token or len(token) > MAX_TOKEN:
            return None
        row = await self._row(token)
        if row is None:
            return None
        try:
            principal = await self._authenticator.resolve(row["key_hash"])
        except Unauthorized:
            await self.end(row["id"])
            return None
        return Session(row["id"], token, row["key_hash"], principal, row["expires_at"])

    async def _row(self, token: str) -> RowMapping | None:
        known = self._known.get(session_id(token))
        now = time.monotonic()
        if known is None or now - known.loaded > self._ttl:
            async with self._db.read() as conn:
                row = await find(conn, token)
            if row is None:
                self._known.pop(session_id(token), None)
                return None
            known = self._remember(row, now)
        if known.row["expires_at"] <= utcnow():
            return None
        return known.row

    def _remember(self, row: RowMapping, now: float) -> _Known:
        if len(self._known) >= self.LIMIT:
            self._known = {k: v for k, v in self._known.items() if now - v.loaded <= self._ttl}
        known = self._known[row["id"]] = _Known(row, now)
        return known

    async def start(self, principal: Principal, key_hash: str, hours: float) -> Session:
        async with self._db.transaction() as conn:
            return await start(conn, principal, key_hash, hours)

    async def end(self, session_id: str) -> None:
        self._known.pop(session_id, None)
        async with self._db.transaction() as conn:
            await end(conn, session_id)


async def end(conn: AsyncConnection, session_id: str) -> None:
    await repository.remove(conn, session_id)


async def sweep(conn: AsyncConnection) -> int:
    """Delete sessions past their time."""
    return await repository.remove_expired(conn, utcnow())
