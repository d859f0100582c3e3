"""API keys: issuing, revoking, and resolving a bearer secret to a principal."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import orjson
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.auth import repository
from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.scopes import grants
from units_api.auth.secrets import hash_secret, new_secret, same_hash, visible_prefix
from units_api.clock import format_time, parse_time, utcnow
from units_api.db import Database
from units_api.errors import (
    Forbidden,
    InvalidParameter,
    NotFound,
    Unauthorized,
    ValidationFailed,
)
from units_api.filters.evaluate import compile_filter
from units_api.filters.parser import parse_filter
from units_api.filters.tree import Node
from units_api.http.paging import UUID, Keyset
from units_api.http.rates import Rate, parse_rate
from units_api.ids import uuid7
from units_api.units.filtering import UNIT_CATALOGUE

LAST_USED_RESOLUTION = timedelta(seconds=60)
# Keys are listed in id order (UUIDv7: oldest first), after the last key's id.
KEYS_KEYSET = Keyset("api-keys", (UUID,))


@dataclass(frozen=True, slots=True)
class Principal:
    key_id: uuid.UUID
    name: str
    scopes: frozenset[str]
    policy: str | None
    rate: Rate | None
    expires_at: datetime | None
    revoked_at: datetime | None
    policy_tree: Node | None = None

    @property
    def actor(self) -> dict[str, Any]:
        return {"type": "apiKey", "id": str(self.key_id), "name": self.name}

    def require(self, scope: str) -> None:
        if not grants(self.scopes, scope):
            raise Forbidden(f"This API key lacks the '{scope}' scope.")


def check_policy(policy: str) -> Node:
    """A policy is a unit filter; one that does not parse or does not fit the unit is a 422."""
    try:
        tree = parse_filter(policy, "policy")
        compile_filter(tree, UNIT_CATALOGUE, "policy")  # checks every field and value
    except InvalidParameter as exc:
        raise ValidationFailed([("policy", exc.detail.removeprefix("policy: "))]) from None
    return tree


def render_key(row: RowMapping) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "prefix": row["prefix"],
        "scopes": orjson.loads(row["scopes"]),
        "policy": row["policy"],
        "rateLimit": row["rate_limit"],
        "expiresAt": format_time(row["expires_at"]),
        "createdAt": format_time(row["created_at"]),
        "lastUsedAt": format_time(row["last_used_at"]),
        "revokedAt": format_time(row["revoked_at"]),
    }


async def create_key(conn: AsyncConnection, spec: ApiKeyCreate) -> dict[str, Any]:
    """Issue a key; the returned record carries the secret under `key`, the only time."""
    if spec.policy is not None:
        check_policy(spec.policy)
    secret = new_secret()
    key_id = uuid7()
    values = {
        "id": key_id,
        "name": spec.name,
        "prefix": visible_prefix(secret),
        "secret_hash": hash_secret(secret),
        "scopes": orjson.dumps(sorted(set(spec.scopes))).decode(),
        "policy": spec.policy,
        "rate_limit": spec.rateLimit,
        "expires_at": parse_time(spec.expiresAt),
        "created_at": utcnow(),
        "last_used_at": None,
        "revoked_at": None,
    }
    await repository.insert(conn, values)
    row = await repository.by_id(conn, key_id)
    assert row is not None
    return {**render_key(row), "key": secret}


def parse_key_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise NotFound(f"No API key {raw}.") from None


async def list_keys(conn: AsyncConnection, limit: int, cursor: str | None) -> dict[str, Any]:
    after = KEYS_KEYSET.decode(cursor)
    rows = await repository.page(conn, after[0] if after else None, limit + 1)
    shown, next_cursor = KEYS_KEYSET.page(rows, limit, lambda row: (row["id"],))
    return {"data": [render_key(row) for row in shown], "nextCursor": next_cursor}


async def get_key(conn: AsyncConnection, key_id: uuid.UUID) -> RowMapping:
    row = await repository.by_id(conn, key_id)
    if row is None:
        raise NotFound(f"No API key {key_id}.")
    return row


def _principal(row: RowMapping) -> Principal:
    return Principal(
        key_id=row["id"],
        name=row["name"],
        scopes=frozenset(orjson.loads(row["scopes"])),
        policy=row["policy"],
        rate=parse_rate(row["rate_limit"]) if row["rate_limit"] else None,
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        policy_tree=parse_filter(row["policy"], "policy") if row["policy"] else None,
    )


@dataclass(slots=True)
class _Cached:
    principal: Principal
    secret_hash: str
    loaded: float
    last_used: datetime | None


class Authenticator:
    """Resolves bearer secrets, with a short per-process cache to keep reads off the DB."""

    def __init__(self, db: Database, cache_seconds: float) -> None:
        self._db = db
        self._ttl = cache_seconds
        self._cache: dict[str, _Cached] = {}
        # The loads under way, by digest: the requests that find a key's entry stale while
        # it is being read again wait for that read (under load, every request in flight
        # when an entry ran out read the key again, each on a connection of its own).
        self._loading: dict[str, asyncio.Future[_Cached]] = {}
        # Counts `forget`s: a read begun before one does not keep what it read.
        self._forgotten = 0

    async def authenticate(self, authorization: str | None) -> Principal:
        return await self.resolve(hash_secret(_bearer(authorization)))

    async def resolve(self, digest: str) -> Principal:
        """The principal of the key whose secret hashes to `digest` (a console session holds
        that hash): a 401 when it is unknown, revoked or expired."""
        entry = self._cache.get(digest)
        if entry is None or time.monotonic() - entry.loaded > self._ttl:
            entry = await self._load_once(digest)
        principal = entry.principal
        now = datetime.now(UTC)
        if principal.revoked_at is not None:
            raise Unauthorized("The API key was revoked.")
        if principal.expires_at is not None and principal.expires_at <= now:
            raise Unauthorized("The API key has expired.")
        if entry.last_used is None or now - entry.last_used > LAST_USED_RESOLUTION:
            entry.last_used = now
            async with self._db.transaction() as conn:
                await repository.touch(conn, principal.key_id, utcnow())
        return principal

    async def _load_once(self, digest: str) -> _Cached:
        """`_load`, shared by the callers that ask while it runs: each gets its outcome (the
        entry, a 401, the database's error); one that is cancelled leaves it to the others."""
        loading = self._loading.get(digest)
        if loading is None:
            loading = asyncio.ensure_future(self._load(digest))
            self._loading[digest] = loading
            loading.add_done_callback(partial(self._loaded, digest))
        return await asyncio.shield(loading)

    def _loaded(self, digest: str, loading: asyncio.Future[_Cached]) -> None:
        if self._loading.get(digest) is loading:
            del self._loading[digest]
        if not loading.cancelled():
            loading.exception()  # told to its callers; none may be left to be told

    async def _load(self, digest: str) -> _Cached:
        forgotten = self._forgotten
        async with self._db.read() as conn:
            row = await repository.by_hash(conn, digest)
        if row is None or not same_hash(row["secret_hash"], digest):
            self._cache.pop(digest, None)
            raise Unauthorized("The API key is not valid.")
        entry = _Cached(_principal(row), digest, time.monotonic(), row["last_used_at"])
        if forgotten == self._forgotten:
            self._cache[digest] = entry
        return entry

    def forget(self, key_id: uuid.UUID) -> None:
        """Read `key_id` again from now on (it was revoked or changed): its entry is dropped,
        and the requests that come next read it afresh rather than wait for a read begun
        before, which keeps nothing."""
        for digest, entry in list(self._cache.items()):
            if entry.principal.key_id == key_id:
                del self._cache[digest]
        self._forgotten += 1
        self._loading.clear()


def _bearer(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("Send an API key as 'Authorization: Bearer <key>'.")
    scheme, _, secret = authorization.partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret or " " in secret:
        raise Unauthorized("The Authorization header must be 'Bearer <key>'.")
    return secret


async def bootstrap_admin_key(db: Database) -> str | None:
    """On a store with no usable key, issue an admin key and return its secret (once)."""
    async with db.transaction() as conn:
        if await repository.count_usable(conn) > 0:
            return None
        created = await create_key(conn, ApiKeyCreate(name="bootstrap admin", scopes=["admin"]))
    secret: str = created["key"]
    return secret
