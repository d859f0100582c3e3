"""GET /metrics of real servers on PostgreSQL: totals exact across `serve --workers 2`,
series by route template, the gauges read from the database (and a scrape that still
answers when one of their reads fails), the metrics key, the reads of a job's process in its
server's scrape, and the access log of every worker process, without a key's secret."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import CLI, cli_admin_key, fresh_postgres, stop_server, wait_until_ready
from tests.test_cli import free_port
from units_api import scrape
from units_api.db import Database, create_engine
from units_api.metrics import LATENCY_BUCKETS
from units_api.migrate import upgrade

UNIT = "/api/v2/units/{id}"
REQUESTS = "units_api_http_request_duration_seconds_count"
ACCESS_FIELDS = {
    *("time", "level", "requestId", "method", "path", "query", "status"),
    *("durationMs", "client", "keyId"),
}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@contextmanager
def served(
    url: str, log: Path, workers: int = 1, env: dict[str, str] | None = None
) -> Iterator[tuple[str, str]]:
    """`units-api serve --workers N` on `url` (migrated), its stderr in `log`, until every
    worker has started: its base URL and an admin key."""
    environment = {
        **{k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
        "UNITS_API_DATABASE_URL": url,
        "UNITS_API_RUN_JOBS": "false",
        **(env or {}),
    }
    upgrade(url)
    key = cli_admin_key(environment)
    port = free_port()
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*CLI, "serve", "--port", str(port), "--workers", str(workers)],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base, 90)
        _wait_for_line(log, "Application startup complete.", workers)
        yield base, key
    finally:
        stop_server(process, 30)


def _wait_for_line(log: Path, message: str, times: int) -> None:
    for _ in range(600):
        if sum(line.get("message") == message for line in _lines(log)) >= times:
            return
        asyncio.run(asyncio.sleep(0.1))
    raise AssertionError(f"{message!r} was not logged {times} times")


def _lines(log: Path) -> list[dict[str, Any]]:
    """Every line of the log, each a JSON object (anything else fails the test)."""
    return [orjson.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _get(base: str, path: str, **kwargs: Any) -> httpx.Response:
    # A new connection each time: requests spread over the worker processes.
    headers = {"Connection": "close", **kwargs.pop("headers", {})}
    return httpx.get(base + path, headers=headers, **kwargs)


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def _by_route(text: str) -> Counter[str]:
    totals: Counter[str] = Counter()
    for labels, value in _samples(text, REQUESTS).items():
        totals[dict(labels)["route"]] += int(value)
    return totals


def _families(text: str) -> set[str]:
    return {family.name for family in text_string_to_metric_families(text)}


def test_totals_are_exact_across_worker_processes(tmp_path: Path) -> None:
    shared = tmp_path / "metrics"
    shared.mkdir()
    (shared / "counter_1.db").write_bytes(b"left by an earlier run")
    with (
        fresh_postgres("units_metrics") as url,
        served(url, tmp_path / "log", 2, {"PROMETHEUS_MULTIPROC_DIR": str(shared)}) as (base, key),
    ):
        auth = {"Authorization": f"Bearer {key}"}
        made = Counter[str]()
        ids = [str(uuid.uuid4()) for _ in range(300)]
        for n in range(1000):
            if n % 10 < 6:
                response = _get(base, f"/api/v2/units/{ids[n % 300]}", headers=auth)
                assert response.status_code == 404
                made[UNIT] += 1
            elif n % 10 < 8:
                assert _get(base, "/healthz").status_code == 200
                made["/healthz"] += 1
            else:
                assert _get(base, f"/no/such/{n}").status_code == 404
                made["unmatched"] += 1
        for scrape in range(20):
            answer = _get(base, "/metrics")
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/plain")
            counted = _by_route(answer.text)
            # A scrape is counted once its answer is out: in the next scrape, not its own.
            assert counted.pop("/metrics", 0) == scrape
            counted.pop("/readyz", None)  # the start-up's readiness polls
            assert counted == made
        # One series per method, route template and status, whatever the ids.
        unit_series = [
            dict(labels)
            for labels in _samples(answer.text, REQUESTS)
            if dict(labels)["route"] == UNIT
        ]
        assert unit_series == [{"method": "GET", "route": UNIT, "status": "404"}]
        assert not UUID.search(answer.text)
        writers = {p.name.split("_")[-1] for p in shared.glob("counter_*.db")}
        assert len(writers) == 2, "both worker processes answered requests"
    access = [line for line in _lines(tmp_path / "log") if line["logger"] == "units_api.access"]
    # Every request, from both worker processes, one JSON line each with its fields.
    assert len([line for line in access if line["path"] != "/readyz"]) == 1000 + 20
    assert all(set(line) >= ACCESS_FIELDS for line in access)
    assert {line["client"] for line in access} == {"127.0.0.1"}
    assert {line["keyId"] for line in access if line["path"].startswith("/api/")} != {None}
    assert key not in (tmp_path / "log").read_text()


def test_database_gauges_key_and_a_failing_read(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with (
        fresh_postgres("units_metrics") as url,
        served(url, log, env={"UNITS_API_METRICS_KEY": "scrape-secret"}) as (base, key),
    ):
        for given in (None, "Bearer wrong", "scrape-secret", f"Bearer {key}"):
            headers = {"Authorization": given} if given else {}
            refused = _get(base, "/metrics", headers=headers)
            assert refused.status_code == 401
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["status"] == 401
        scraper = {"Authorization": "Bearer scrape-secret"}
        answer = _get(base, "/metrics", headers=scraper)
        assert answer.status_code == 200
        gauges = {
            "units_api_webhook_deliveries_pending",
            "units_api_webhook_oldest_pending_seconds",
            "units_api_events_awaiting_position",
            "units_api_jobs",
            "units_api_db_pool_checked_out",
            "units_api_db_pool_size",
        }
        assert gauges <= _families(answer.text)
        assert _samples(answer.text, "units_api_webhook_deliveries_pending") == {(): 0.0}

        asyncio.run(_sql(url, "ALTER TABLE events RENAME TO events_elsewhere"))
        answer = _get(base, "/metrics", headers=scraper)
        assert answer.status_code == 200
        assert "units_api_events_awaiting_position" not in _families(answer.text)
        assert gauges - {"units_api_events_awaiting_position"} <= _families(answer.text)
        # A key's secret in a query string is masked in the access log.
        _get(base, f"/healthz?token={key}")
    lines = _lines(log)
    (failed,) = [line for line in lines if line.get("metric") == "events awaiting a position"]
    assert failed["level"] == "WARNING" and "events" in failed["error"]
    assert key not in log.read_text() and "scrape-secret" not in log.read_text()
    assert any(line.get("query") == "token=uak_***" for line in lines)


async def _sql(url: str, statement: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _wait(check: Any, seconds: float = 60) -> None:
    for _ in range(int(seconds * 10)):
        if check():
            return
        asyncio.run(asyncio.sleep(0.1))
    raise AssertionError("not reached in time")


def test_failed_deliveries_and_jobs_are_logged_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "log"
    nobody = free_port()  # nothing listens there: every attempt fails
    env = {"UNITS_API_RUN_JOBS": "true", "UNITS_API_WEBHOOK_ALLOW_PRIVATE": "true"}
    with fresh_postgres("units_metrics") as url, served(url, log, env=env) as (base, key):
        auth = {"Authorization": f"Bearer {key}"}
        hook = httpx.post(
            f"{base}/api/v2/webhooks",
            json={"url": f"http://127.0.0.1:{nobody}/hook", "eventTypes": ["unit.created"]},
            headers=auth,
        ).json()
        unit = {"name": "Villa", "type": "villa", "city": "Cairo"}
        assert httpx.post(f"{base}/api/v2/units/", json=unit, headers=auth).status_code == 201
        job = httpx.post(
            f"{base}/api/v2/units/imports",
            files={"file": ("units.csv", b"name,type,colour\nA,villa,red\n")},
            headers=auth,
        ).json()

        def counted() -> bool:
            text = _get(base, "/metrics").text
            attempts = _samples(text, "units_api_webhook_attempt_duration_seconds_count")
            jobs = _samples(text, "units_api_job_duration_seconds_count")
            pending = _samples(text, "units_api_webhook_deliveries_pending")
            return (
                attempts.get((("outcome", "retrying"),)) == 1.0
                and jobs.get((("kind", "import"), ("status", "failed"))) == 1.0
                and pending == {(): 1.0}
            )

        _wait(counted)
    lines = _lines(log)
    (attempt,) = [line for line in lines if line["message"] == "webhook delivery attempt failed"]
    assert attempt["webhookId"] == hook["id"] and attempt["attempt"] == 1
    assert attempt["deliveryId"] and attempt["eventId"] and attempt["level"] == "WARNING"
    (failed,) = [line for line in lines if line["message"] == "job failed"]
    assert (
        failed["jobId"] == job["id"] and failed["kind"] == "import" and "colour" in failed["error"]
    )
    # The job's own process logs its lines too.
    assert any(
        line.get("jobId") == job["id"] for line in lines if line["message"] == "job process ended"
    )
    assert hook["secret"] not in log.read_text() and key not in log.read_text()


def test_a_worker_logs_json_and_serves_its_own_metrics(tmp_path: Path) -> None:
    nobody, port = free_port(), free_port()
    env = {"UNITS_API_WEBHOOK_ALLOW_PRIVATE": "true"}
    worker_log = tmp_path / "worker.log"
    with (
        fresh_postgres("units_metrics") as url,
        served(url, tmp_path / "log", env=env) as (base, key),
    ):
        worker_env = {
            **{k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"},
            **env,
            "UNITS_API_DATABASE_URL": url,
            "UNITS_API_METRICS_KEY": "worker-scrape",
        }
        with worker_log.open("w") as out:
            worker = subprocess.Popen(
                [*CLI, "worker", "--metrics-port", str(port)],
                env=worker_env,
                stdout=out,
                stderr=out,
            )
        try:
            auth = {"Authorization": f"Bearer {key}"}
            hook = httpx.post(
                f"{base}/api/v2/webhooks",
                json={"url": f"http://127.0.0.1:{nobody}/hook", "eventTypes": ["unit.created"]},
                headers=auth,
            ).json()
            unit = {"name": "Villa", "type": "villa", "city": "Cairo"}
            assert httpx.post(f"{base}/api/v2/units/", json=unit, headers=auth).status_code == 201
            worker_base = f"http://127.0.0.1:{port}"
            wait_until_ready(worker_base, 60)
            assert _get(worker_base, "/metrics").status_code == 401
            scraper = {"Authorization": "Bearer worker-scrape"}

            def delivered() -> bool:
                text = _get(worker_base, "/metrics", headers=scraper).text
                attempts = _samples(text, "units_api_webhook_attempt_duration_seconds_count")
                return attempts.get((("outcome", "retrying"),)) == 1.0

            _wait(delivered)
            text = _get(worker_base, "/metrics", headers=scraper).text
            assert "units_api_webhook_deliveries_pending" in _families(text)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    lines = _lines(worker_log)
    (attempt,) = [line for line in lines if line["message"] == "webhook delivery attempt failed"]
    assert attempt["webhookId"] == hook["id"] and attempt["attempt"] == 1
    assert hook["secret"] not in worker_log.read_text()


async def test_gauges_that_hang_leave_the_others_and_the_scrape_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database's gauges are read together under one deadline: two that never answer
    are left out when it passes, and the one that answers is in the scrape."""
    from prometheus_client.core import GaugeMetricFamily

    started: list[str] = []

    def hanging(name: str) -> scrape.GaugeRead:
        async def read(conn: Any, now: Any) -> list[scrape.Family]:
            started.append(name)
            await asyncio.Event().wait()
            raise AssertionError("never reached")

        return read

    async def answering(conn: Any, now: Any) -> list[scrape.Family]:
        return [GaugeMetricFamily("units_api_test_answered", "An answer.", value=1)]

    gauges = {"first": hanging("first"), "second": hanging("second"), "third": answering}
    monkeypatch.setattr(scrape, "DATABASE_GAUGES", gauges)
    monkeypatch.setattr(scrape, "GAUGE_TIMEOUT", 0.5)
    db = Database(create_engine(f"sqlite:///{tmp_path / 'gauges.db'}"))
    try:
        families = await scrape._database_families(db)
    finally:
        await db.dispose()
    assert [family.name for family in families] == ["units_api_test_answered"]
    assert sorted(started) == ["first", "second"]  # both waited on at once, not in turn


