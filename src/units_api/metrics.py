"""Prometheus metrics, true for a whole server however many processes it runs.

`units-api serve` gives its processes one directory (`PROMETHEUS_MULTIPROC_DIR`: the
operator's, emptied at start, or a new temporary one), set before prometheus-client is
first imported; every process writes its counters, histograms and gauges there and a
scrape, whichever process it reaches, adds them all up (the library's multiprocess mode).
A job's child process counts what it observes (its reads) there too, in the files of its job
slot (`job_counting`). Without the directory (`units-api worker`, an app under test) a process
counts alone, and a job's child not at all.

What the database knows (the delivery backlog and the age of its oldest, events awaiting a
feed position, jobs waiting and running) is read from it at scrape time, the same from
every server; a read that fails leaves its series out of that scrape and is logged.

prometheus-client is imported by `init`, not with this module, so importing this module
early never fixes the library's mode before `serve` has chosen it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

if TYPE_CHECKING:  # db.py counts reads here: no import at run time, no cycle
    from units_api.db import Database

log = logging.getLogger(__name__)

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: from a cached read (about a millisecond) to a large bulk write.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Webhook endpoints answer within the send timeout (at most 60 s).
DELIVERY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
JOB_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)
# A request whose path matches no route is counted under this one route label.
UNMATCHED = "unmatched"
# Any other method (anyone can send one) is counted as OTHER_METHOD.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER_METHOD = "other"
# How long a scrape waits for its database reads, all together, before leaving out the series
# of those not read by then.
GAUGE_TIMEOUT = 5.0
# How often a process samples its connection pools.
POOL_SAMPLE_SECONDS = 1.0
_TEMPORARY = "units-api-metrics-"  # + the server's pid
_LIVE_FILE = re.compile(r"^gauge_live\w+?_(\d+)\.db$")


def prepare_directory() -> str:
    """The directory a server's processes share, empty; call before any process imports
    prometheus-client. The operator's `PROMETHEUS_MULTIPROC_DIR`, or a new temporary one
    (removed when this process exits)."""
    given = os.environ.get(MULTIPROCESS_DIR)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for file in path.glob("*.db"):
            file.unlink(missing_ok=True)
        return given
    _remove_abandoned()
    made = tempfile.mkdtemp(prefix=f"{_TEMPORARY}{os.getpid()}-")
    os.environ[MULTIPROCESS_DIR] = made
    atexit.register(shutil.rmtree, made, True)
    return made


def _remove_abandoned() -> None:
    """The temporary directories of servers that are gone: one stopped by a signal does not
    run its exit handlers."""
    for path in Path(tempfile.gettempdir()).glob(f"{_TEMPORARY}*"):
        pid = path.name.removeprefix(_TEMPORARY).partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROCESS_DIR))


class _Series:
    """The series this process writes to."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values

        if multiprocess() and not getattr(values.ValueClass, "_multiprocess", False):
            # The library was imported before the directory was set: switch it now, before
            # any series exists.
            values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        # Its _count is the count of requests: one series fewer to write per request.
        self.latency = Histogram(
            "units_api_http_request_duration_seconds",
            "Requests answered and the time each took, by method, route template and status.",
            ("method", "route", "status"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.pool_checked_out = Gauge(
            "units_api_db_pool_checked_out",
            "Database connections in use, by pool (summed over the server's processes).",
            ("pool",),
            multiprocess_mode="livesum",
            registry=self.registry,
        )
        self.pool_size = Gauge(
            "units_api_db_pool_size",
            "Database connections a pool keeps, by pool (summed over the server's processes).",
            ("pool",),
            multiprocess_mode="livesum",
            registry=self.registry,
        )
        self.reads = Counter(
            "units_api_database_reads",
            "Reads served, by database: primary, or replica-N (N from 1, in the order given).",
            ("database",),
            registry=self.registry,
        )
        self.refusals = Counter(
            "units_api_rate_limited",
            "Requests refused (429) for a key's rate limit, or for the console's sign-in rate "
            "of an address.",
            registry=self.registry,
        )
        self.attempts = Histogram(
            "units_api_webhook_attempt_duration_seconds",
            "Webhook delivery attempts made by this server's processes, by outcome "
            "(succeeded, retrying, failed: no more attempts), and how long each took.",
            ("outcome",),
            buckets=DELIVERY_BUCKETS,
            registry=self.registry,
        )
        self.jobs = Histogram(
            "units_api_job_duration_seconds",
            "Jobs run by this server's processes, by kind and the status they ended with "
            "(succeeded, failed, or queued again for a retry), and how long each ran.",
            ("kind", "status"),
            buckets=JOB_BUCKETS,
            registry=self.registry,
        )
        self.step_failures = Counter(
            "units_api_background_step_failures",
            "Failed steps of this server's background loops (each tried again after a "
            "pause), by loop.",
            ("loop",),
            registry=self.registry,
        )


_series: _Series | None = None
_request_series: dict[tuple[str, str, int], Any] = {}
_read_series: dict[str, Any] = {}


def init() -> None:
    """Start counting in this process (once; later calls do nothing)."""
    global _series
    if _series is None:
        _series = _Series()


def job_counting(slot: int) -> tuple[str, str] | None:
    """Where the child process of a job run in `slot` (0 up to the jobs this process runs at
    once) counts: this process's directory, and the name of the files it writes there, this
    process's id and the slot. Jobs run in a slot one after another and add to its files (a
    child counting under its own id would leave files per job). None when this process
    counts alone: nothing would read what its child counted."""
    directory = os.environ.get(MULTIPROCESS_DIR)
    return (directory, f"job-{os.getpid()}-{slot}") if directory else None


def init_job_process(counting: tuple[str, str] | None) -> None:
    """Start counting in a job's child process, where `job_counting` said (the environment a
    child inherits is its forkserver's, not its supervisor's now); not at all for None."""
    if counting is None:
        return
    directory, name = counting
    if not os.access(directory, os.W_OK):  # gone since the server started: the job runs
        log.warning("a job's metrics are not counted", extra={"directory": directory})
        return
    os.environ[MULTIPROCESS_DIR] = directory
    from prometheus_client import values

    # Before any series exists. A name that no other process writes under at the same time,
    # as the library requires: its slot is its own until it has exited. A child sets no
    # gauge (the pools are sampled by the server's processes), so no live gauge file of a
    # slot outlives it.
    values.ValueClass = values.MultiProcessValue(lambda: name)  # type: ignore[no-untyped-call]
    init()


def observe_request(method: str, route: str, status: int, seconds: float) -> None:
    """Count an answered request. `route` is its route's template, never the raw path."""
    series = _request_series.get((method, route, status))
    if series is None:
        if _series is None:
            return
        label = method if method in METHODS else OTHER_METHOD
        series = _series.latency.labels(label, route, str(status))
        _request_series[(method, route, status)] = series
    series.observe(seconds)


def count_read(database: str) -> None:
    """Count a read served by `database` ("primary", or "replica-N")."""
    counter = _read_series.get(database)
    if counter is None:
        if _series is None:
            return
        counter = _read_series[database] = _series.reads.labels(database)
    counter.inc()


def count_refusal() -> None:
    """Count a request refused (429) for a rate limit: a key's, or the console's sign-in
    rate of an address."""
    if _series is not None:
        _series.refusals.inc()


def observe_attempt(outcome: str, seconds: float) -> None:
    """Count a webhook delivery attempt: succeeded, retrying or failed."""
    if _series is not None:
        _series.attempts.labels(outcome).observe(seconds)


def observe_job(kind: str, status: str, seconds: float) -> None:
    """Count a job that ended (or was queued again) after running `seconds`."""
    if _series is not None:
        _series.jobs.labels(kind, status).observe(seconds)


def count_step_failure(loop: str) -> None:
    """Count a failed step of the background loop named `loop`."""
    if _series is not None:
        _series.step_failures.labels(loop).inc()


def sample_pools(db: Database) -> None:
    """Record how many of `db`'s connections are in use now, and how many its pools keep."""
    if _series is None:
        return
    pool: Any = db.engine.sync_engine.pool
    if hasattr(pool, "checkedout") and hasattr(pool, "size"):
        _series.pool_checked_out.labels("main").set(pool.checkedout())
        _series.pool_size.labels("main").set(pool.size())
    fast = db.fast_pool
    if fast is not None:
        _series.pool_checked_out.labels("fast").set(fast.get_size() - fast.get_idle_size())
        _series.pool_size.labels("fast").set(fast.get_max_size())


async def watch_pools(db: Database, stop: asyncio.Event) -> None:
    """Sample `db`'s pools until `stop`."""
    while not stop.is_set():
        sample_pools(db)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POOL_SAMPLE_SECONDS)


def process_ended() -> None:
    """This process's live gauges (its pools) leave the server's sums."""
    if _series is not None and multiprocess():
        from prometheus_client import multiprocess as shared

        shared.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def _forget_dead_processes(directory: str) -> None:
    """A process that died without saying so (a worker killed and replaced) leaves its live
    gauges behind: they are dropped at the next scrape."""
    from prometheus_client import multiprocess as shared

    for name in os.listdir(directory):
        match = _LIVE_FILE.match(name)
        if match and not _alive(int(match.group(1))):
            shared.mark_process_dead(int(match.group(1)), directory)  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- what the database knows, read at scrape time ---

Family = Any  # prometheus_client.core.Metric
GaugeRead = Callable[[AsyncConnection, datetime], Awaitable[list[Family]]]


async def _delivery_backlog(conn: AsyncConnection, now: datetime) -> list[Family]:
    from prometheus_client.core import GaugeMetricFamily

    from units_api.webhooks.tables import webhook_deliveries as d

    row = (
        await conn.execute(
            select(func.count(), func.min(d.c.created_at)).where(d.c.status == "pending")
        )
    ).one()
    oldest: datetime | None = row[1]
    return [
        GaugeMetricFamily(
            "units_api_webhook_deliveries_pending",
            "Webhook deliveries waiting for an attempt (a retry included).",
            value=row[0],
        ),
        GaugeMetricFamily(
            "units_api_webhook_oldest_pending_seconds",
            "Age of the oldest pending webhook delivery (0 when none is pending).",
            value=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        ),
    ]


async def _events_awaiting(conn: AsyncConnection, now: datetime) -> list[Family]:
    from prometheus_client.core import GaugeMetricFamily

    from units_api.events.tables import events

    count = (await conn.execute(select(func.count()).where(events.c.pos.is_(None)))).scalar()
    return [
        GaugeMetricFamily(
            "units_api_events_awaiting_position",
            "Committed events not yet given a feed position.",
            value=count or 0,
        )
    ]


async def _jobs(conn: AsyncConnection, now: datetime) -> list[Family]:
    from prometheus_client.core import GaugeMetricFamily

    from units_api.jobs.tables import jobs

    rows = await conn.execute(
        select(jobs.c.kind, jobs.c.status, func.count())
        .where(jobs.c.status.in_(("queued", "running")))
        .group_by(jobs.c.kind, jobs.c.status)
    )
    family = GaugeMetricFamily(
        "units_api_jobs", "Jobs waiting (queued) and running, by kind.", labels=("kind", "status")
    )
    for kind, status, count in rows:
        family.add_metric((kind, status), count)
    return [family]


DATABASE_GAUGES: dict[str, GaugeRead] = {
    "webhook delivery backlog": _delivery_backlog,
    "events awaiting a position": _events_awaiting,
    "jobs by status": _jobs,
}


async def _database_families(db: Database) -> list[Family]:
    now = datetime.now(UTC)
    # Read together, under one deadline: a scrape answers within GAUGE_TIMEOUT however many
    # of them hang, and one that hangs leaves the others their time.
    deadline = asyncio.get_running_loop().time() + GAUGE_TIMEOUT

    async def gauge(name: str, read: GaugeRead) -> list[Family]:
        try:
            async with asyncio.timeout_at(deadline), db.read() as conn:
                return await read(conn, now)
        except Exception as exc:
            log.warning(
                "a metric could not be read from the database; left out of this scrape",
                extra={"metric": name, "error": f"{type(exc).__name__}: {exc}"[:500]},
            )
            return []

    read = await asyncio.gather(*(gauge(name, each) for name, each in DATABASE_GAUGES.items()))
    return [family for families in read for family in families]


class _Fixed:
    """A collector of families already made."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Family]:
        return self.families


async def scrape(db: Database) -> bytes:
    """The exposition: every process's series, and what the database knows now."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    init()
    assert _series is not None
    sample_pools(db)
    families = await _database_families(db)
    registry = CollectorRegistry(auto_describe=False)
    directory = os.environ.get(MULTIPROCESS_DIR)
    if directory:
        _forget_dead_processes(directory)
        MultiProcessCollector(registry, directory)  # type: ignore[no-untyped-call]
        shared = generate_latest(registry)
    else:
        shared = generate_latest(_series.registry)
    database = CollectorRegistry(auto_describe=False)
    database.register(_Fixed(families))
    return shared + generate_latest(database)
