"""IndexNow (section 17) through real servers and a receiver on loopback, on both databases:
the key file, pages sent when they appear, change and go away, a channel that becomes or
stops being a website, retries after failures, and nothing lost across a restart."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import READY_UNIT, cli_admin_key, fresh_postgres, unit_body
from tests.processes import serving
from tests.test_cli import free_port
from units_api.migrate import upgrade

KEY = "indexnow-test-key-0123"
SITE = "https://homes.example"
WAIT = 90.0  # seconds: generous, on a busy machine (the contract's bound is 60 s)


@dataclass
class Receiver:
    """An IndexNow endpoint on loopback: answers `status` (or 500 to the first `failures`
    requests), and keeps every request's body with the status it was answered."""

    port: int
    failures: int = 0
    status: int = 200
    received: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/indexnow"

    def answer(self, body: dict[str, Any]) -> int:
        with self.lock:
            status = self.status
            if self.failures > 0:
                self.failures -= 1
                status = 500
            self.received.append((status, body))
            return status

    def taken(self) -> list[str]:
        """Every URL of the requests answered 200."""
        with self.lock:
            return [
                url for status, body in self.received if status == 200 for url in body["urlList"]
            ]

    def tried(self) -> list[str]:
        with self.lock:
            return [url for _, body in self.received for url in body["urlList"]]


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver(free_port())

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            assert self.headers["content-type"].startswith("application/json")
            self.send_response(receiver.answer(body))
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", receiver.port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of its own, migrated."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/units.db"
        upgrade(url)
        yield url
        return
    with fresh_postgres("units_indexnow") as url:
        upgrade(url)
        yield url


@dataclass
class Site:
    env: dict[str, str]
    headers: dict[str, str]
    receiver: Receiver
    log: Path

    @contextmanager
    def serve(self) -> Iterator[httpx.Client]:
        with (
            serving(self.env, free_port(), self.log) as base,
            httpx.Client(base_url=base, headers=self.headers, timeout=30) as client,
        ):
            yield client


@pytest.fixture
def site(database: str, tmp_path: Path) -> Iterator[Site]:
    with receiving() as receiver:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("UNITS_API_")},
            "UNITS_API_DATABASE_URL": database,
            "UNITS_API_FILES_DIR": str(tmp_path / "files"),
            "UNITS_API_ACCESS_LOG": "false",
            "UNITS_API_PUBLIC_BASE_URL": SITE,
            "UNITS_API_INDEXNOW_KEY": KEY,
            "UNITS_API_INDEXNOW_ENDPOINT": receiver.endpoint,
        }
        headers = {"Authorization": f"Bearer {cli_admin_key(env)}"}
        yield Site(env, headers, receiver, tmp_path / "server.log")


def pages(unit_id: str) -> list[str]:
    return [f"{SITE}/listings/{unit_id}", f"{SITE}/ar/listings/{unit_id}"]


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {WAIT:g} s: {what}")


def create(client: httpx.Client, **fields: Any) -> str:
    created = client.post("/api/v2/units/", json=unit_body(**{**READY_UNIT, **fields}))
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def publish(client: httpx.Client, unit_id: str, action: str = "publish", *channels: str) -> None:
    body: dict[str, Any] = {"action": action}
    if action == "publish":
        body["channels"] = list(channels or ["website"])
    done = client.put(f"/api/v2/units/publishing-actions/{unit_id}", json=body)
    assert done.status_code == 200, done.text


def test_the_key_file_is_served_and_no_other(site: Site) -> None:
    with site.serve() as client:
        found = client.get(f"/{KEY}.txt")
        assert found.status_code == 200
        assert found.headers["content-type"] == "text/plain; charset=utf-8"
        assert found.text == KEY
        assert client.get("/other-key-0000.txt").status_code == 404
        assert client.get(f"/{KEY}x.txt").status_code == 404