def test_a_job_process_counts_its_reads_into_its_server(tmp_path: Path) -> None:
    """An export's child process counts its snapshot's read (on the primary: no replica) where
    its server's scrape adds it up, in the files of its job slot, the same for every job run
    in that slot one after another."""
    shared = tmp_path / "metrics"
    env = {
        "PROMETHEUS_MULTIPROC_DIR": str(shared),
        "UNITS_API_RUN_JOBS": "true",
        "UNITS_API_JOB_PROCESSES": "1",
        "UNITS_API_JOB_POLL_SECONDS": "0.2",
        "UNITS_API_FILES_DIR": str(tmp_path / "files"),
    }
    reads = "units_api_database_reads_total"
    primary = (("database", "primary"),)
    exports = 3
    with (
        fresh_postgres("units_metrics") as url,
        served(url, tmp_path / "log", env=env) as (base, key),
    ):
        auth = {"Authorization": f"Bearer {key}"}
        before = _samples(_get(base, "/metrics").text, reads).get(primary, 0.0)
        for _ in range(exports):
            job = httpx.post(
                f"{base}/api/v2/units/exports", json={"format": "csv"}, headers=auth
            ).json()

            def ended(job: dict[str, Any] = job) -> bool:
                found = _get(base, f"/api/v2/units/exports/{job['id']}", headers=auth).json()
                assert found["status"] != "failed", found
                return found["status"] == "succeeded"

            _wait(ended)

        def counted() -> bool:  # a job's end is seen before its process has exited
            text = _get(base, "/metrics").text
            return _samples(text, reads).get(primary, 0.0) >= before + exports

        _wait(counted)
        written = sorted(path.name for path in shared.glob("*job-*.db"))
    # One slot: its files, whatever the number of jobs run in it.
    assert written and all(re.fullmatch(r"[a-z]+_job-\d+-0\.db", name) for name in written)
    assert len({name.split("_")[0] for name in written}) == len(written)


