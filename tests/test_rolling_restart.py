"""A rolling restart loses no request (CONTRACT 16, stopping): two `units-api serve` on one
PostgreSQL database, behind HAProxy configured as the README's "Deploying without downtime"
says, are restarted one after the other (SIGTERM, exit 0, started again) while clients keep
creating units (each with an Idempotency-Key) and reading them through the proxy. Every answer
is a 2xx, and every acknowledged create is there afterwards, once."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conftest import (
    REQUIRE_SERVICES,
    cli_admin_key,
    fresh_postgres,
    unit_body,
    wait_until_ready,
)
from tests.processes import start_serve
from tests.test_cli import free_port
from tests.test_stopping import wait_for
from units_api.migrate import upgrade

UNITS = "/api/v2/units/"
SERVERS = ("a", "b")
CLIENTS = 4
# The README's configuration, on loopback ports and with the test's stats socket.
HAPROXY_CONFIG = """\
global
    log stderr format raw local0 info
    stats socket {socket} mode 600 level admin

defaults
    mode http
    log global
    option httplog
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout check 2s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout

frontend units
    bind 127.0.0.1:{port}
    default_backend units

backend units
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz
    http-check expect status 200
    acl keyed req.hdr(idempotency-key) -m found
    http-request disable-l7-retry if {{ method POST PATCH }} !keyed
    default-server check inter 500ms fall 2 rise 2
{servers}
"""
# Longer than HAProxy needs to see two failed checks (fall 2, inter 500ms).
DRAIN_SECONDS = "3"


def haproxy_path() -> str:
    path = shutil.which("haproxy")
    if path is None:
        reason = "HAProxy is not installed (apt-get install haproxy)"
        if REQUIRE_SERVICES:
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@dataclass
class Proxy:
    base: str
    stats: Path

    def states(self) -> dict[str, str]:
        """Each server's state as HAProxy sees it (UP, DOWN, ...), from its stats socket."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(self.stats))
            sock.sendall(b"show stat\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        rows = csv.DictReader(answer.decode().removeprefix("# ").splitlines())
        return {row["svname"]: row["status"] for row in rows if row["pxname"] == "units"}

    def wait_until(self, server: str, state: str) -> None:
        wait_for(lambda: self.states().get(server, "").startswith(state), f"{server} {state}")


@contextmanager
def haproxy(home: Path, ports: dict[str, int]) -> Iterator[Proxy]:
    """HAProxy in the foreground in front of the servers on `ports`, both seen up."""
    executable = haproxy_path()
    port = free_port()
    stats = home / "haproxy.sock"
    servers = "\n".join(f"    server {name} 127.0.0.1:{number}" for name, number in ports.items())
    config = home / "haproxy.cfg"
    config.write_text(HAPROXY_CONFIG.format(socket=stats, port=port, servers=servers))
    subprocess.run([executable, "-c", "-q", "-f", str(config)], check=True)
    with (home / "haproxy.log").open("ab") as log:
        process = subprocess.Popen([executable, "-db", "-f", str(config)], stdout=log, stderr=log)
    try:
        proxy = Proxy(f"http://127.0.0.1:{port}", stats)
        wait_for(stats.exists, "HAProxy's stats socket")
        for name in ports:
            proxy.wait_until(name, "UP")
        yield proxy
    finally:
        process.terminate()
        process.wait(10)


@dataclass
class Load:
    """Clients that create a unit (with an Idempotency-Key) and read it back, again and again,
    until stopped: what was acknowledged, and every answer that was not a 2xx."""

    base: str
    headers: dict[str, str]
    created: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def client(self, number: int) -> None:
        with httpx.Client(base_url=self.base, headers=self.headers, timeout=30) as http:
            while not self.stopping.is_set():
                self.create_and_read(http, number)
                time.sleep(0.02)

    def create_and_read(self, http: httpx.Client, number: int) -> None:
        key = str(uuid.uuid4())
        body = unit_body(name=f"Rolling {number} {key[:8]}")
        try:
            created = http.post(UNITS, json=body, headers={"Idempotency-Key": key})
            if created.status_code != 201:
                self.failures.append(f"POST {created.status_code} {created.text[:200]}")
                return
            unit = created.json()["id"]
            self.created.append(unit)
            read = http.get(f"{UNITS}{unit}")
            if read.status_code != 200:
                self.failures.append(f"GET {read.status_code} {read.text[:200]}")
        except httpx.HTTPError as exc:
            self.failures.append(f"{type(exc).__name__}: {exc}")

    @contextmanager
    def running(self) -> Iterator[Load]:
        threads = [threading.Thread(target=self.client, args=(n,)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        try:
            yield self
        finally:
            self.stopping.set()
            for thread in threads:
                thread.join(60)

    def wait_for_more(self, count: int = 20) -> None:
        target = len(self.created) + count
        wait_for(lambda: len(self.created) >= target or bool(self.failures), "more creates")


def stored_ids(base: str, headers: dict[str, str]) -> tuple[int, set[str]]:
    """Every unit's id, and the exact total the list reports."""
    ids: set[str] = set()
    page, total = 1, 0
    with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
        while True:
            listed = http.get(
                UNITS,
                params={"fields": "id", "limit": 100, "page": page},
                headers={"Prefer": "count=exact"},
            )
            assert listed.status_code == 200, listed.text
            total = listed.json()["meta"]["total"]
            ids.update(unit["id"] for unit in listed.json()["data"])
            if listed.json()["links"]["next"] is None:
                return total, ids
            page += 1


class Servers:
    """The two `units-api serve`, each on its own port, its output in its own log."""

    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.env = env
        self.home = home
        self.ports = {name: free_port() for name in SERVERS}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str) -> None:
        env = {**self.env, "UNITS_API_FILES_DIR": str(self.home / name)}
        self.processes[name] = start_serve(env, self.ports[name], self.home / f"{name}.log")

    def ready(self, name: str) -> None:
        wait_until_ready(f"http://127.0.0.1:{self.ports[name]}", seconds=60)

    def signal(self, name: str) -> None:
        self.processes[name].send_signal(signal.SIGTERM)

    def exit_code(self, name: str) -> int:
        return self.processes[name].wait(60)

    def log(self, name: str) -> str:
        return (self.home / f"{name}.log").read_text()[-3000:]

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


def test_two_servers_restarted_one_after_the_other_under_load_lose_no_request(
    tmp_path: Path,
) -> None:
    with fresh_postgres("units_rolling") as url, ExitStack() as stack:
        upgrade(url)
        env = {
            **os.environ,
            "UNITS_API_DATABASE_URL": url,
            "UNITS_API_AUTO_MIGRATE": "false",
            "UNITS_API_RUN_JOBS": "false",
            "UNITS_API_ACCESS_LOG": "false",
            "UNITS_API_RATE_LIMIT": "100000/minute",
            "UNITS_API_DB_POOL_SIZE": "5",
            "UNITS_API_DB_FAST_POOL_SIZE": "5",
            "UNITS_API_SHUTDOWN_DRAIN_SECONDS": DRAIN_SECONDS,
            "UNITS_API_SHUTDOWN_GRACE_SECONDS": "10",
        }
        headers = {"Authorization": f"Bearer {cli_admin_key(env)}"}
        servers = Servers(env, tmp_path)
        stack.callback(servers.close)
        for name in SERVERS:
            servers.start(name)
        for name in SERVERS:
            servers.ready(name)
        proxy = stack.enter_context(haproxy(tmp_path, servers.ports))
        load = Load(proxy.base, headers)
        served_while_down: dict[str, int] = {}
        with load.running():
            load.wait_for_more()
            for name in SERVERS:
                before = len(load.created)
                servers.signal(name)
                proxy.wait_until(name, "DOWN")  # its /readyz answers 503 while it drains
                assert servers.exit_code(name) == 0, servers.log(name)
                servers.start(name)
                servers.ready(name)
                proxy.wait_until(name, "UP")
                served_while_down[name] = len(load.created) - before
                load.wait_for_more()
        assert load.failures == []
        # The other server answered while each was restarted.
        assert all(count > 0 for count in served_while_down.values()), served_while_down
        total, ids = stored_ids(proxy.base, headers)
        assert total == len(load.created)
        assert ids == set(load.created)
