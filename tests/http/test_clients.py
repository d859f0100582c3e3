"""Slow and idle clients, and stopping (CONTRACT 16), against `units-api serve` itself: a
request whose headers or body do not arrive in time is a 408 and its connection closed, a
connection that sends nothing is closed, hundreds of idle and slow connections stop no one
else, and SIGTERM lets the request in flight finish and exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson

from tests.conftest import unit_body, wait_until_ready
from tests.test_cli import free_port

IDLE = 500
SLOW = 50


@contextmanager
def server(tmp_path: Path, **env: str) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """`units-api serve` on SQLite: the process, its base URL and its first admin key."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "units_api", "serve", "--port", str(port)],
        env={
            **os.environ,
            "UNITS_API_DATABASE_URL": f"sqlite:///{tmp_path / 'units.db'}",
            "UNITS_API_FILES_DIR": str(tmp_path / "files"),
            "UNITS_API_ACCESS_LOG": "false",
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.log").open("w"),
        text=True,
        cwd=tmp_path,
    )
    assert process.stdout is not None
    process.stdout.readline()
    key = process.stdout.readline().strip()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base)
        yield process, base, key
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)


def port_of(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def answer(conn: socket.socket) -> bytes:
    """Everything the server writes until it closes the connection."""
    conn.settimeout(30)
    received = b""
    while chunk := conn.recv(65536):
        received += chunk
    return received


def problem_of(raw: bytes) -> dict[str, object]:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head.lower()
    parsed: dict[str, object] = orjson.loads(body)
    return parsed


def test_late_headers_and_bodies_are_a_408_and_silent_connections_are_closed(
    tmp_path: Path,
) -> None:
    with server(tmp_path, UNITS_API_CLIENT_TIMEOUT_SECONDS="1") as (_, base, key):
        port = port_of(base)
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: units\r\nAcce")
            late_headers = answer(conn)
        assert late_headers.startswith(b"HTTP/1.1 408 ")
        assert problem_of(late_headers)["type"] == "/problems/request-timeout"

        body = orjson.dumps(unit_body())
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(
                b"POST /api/v2/units/ HTTP/1.1\r\nHost: units\r\n"
                + f"Authorization: Bearer {key}\r\n".encode()
                + b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body[:10]
            )
            late_body = answer(conn)
        assert late_body.startswith(b"HTTP/1.1 408 ")
        assert problem_of(late_body)["instance"] == "/api/v2/units/"

        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(
                b"POST /api/v2/units/imports HTTP/1.1\r\nHost: units\r\n"
                + f"Authorization: Bearer {key}\r\n".encode()
                + b"Content-Type: multipart/form-data; boundary=b0undary\r\n"
                + b"Content-Length: 100000\r\n\r\n--b0undary\r\n"
            )
            late_upload = answer(conn)
        assert late_upload.startswith(b"HTTP/1.1 408 ")

        with socket.create_connection(("127.0.0.1", port)) as conn:
            assert answer(conn) == b""  # nothing sent: closed without an answer

        assert httpx.get(f"{base}/healthz").status_code == 200
    # a client that left is no error of the server's
    assert "unhandled error" not in (tmp_path / "stderr.log").read_text()


async def _hold(port: int, stop: asyncio.Event) -> None:
    """IDLE connections that send nothing and SLOW ones sending their headers a byte at a
    time, until `stop`."""
    idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(IDLE)]
    slow = [await asyncio.open_connection("127.0.0.1", port) for _ in range(SLOW)]
    request = b"GET /healthz HTTP/1.1\r\nHost: units\r\n" + b"X-Slow: " + b"a" * 1000
    sent = 0
    while not stop.is_set() and sent < len(request):
        for _, writer in slow:
            writer.write(request[sent : sent + 1])
        sent += 1
        await asyncio.sleep(0.2)
    for _, writer in [*idle, *slow]:
        writer.close()


async def test_idle_and_slow_connections_stop_no_one_else(tmp_path: Path) -> None:
    with server(tmp_path) as (_, base, key):
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=base, headers=headers) as client:
            created = await client.post("/api/v2/units/", json=unit_body())
            assert created.status_code == 201
            unit = f"/api/v2/units/{created.json()['id']}"
            stop = asyncio.Event()
            holding = asyncio.create_task(_hold(port_of(base), stop))
            await asyncio.sleep(2)  # every connection open, the slow ones sending
            statuses = [(await client.get(unit)).status_code for _ in range(50)]
            stop.set()
            await holding
        assert statuses == [200] * 50


def test_sigterm_lets_the_request_in_flight_finish_and_exits_0(tmp_path: Path) -> None:
    with server(tmp_path, UNITS_API_SHUTDOWN_GRACE_SECONDS="10") as (process, base, key):
        body = orjson.dumps(unit_body())
        with socket.create_connection(("127.0.0.1", port_of(base))) as conn:
            conn.sendall(
                b"POST /api/v2/units/ HTTP/1.1\r\nHost: units\r\n"
                + f"Authorization: Bearer {key}\r\n".encode()
                + b"Content-Type: application/json\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body[:10]
            )
            time.sleep(0.5)  # the request under way: its headers read
            process.send_signal(signal.SIGTERM)
            conn.sendall(body[10:])
            finished = answer(conn)
        assert finished.startswith(b"HTTP/1.1 201 "), finished[:200]
        assert process.wait(timeout=30) == 0