# Observes the same latencies through `observe_request` and through the library's own
# `observe`, says so, and stays alive until its stdin closes.
_OBSERVER = """
import os, random, sys
os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
from units_api import metrics
metrics.init()
random.seed(7)
edges = [*metrics.LATENCY_BUCKETS, 0.0, 30.0]
for n in range(3000):
    seconds = random.expovariate(20) if n % 3 else random.choice(edges)
    metrics.observe_request("GET", f"/ours/{n % 40}", 200, seconds)
    metrics._series.latency.labels("GET", f"/library/{n % 40}", "200").observe(seconds)
print("observed", flush=True)
sys.stdin.read()
"""


def test_a_request_is_in_the_scrape_of_any_process_once_observed(tmp_path: Path) -> None:
    """The request histogram is written into its process's file as each request is observed,
    the same buckets, counts and sums as the library's own `observe` writes (across the
    file's growth: 80 series), and read by another process while the observer still runs:
    nothing waits in memory for a flush."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    with subprocess.Popen(
        [sys.executable, "-c", _OBSERVER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    ) as observer:
        assert observer.stdout is not None and observer.stdin is not None
        assert observer.stdout.readline() == b"observed\n"
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry, str(tmp_path))  # type: ignore[no-untyped-call]
        text = generate_latest(registry).decode()
        observer.stdin.close()
        assert observer.wait(timeout=30) == 0
    ours: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    library: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            route = sample.labels.get("route", "")
            if sample.name.startswith("units_api_http_request_duration_seconds"):
                labels = tuple(sorted({**sample.labels, "route": route.split("/")[-1]}.items()))
                found = ours if route.startswith("/ours/") else library
                found[sample.name, labels] = sample.value
    assert len(ours) == 40 * (len(LATENCY_BUCKETS) + 1 + 2)  # buckets, +Inf, count, sum
    assert ours == library
    assert sum(v for (name, _), v in ours.items() if name.endswith("_count")) == 3000
