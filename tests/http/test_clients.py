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

from tests.conftest import stop_server, unit_body, wait_until_ready
from tests.test_cli import free_port
from units_api.http.clients import HeadWithBody

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
        stop_server(process, 30)


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


class Recorder(asyncio.Transport):
    """A transport that keeps what each call would have sent, one entry per call."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.sent.append(bytes(data))

    def writelines(self, list_of_data: object) -> None:
        self.sent.append(b"".join(list_of_data))  # type: ignore[arg-type]

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


async def test_a_head_goes_with_its_body_in_one_call_and_alone_at_the_end_of_the_turn() -> None:
    loop = asyncio.get_running_loop()
    recorder = Recorder()
    transport = HeadWithBody(recorder, loop)
    transport.write(HEAD)
    transport.write(b"{}")
    assert recorder.sent == [HEAD + b"{}"]

    # A head whose body waits (a stream's first piece not read yet) is not held past the turn.
    transport.write(HEAD)
    assert recorder.sent == [HEAD + b"{}"]
    await asyncio.sleep(0)
    assert recorder.sent == [HEAD + b"{}", HEAD]
    transport.write(b"{}")
    assert recorder.sent[-1] == b"{}"

    # A body's own pieces, and anything not a head, go at once; a close sends a held head.
    transport.write(b"HTTP/1.1 is text in a body")
    assert recorder.sent[-1] == b"HTTP/1.1 is text in a body"
    transport.write(HEAD)
    transport.close()
    assert recorder.sent[-1] == HEAD and recorder.closed
    await asyncio.sleep(0)
    assert recorder.sent.count(HEAD) == 2


def test_answers_are_whole_when_heads_wait_for_their_bodies(tmp_path: Path) -> None:
    """Keep-alive requests of every shape, a 304 and a 204 among them, on one connection."""
    with server(tmp_path) as (_, base, key), httpx.Client(base_url=base) as client:
        headers = {"Authorization": f"Bearer {key}"}
        created = client.post("/api/v2/units", json=unit_body(), headers=headers)
        assert created.status_code == 201
        path = f"/api/v2/units/{created.json()['id']}"
        for _ in range(3):
            got = client.get(path, headers=headers)
            assert got.status_code == 200 and got.json() == created.json()
            again = client.get(path, headers={**headers, "If-None-Match": got.headers["etag"]})
            assert again.status_code == 304 and again.content == b""
            other = client.post("/api/v2/units", json=unit_body(), headers=headers).json()["id"]
            gone = client.delete(f"/api/v2/units/{other}", headers=headers)
            assert gone.status_code == 204 and gone.content == b""
            missing = client.get("/api/v2/units/nothing-here", headers=headers)
            assert missing.status_code in (400, 404)
            assert missing.headers["content-type"] == "application/problem+json"