def test_pages_are_sent_when_they_appear_change_and_go_away(site: Site) -> None:
    receiver = site.receiver
    with site.serve() as client:
        live = create(client)
        publish(client, live)
        eventually(lambda: set(pages(live)) <= set(receiver.taken()), "the published pages")
        _status, body = receiver.received[0]
        assert (body["host"], body["key"]) == ("homes.example", KEY)
        assert body["keyLocation"] == f"{SITE}/{KEY}.txt"
        draft = create(client)
        assert client.patch(f"/api/v2/units/{draft}", json={"price": 3}).is_success
        assert client.patch(f"/api/v2/units/{live}", json={"price": 3100000}).is_success
        eventually(lambda: receiver.taken().count(pages(live)[0]) >= 2, "the edited pages")
        publish(client, live, "unpublish")
        eventually(lambda: receiver.taken().count(pages(live)[1]) >= 3, "the unpublished pages")
        assert not set(pages(draft)) & set(receiver.tried())  # never live: never sent
        assert all(len(body["urlList"]) <= 10_000 for _, body in receiver.received)


def test_a_channel_that_becomes_a_website_sends_its_units_pages(site: Site) -> None:
    receiver = site.receiver
    with site.serve() as client:
        assert client.put("/api/v2/channels/portal", json={"kind": "label"}).is_success
        units = [create(client) for _ in range(3)]
        for unit_id in units:
            publish(client, unit_id, "publish", "portal")
        assert client.put("/api/v2/channels/portal", json={"kind": "website"}).is_success
        expected = {url for unit_id in units for url in pages(unit_id)}
        eventually(lambda: expected <= set(receiver.taken()), "the channel's units' pages")
        assert client.put("/api/v2/channels/portal", json={"kind": "label"}).is_success
        eventually(
            lambda: all(receiver.taken().count(url) >= 2 for url in expected),
            "the pages gone with the channel",
        )
        # Deleted while a website: each unit taken off it is sent.
        assert client.put("/api/v2/channels/portal", json={"kind": "website"}).is_success
        eventually(
            lambda: all(receiver.taken().count(url) >= 3 for url in expected),
            "the pages back with the channel",
        )
        assert client.delete("/api/v2/channels/portal").status_code == 204
        eventually(
            lambda: all(receiver.taken().count(url) >= 4 for url in expected),
            "the pages gone with the deleted channel",
        )


def test_a_failed_request_is_tried_again(site: Site) -> None:
    receiver = site.receiver
    receiver.failures = 2
    with site.serve() as client:
        unit_id = create(client)
        publish(client, unit_id)
        eventually(lambda: set(pages(unit_id)) <= set(receiver.taken()), "the pages, at last")
        metrics = client.get("/metrics").text
        assert 'units_api_indexnow_requests_total{outcome="failed"} 2.0' in metrics
        assert 'units_api_indexnow_requests_total{outcome="succeeded"} 1.0' in metrics
    statuses = [
        status for status, body in receiver.received if pages(unit_id)[0] in body["urlList"]
    ]
    assert statuses[:3] == [500, 500, 200]


def test_nothing_is_lost_across_a_restart(site: Site) -> None:
    receiver = site.receiver
    receiver.status = 503
    with site.serve() as client:
        unit_id = create(client)
        publish(client, unit_id)
        eventually(lambda: pages(unit_id)[0] in receiver.tried(), "a first, refused, try")
    receiver.status = 200
    assert pages(unit_id)[0] not in receiver.taken()
    with site.serve():
        eventually(lambda: set(pages(unit_id)) <= set(receiver.taken()), "the pages, after")


def test_two_server_processes_send_each_change_once(site: Site) -> None:
    receiver = site.receiver
    site.env["UNITS_API_WORKERS"] = "2"
    with site.serve() as client:
        units = []
        for _ in range(3):
            units.append(create(client))
            publish(client, units[-1])
            eventually(lambda: pages(units[-1])[0] in receiver.taken(), "the pages")
    taken = receiver.taken()
    assert [taken.count(url) for unit_id in units for url in pages(unit_id)] == [1] * 6
