"""Prometheus metrics, true for a whole server however many processes it runs.

`units-api serve` gives its processes one directory (`PROMETHEUS_MULTIPROC_DIR`: the
operator's, emptied at start, or a new temporary one), set before prometheus-client is
first imported; every process writes its counters, histograms and gauges there and a
scrape, whichever process it reaches, adds them all up (the library's multiprocess mode).
A job's child process counts what it observes (its reads) there too, in the files of its job
slot (`job_counting`). Without the directory (`units-api worker`, an app under test) a process
counts alone, and a job's child not at all.

What the database knows is read at scrape time by `scrape.py`, which adds it to these series.
This module imports nothing of the project: every other module may count here.

prometheus-client is imported by `init`, not with this module, so importing this module
early never fixes the library's mode before `serve` has chosen it.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import struct
import tempfile
from bisect import bisect_left
from pathlib import Path
from typing import Any

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
        self.indexnow = Counter(
            "units_api_indexnow_requests",
            "IndexNow requests sent by this server's processes, by outcome (succeeded: "
            "answered 2xx; failed: another answer or none, tried again).",
            ("outcome",),
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
        self.redis_up: Any = None  # made when Redis is first seen: absent without Redis

    def set_redis_up(self, up: bool) -> None:
        from prometheus_client import Gauge

        if self.redis_up is None:
            self.redis_up = Gauge(
                "units_redis_up",
                "Whether Redis answers (1) or not (0: rate limits are counted by each process "
                "alone, answers computed); the lowest over the server's processes.",
                multiprocess_mode="livemin",
                registry=self.registry,
            )
        self.redis_up.set(int(up))


_series: _Series | None = None
_redis_up: bool | None = None  # what this process last saw of Redis, None without it
_request_series: dict[tuple[str, str, int], Any] = {}
_read_series: dict[str, Any] = {}
# A forked child writes files of its own: it finds its request series again.
os.register_at_fork(after_in_child=_request_series.clear)


def init() -> None:
    """Start counting in this process (once; later calls do nothing)."""
    global _series
    if _series is None:
        _series = _Series()
        if _redis_up is not None:
            _series.set_redis_up(_redis_up)


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
        if multiprocess():
            series = _SharedLatency(series)
        _request_series[(method, route, status)] = series
    series.observe(seconds)


_DOUBLE = struct.Struct("d")


class _SharedLatency:
    """One series of the request histogram, written straight into this process's file:
    what the library's `observe` writes there (the count of the request's bucket, then the
    sum; the scrape adds the buckets up into the count), without its lock, its check of the
    process id and its look-up of each value's place, which cost a request more than its
    access log line. Only this object writes these values, so it keeps them itself.

    A request is in the file before its answer's last part goes, so every process's scrape
    counts it as soon as its client has the answer: nothing waits in memory to be flushed."""

    __slots__ = ("_bounds", "_counts", "_file", "_places", "_sum")

    def __init__(self, child: Any) -> None:
        child._sum.get()  # a process forked since opened files of its own: this one's now
        values = [*child._buckets, child._sum]
        self._file = child._sum._file  # the library's MmapedDict of this process's histograms
        self._bounds = tuple(child._upper_bounds)  # ends with +Inf
        self._places = tuple(self._file._positions[value._key] for value in values)
        data = self._file._m
        self._counts = [_DOUBLE.unpack_from(data, place)[0] for place in self._places[:-1]]
        self._sum = _DOUBLE.unpack_from(data, self._places[-1])[0]

    def observe(self, seconds: float) -> None:
        bucket = bisect_left(self._bounds, seconds)  # the first bound >= seconds
        self._counts[bucket] += 1.0
        self._sum += seconds
        data = self._file._m  # a new map once the file grew
        place = self._places[bucket]
        # Assigned whole, as the library does: pack_into would write zeros first.
        data[place : place + 8] = _DOUBLE.pack(self._counts[bucket])
        place = self._places[-1]
        data[place : place + 8] = _DOUBLE.pack(self._sum)


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


def count_indexnow(outcome: str) -> None:
    """Count an IndexNow request: succeeded or failed."""
    if _series is not None:
        _series.indexnow.labels(outcome).inc()


def observe_job(kind: str, status: str, seconds: float) -> None:
    """Count a job that ended (or was queued again) after running `seconds`."""
    if _series is not None:
        _series.jobs.labels(kind, status).observe(seconds)


def count_step_failure(loop: str) -> None:
    """Count a failed step of the background loop named `loop`."""
    if _series is not None:
        _series.step_failures.labels(loop).inc()


def set_pool(pool: str, checked_out: int, size: int) -> None:
    """Record how many of a pool's connections are in use now, and how many it keeps."""
    if _series is not None:
        _series.pool_checked_out.labels(pool).set(checked_out)
        _series.pool_size.labels(pool).set(size)


def set_redis_up(up: bool) -> None:
    """Record whether Redis answers this process now."""
    global _redis_up
    _redis_up = up
    if _series is not None:
        _series.set_redis_up(up)


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


def exposition() -> bytes:
    """This server's series in the text format: every process's, added up, when they share
    a directory; else this process's own."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    init()
    assert _series is not None
    directory = os.environ.get(MULTIPROCESS_DIR)
    if not directory:
        return generate_latest(_series.registry)
    _forget_dead_processes(directory)
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, directory)  # type: ignore[no-untyped-call]
    return generate_latest(registry)
