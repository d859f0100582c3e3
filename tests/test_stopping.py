"""Stopping (CONTRACT 16): `units-api worker` stops on SIGTERM, its loops ending between
steps, and exits 0; `units-api serve` with UNITS_API_SHUTDOWN_DRAIN_SECONDS drains first:
`/readyz` answers 503 while every other request is still served (each answer closing its
connection), then it stops and exits 0; SIGINT during the drain stops it at once, a repeated
SIGTERM does not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import CLI, cli_admin_key, unit_body, wait_until_ready
from tests.test_cli import free_port
from units_api.migrate import upgrade


def test_a_worker_stops_on_sigterm_and_exits_0(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'units.db'}"
    upgrade(url)
    env = {**os.environ, "UNITS_API_DATABASE_URL": url, "UNITS_API_FILES_DIR": str(tmp_path)}
    log = tmp_path / "worker.log"
    port = free_port()
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "units_api", "worker", "--metrics-port", str(port)],
            env=env,
            stdout=out,
            stderr=out,
        )
    try:
        wait_until_ready(f"http://127.0.0.1:{port}")  # its loops started
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, log.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


@contextmanager
def server(
    database_url: str, tmp_path: Path, drain: str
) -> Iterator[tuple[subprocess.Popen[bytes], str, dict[str, str]]]:
    """`units-api serve` draining `drain` seconds before it stops: the process, its base URL
    and an admin key's headers."""
    env = {
        **os.environ,
        "UNITS_API_DATABASE_URL": database_url,
        "UNITS_API_FILES_DIR": str(tmp_path),
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_RUN_JOBS": "false",
        "UNITS_API_BOOTSTRAP_ADMIN_KEY": "false",
        "UNITS_API_SHUTDOWN_DRAIN_SECONDS": drain,
    }
    headers = {"Authorization": f"Bearer {cli_admin_key(env)}"}
    port = free_port()
    with (tmp_path / "serve.log").open("wb") as out:
        process = subprocess.Popen(
            [*CLI, "serve", "--port", str(port)], env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base)
        yield process, base, headers
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.1)


def readiness(base: str) -> int:
    return httpx.get(f"{base}/readyz").status_code


def test_a_draining_server_leaves_readiness_and_serves_on_until_sigint(
    database_url: str, tmp_path: Path
) -> None:
    with server(database_url, tmp_path, drain="300") as (process, base, headers):
        process.send_signal(signal.SIGTERM)
        wait_for(lambda: readiness(base) == 503, "/readyz to answer 503")
        process.send_signal(signal.SIGTERM)  # again: it drains on
        with httpx.Client(base_url=base, headers=headers) as http:
            ready = http.get("/readyz")
            alive = http.get("/healthz")
            created = http.post("/api/v2/units/", json=unit_body())
            read = http.get(f"/api/v2/units/{created.json()['id']}")
        assert ready.headers["content-type"] == "application/problem+json"
        assert ready.json()["type"].endswith("/unavailable")
        assert "stopping" in ready.json()["detail"]
        assert alive.status_code == 200
        assert created.status_code == 201
        assert read.status_code == 200
        # Each answer closes its connection: no client keeps one the server will close.
        assert {r.headers["connection"] for r in (ready, alive, created, read)} == {"close"}
        process.send_signal(signal.SIGINT)  # no more waiting
        assert process.wait(30) == 0, (tmp_path / "serve.log").read_text()[-3000:]


def test_a_draining_server_stops_by_itself_and_exits_0(sqlite_url: str, tmp_path: Path) -> None:
    with server(sqlite_url, tmp_path, drain="1") as (process, _, _):
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, (tmp_path / "serve.log").read_text()[-3000:]
