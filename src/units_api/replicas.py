"""Read replicas: PostgreSQL streaming standbys that answer the reads that may be a little
behind (lists, searches, the query endpoint, exports) while they are up and caught up.

A process checks its replicas about once a second in the background, never per request. The
primary's WAL position is sampled at every check, and a replica is as far behind as the time
since the primary first passed the position the replica has replayed: a replica with nothing
left to replay is caught up, however long the primary has been idle (the age of its last
replayed transaction, `now() - pg_last_xact_replay_timestamp()`, grows while nothing is
written, so it is only the measure when the samples do not reach back far enough). A replica
that is down, promoted, or further behind than the limit is skipped until a check finds it
well again; one that fails under a request is skipped at once, and the read runs again on the
primary.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from units_api import dburls
from units_api.errors import SettingError

log = logging.getLogger(__name__)

SETTING = "UNITS_API_DATABASE_REPLICA_URLS"
CHECK_SECONDS = 1.0
CHECK_TIMEOUT = 2.0  # seconds to connect and for each check's statement
# The primary's positions are kept this much longer than the lag limit; a replica behind the
# oldest one kept is behind by more than the limit anyway.
KEPT_BEYOND_LIMIT = 10.0
# A statement on a standby cancelled because replaying the primary's changes needed its rows
# (a recovery conflict): the read runs again on the primary, the replica stays in use.
RECOVERY_CONFLICT = "40001"

_PRIMARY_SQL = "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"
_REPLICA_SQL = (
    "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn() - '0/0'::pg_lsn,"
    " extract(epoch FROM now() - pg_last_xact_replay_timestamp())"
)

# A database out of reach: refused, reset, shut down, starting, or not answering in time.
# How far down an error's chain (causes, and errors it was raised while handling) to look.
CHAIN_DEPTH = 8
UNREACHABLE = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.TooManyConnectionsError,
    # A connection reused while a cancelled statement or a reset is still under way on it.
    asyncpg.InternalClientError,
)
# SQLSTATEs of a database out of reach, whatever error class carries them: connection
# exceptions (08), shutting down or starting up (57P01-57P03), too many connections.
UNREACHABLE_STATES = ("08", "57P01", "57P02", "57P03", "53300")


def driver_dsn(url: str) -> str:
    """An SQLAlchemy URL of PostgreSQL as asyncpg takes it."""
    return dburls.driver_dsn(url)


def shown(url: str) -> str:
    """A URL as logs and messages may show it: without its password."""
    return dburls.driver_dsn(url, hide_password=True)


def unreachable(error: BaseException | None, depth: int = 0) -> bool:
    """Whether an error says the database could not be reached (rather than a statement's own
    fault): itself, the driver's error under it, or the error it was raised while handling
    (cleaning up on a broken connection fails too, and hides the break)."""
    if error is None or depth > CHAIN_DEPTH:
        return False
    if isinstance(error, DBAPIError) and (
        error.connection_invalidated or unreachable(error.orig, depth + 1)
    ):
        return True
    if isinstance(error, UNREACHABLE):
        return True
    state = getattr(error, "sqlstate", None)
    if isinstance(state, str) and state.startswith(UNREACHABLE_STATES):
        return True
    return any(
        unreachable(under, depth + 1)
        for under in (error.__cause__, error.__context__)
        if under is not error
    )


def _reason(error: BaseException) -> str:
    """An error in one short line (a driver's error without the statement it ran)."""
    original = error.orig if isinstance(error, DBAPIError) and error.orig else error
    return " ".join(str(original).split())[:300] or type(original).__name__


def _sqlstate(error: BaseException) -> str | None:
    original = error.orig if isinstance(error, DBAPIError) else error
    code = getattr(original, "sqlstate", None) or getattr(
        getattr(original, "__cause__", None), "sqlstate", None
    )
    return code if isinstance(code, str) else None


@dataclass(eq=False, slots=True)
class Replica:
    name: str  # "replica-1" for the first URL: in logs and metrics
    url: str
    engine: AsyncEngine
    healthy: bool = False
    lag: float | None = None  # seconds behind at the last check; None when not known
    checked: bool = False
    checking: asyncpg.Connection | None = None


class ReplicaSet:
    """The replicas of one process, each in use while its last check found it up and at most
    `max_lag` seconds behind the primary."""

    def __init__(self, primary_url: str, replicas: Sequence[Replica], max_lag: float) -> None:
        self.replicas = tuple(replicas)
        self.max_lag = max_lag
        self._primary_dsn = driver_dsn(primary_url)
        self._primary: asyncpg.Connection | None = None
        self._positions: deque[tuple[int, float]] = deque()  # the primary's (LSN, when seen)
        self._turn = itertools.count()
        self._watching: asyncio.Task[None] | None = None

    def pick(self) -> Replica | None:
        """The next replica in use, in turn; None when none is."""
        healthy = [replica for replica in self.replicas if replica.healthy]
        if not healthy:
            return None
        return healthy[next(self._turn) % len(healthy)]

    def failed(self, replica: Replica, error: BaseException) -> bool:
        """Whether a read that failed on `replica` should run again on the primary: the
        replica could not be reached (it is skipped until a check finds it well) or replaying
        the primary's changes cancelled the read."""
        if unreachable(error):
            if replica.healthy:
                replica.healthy = False
                log.warning(
                    "read replica unreachable, reads go to the primary",
                    extra={"replica": replica.name, "error": _reason(error)},
                )
            return True
        if _sqlstate(error) == RECOVERY_CONFLICT:
            log.info("read cancelled on a replica by recovery", extra={"replica": replica.name})
            return True
        return False

    def watch(self) -> None:
        """Check the replicas every CHECK_SECONDS in the background, until `close`."""
        if self._watching is None:
            self._watching = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(CHECK_SECONDS)
            try:
                await self.check()
            except Exception:  # a check that failed leaves the states as they were
                log.exception("checking the read replicas failed")

    async def check(self) -> None:
        """Find which replicas are up and caught up, from the primary's WAL position now."""
        position = await self._primary_position()
        if position is None:
            return  # the primary out of reach: nothing to compare with, states kept
        now = time.monotonic()
        self._remember(position, now)
        await asyncio.gather(*(self._check(replica, position, now) for replica in self.replicas))

    async def close(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching
            self._watching = None
        for conn in [self._primary, *(replica.checking for replica in self.replicas)]:
            if conn is not None:
                conn.terminate()
        self._primary = None
        for replica in self.replicas:
            replica.checking = None
            await replica.engine.dispose()

    async def _primary_position(self) -> int | None:
        try:
            if self._primary is None or self._primary.is_closed():
                self._primary = await asyncpg.connect(self._primary_dsn, timeout=CHECK_TIMEOUT)
            return int(await self._primary.fetchval(_PRIMARY_SQL, timeout=CHECK_TIMEOUT))
        except Exception as error:
            if self._primary is not None:
                self._primary.terminate()
                self._primary = None
            log.warning("the primary's WAL position could not be read", exc_info=error)
            return None

    def _remember(self, position: int, now: float) -> None:
        if not self._positions or position > self._positions[-1][0]:
            self._positions.append((position, now))
        kept_since = now - self.max_lag - KEPT_BEYOND_LIMIT
        # The oldest position kept is one seen before `kept_since`: a replica that has not
        # replayed it is behind by more than the limit.
        while len(self._positions) > 1 and self._positions[1][1] < kept_since:
            self._positions.popleft()

    def _lag(self, replayed: int, primary: int, replay_age: float | None, now: float) -> float:
        """Seconds since the primary first passed `replayed` (0 if it has not)."""
        if replayed >= primary:
            return 0.0
        index, first = next(
            (index, seen)
            for index, (position, seen) in enumerate(self._positions)
            if position > replayed
        )
        if index == 0:
            # The samples do not show when the primary passed it: the last replayed
            # transaction's age is a bound from above.
            return max(now - first, replay_age if replay_age is not None else 0.0)
        return now - first

    async def _check(self, replica: Replica, primary: int, now: float) -> None:
        try:
            if replica.checking is None or replica.checking.is_closed():
                replica.checking = await asyncpg.connect(
                    driver_dsn(replica.url), timeout=CHECK_TIMEOUT
                )
            row = await replica.checking.fetchrow(_REPLICA_SQL, timeout=CHECK_TIMEOUT)
        except Exception as error:
            if replica.checking is not None:
                replica.checking.terminate()
                replica.checking = None
            self._set(replica, False, None, f"unreachable: {_reason(error)}")
            return
        in_recovery, replayed, age = row
        if not in_recovery or replayed is None:
            self._set(replica, False, None, "not a replica (promoted to a primary?)")
            return
        lag = self._lag(int(replayed), primary, None if age is None else float(age), now)
        behind = f"{lag:.1f} s behind the primary (limit {self.max_lag:g} s)"
        self._set(replica, lag <= self.max_lag, lag, behind)

    def _set(self, replica: Replica, healthy: bool, lag: float | None, why: str) -> None:
        replica.lag = lag
        if healthy == replica.healthy and replica.checked:
            return
        replica.healthy, replica.checked = healthy, True
        if healthy:
            log.info("read replica in use", extra={"replica": replica.name, "state": why})
        else:
            log.warning("read replica skipped", extra={"replica": replica.name, "state": why})


async def refuse_unusable(primary_url: str, urls: Sequence[str]) -> None:
    """A SettingError, one line naming the setting, for a replica URL that cannot serve as
    one: a primary given as a replica, a standby of another server or another database than
    the primary's, credentials or a database refused. A replica out of reach does not stop a
    start: it is skipped until it answers."""
    try:
        primary = await _identity(primary_url)
    except Exception:  # the primary's own checks name what is wrong with it
        primary = None
    for number, url in enumerate(urls, 1):
        refused = await _refusal(url, primary)
        if refused is not None:
            raise SettingError(SETTING, f"{SETTING}: replica {number} ({shown(url)}) {refused}")


_IDENTITY_SQL = (
    "SELECT pg_is_in_recovery(), (SELECT system_identifier FROM pg_control_system()),"
    " current_database()"
)


async def _identity(url: str) -> tuple[bool, int, str] | None:
    """Whether a server is a standby, which cluster it copies (its system identifier) and
    which database the URL reads; None when it is out of reach."""
    try:
        conn = await asyncpg.connect(driver_dsn(url), timeout=CHECK_TIMEOUT)
    except Exception as error:
        if unreachable(error):
            return None
        raise
    try:
        row = await conn.fetchrow(_IDENTITY_SQL, timeout=CHECK_TIMEOUT)
    finally:
        conn.terminate()
    return bool(row[0]), int(row[1]), str(row[2])


async def _refusal(url: str, primary: tuple[bool, int, str] | None) -> str | None:
    """Why a replica URL cannot serve, as the end of a sentence; None if it can."""
    try:
        found = await _identity(url)
    except Exception as error:
        return f"cannot be used: {_reason(error)}"
    if found is None:
        log.warning(
            "read replica out of reach at start; skipped until it answers",
            extra={"url": shown(url)},
        )
        return None
    in_recovery, system, database = found
    if not in_recovery:
        return (
            "is not a replica: it is a primary (pg_is_in_recovery() is false); give the URLs "
            "of streaming standbys of UNITS_API_DATABASE_URL"
        )
    if primary is not None and system != primary[1]:
        return "is a standby of another server than UNITS_API_DATABASE_URL's"
    if primary is not None and database != primary[2]:
        return f"reads database {database!r}, UNITS_API_DATABASE_URL {primary[2]!r}"
    return None
