"""Console sessions: signing in with a key, the cookie that stands for it, its CSRF token.

The cookie holds a random token; the database keeps the token's hash and the key's stored
hash, never the key. A session ends at sign-out, after its hours, or at the first request
after its key is revoked or expires (the key is checked as the API checks it)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
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


async def find(conn: AsyncConnection, token: str | None) -> RowMapping | None:
    """The live session of a cookie's token, or None (no cookie, unknown, or over its
    time). Its key is checked after, as the API checks it (`Authenticator.resolve`)."""
    if not token or len(token) > 100:
        return None
    row = await repository.by_id(conn, session_id(token))
    if row is None or row["expires_at"] <= utcnow():
        return None
    return row


async def resume(db: Database, authenticator: Authenticator, token: str | None) -> Session | None:
    """The live session of a cookie's token, its key checked as the API checks a key; a
    session whose key was revoked or has expired is ended, and None returned."""
    if not token:
        return None
    async with db.read() as conn:
        row = await find(conn, token)
    if row is None:
        return None
    try:
        principal = await authenticator.resolve(row["key_hash"])
    except Unauthorized:
        async with db.transaction() as conn:
            await end(conn, row["id"])
        return None
    return Session(row["id"], token, row["key_hash"], principal, row["expires_at"])


async def end(conn: AsyncConnection, session_id: str) -> None:
    await repository.remove(conn, session_id)


async def sweep(conn: AsyncConnection) -> int:
    """Delete sessions past their time."""
    return await repository.remove_expired(conn, utcnow())
