"""Benchmark of other clients' reads while slow and idle clients hold connections (CONTRACT
16: 500 idle connections and 50 clients sending their headers a byte a second keep GET one
unit's p99 under 3x its value without them), and of what each server does to such clients.

    make bench-slow-clients
    .venv/bin/python bench/slow_clients.py --runs 3 --duration 10
    .venv/bin/python bench/slow_clients.py --server units-api --server granian --runs 3

Each `--server` (repeatable; default `units-api`) is one process with one worker on its own
copy of a SQLite database with 1,000 units, all of them started together, each limited to
1,024 open files (`ulimit -n 1024`):

- `units-api`: `units-api serve` (uvicorn with `http/clients.py`'s deadlines);
- `uvicorn-plain`: uvicorn serving the same app without them (`--timeout-keep-alive 5`);
- `granian`: granian, ASGI, `--http1-header-read-timeout` at the client timeout;
- `hypercorn`: hypercorn, `--keep-alive 5 --read-timeout` at the client timeout.

The client timeout is `--timeout` (10 s; UNITS_API_CLIENT_TIMEOUT_SECONDS for `units-api`).
wrk (32 connections) asks each server for the units in turn, alone, then with the idle and
slow connections open (kept open, the slow ones fed a byte a second, for the whole run),
server after server, `--runs` times each; the medians and the ratio of the p99s are
reported. Then, one server at a time, what it does within the timeout and 5 s more: to
`--idle` new connections that send nothing, to 50 kept alive after one answer, to 5 clients
sending their headers a byte a second, to a 1 MB upload sent at 10 KB/s; and how long a new
client waits for an answer while 1,100 idle connections are open (past its 1,024 files).
"""

from __future__ import annotations

import argparse
import http.client
import json
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from harness import RESULTS, free_port, run_wrk, server_env, start_server, wait_ready

UNITS = 1_000
SERVERS = ("units-api", "uvicorn-plain", "granian", "hypercorn")
KEEP_ALIVE = 5  # seconds an idle keep-alive connection is kept (uvicorn's default)
MARGIN = 5  # seconds past the timeout a behaviour is watched for
FILES = 1_024  # the servers' open files limit
CROWD = 1_100  # idle connections past it


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--server", action="append", choices=SERVERS, dest="servers")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--slow", type=int, default=50)
    parser.add_argument("--timeout", type=int, default=10, help="the client timeout, seconds")
    args = parser.parse_args()
    args.servers = list(dict.fromkeys(args.servers or ["units-api"]))
    return args


def command(server: str, port: int, timeout: int) -> list[str]:
    """How `server` is started on `port` with one worker, each with its best settings for slow
    and idle clients."""
    app = "units_api.app:create_app"
    if server == "units-api":
        return [sys.executable, "-m", "units_api", "serve", "--port", str(port), "--workers", "1"]
    if server == "uvicorn-plain":
        return [
            sys.executable, "-m", "uvicorn", app, "--factory", "--port", str(port),
            "--loop", "uvloop", "--http", "httptools", "--no-access-log",
            "--no-server-header", "--timeout-keep-alive", str(KEEP_ALIVE),
        ]  # fmt: skip
    if server == "granian":
        return [
            sys.executable, "-m", "granian", "--interface", "asgi", "--factory", app,
            "--port", str(port), "--workers", "1", "--loop", "uvloop", "--http", "1",
            "--no-access-log", "--http1-header-read-timeout", str(timeout * 1000),
        ]  # fmt: skip
    return [
        sys.executable, "-m", "hypercorn", f"{app}()", "--bind", f"127.0.0.1:{port}",
        "--workers", "1", "--worker-class", "uvloop", "--keep-alive", str(KEEP_ALIVE),
        "--read-timeout", str(timeout),
    ]  # fmt: skip


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILES, FILES))


class Server:
    """One server, on its own copy of the database."""

    def __init__(self, name: str, database: Path, folder: Path, timeout: int) -> None:
        self.name, self.port = name, free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        copy = folder / name
        (copy / "metrics").mkdir(parents=True)
        shutil.copy(database, copy / "units.db")
        env = {
            **server_env(),
            "UNITS_API_DATABASE_URL": f"sqlite:///{copy}/units.db",
            "UNITS_API_AUTO_MIGRATE": "false",
            "UNITS_API_ACCESS_LOG": "false",
            "UNITS_API_RATE_LIMIT": "100000000/minute",
            "UNITS_API_CLIENT_TIMEOUT_SECONDS": str(timeout),
            "PROMETHEUS_MULTIPROC_DIR": str(copy / "metrics"),
        }
        self.log = RESULTS / f"slow_clients_{name}.log"
        self.process = subprocess.Popen(
            command(name, self.port, timeout),
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            preexec_fn=_limit_files,
        )
        wait_ready(self.process, f"{self.base}/readyz", self.log)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Holders:
    """`idle` connections that send nothing and `slow` ones that send a request's headers a
    byte a second, each opened again when the server closes it."""

    def __init__(self, port: int, idle: int, slow: int) -> None:
        self.port, self.idle, self.slow = port, idle, slow
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._idle, daemon=True)] + [
            threading.Thread(target=self._slow, daemon=True) for _ in range(slow)
        ]

    def _connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=5)

    def _idle(self) -> None:
        held: list[socket.socket] = []
        while not self.stop.is_set():
            while len(held) < self.idle and not self.stop.is_set():
                try:
                    held.append(self._connect())
                except OSError:
                    time.sleep(0.1)
            time.sleep(1)
            alive = []
            for sock in held:
                if closed(sock):
                    sock.close()
                else:
                    alive.append(sock)
            held = alive
        for sock in held:
            sock.close()

    def _slow(self) -> None:
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 10_000
        while not self.stop.is_set():
            try:
                sock = self._connect()
            except OSError:
                time.sleep(0.1)
                continue
            try:
                for byte in request:
                    if self.stop.is_set():
                        break
                    sock.sendall(bytes([byte]))
                    time.sleep(1)
            except OSError:
                time.sleep(0.1)
            finally:
                sock.close()

    def __enter__(self) -> Holders:
        for thread in self.threads:
            thread.start()
        time.sleep(3)  # the connections are open before the load starts
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()


def closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (a closed one reads as b"" at once, or fails)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _idle_closed(port: int, count: int, window: float, after_answer: bool) -> dict[str, Any]:
    """How many of `count` connections, new or after one answer, the server closed within
    `window` seconds."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if after_answer:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            response = http.client.HTTPResponse(sock)
            response.begin()
            response.read()
        socks.append(sock)
    time.sleep(window)
    shut = sum(closed(sock) for sock in socks)
    for sock in socks:
        sock.close()
    return {"connections": count, "closed": shut}


def _watch(sock: socket.socket, started: float) -> str | None:
    """What the server did to `sock` so far: its answer's status, "closed", or None."""
    sock.setblocking(False)
    try:
        data = sock.recv(64)
    except BlockingIOError:
        return None
    except OSError:
        data = b""
    finally:
        sock.setblocking(True)
    after = f" after {time.monotonic() - started:.0f} s"
    if not data:
        return "closed" + after
    return data.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)[1] + after


def _slow_headers(port: int, window: float) -> str:
    """What the server does to a client sending its headers a byte a second."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    started = time.monotonic()
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 10_000
    try:
        for byte in request:
            if (seen := _watch(sock, started)) is not None:
                return seen
            if time.monotonic() - started > window:
                return f"kept for {window:.0f} s"
            sock.sendall(bytes([byte]))
            time.sleep(1)
    except OSError:
        return f"closed after {time.monotonic() - started:.0f} s"
    finally:
        sock.close()
    return "answered"


def _trickled_body(port: int, key: str, window: float) -> str:
    """What the server does to a 1 MB upload sent at 10 KB/s (100 s in all)."""
    boundary = "b0undary"
    head = (
        f"--{boundary}\r\n"
        'Content-Disposition: form-data; name="file"; filename="units.csv"\r\n'
        "Content-Type: text/csv\r\n\r\nname,type\r\n"
    ).encode()
    size = 1_000_000
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(
        (
            "POST /api/v2/units/imports HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {key}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {size}\r\n\r\n"
        ).encode()
        + head
    )
    started, sent = time.monotonic(), len(head)
    try:
        while sent < size:
            if (seen := _watch(sock, started)) is not None:
                return seen
            if time.monotonic() - started > window:
                return f"still read after {window:.0f} s"
            sock.sendall(b"x" * 1_000)
            sent += 1_000
            time.sleep(0.1)
    except OSError:
        return f"closed after {time.monotonic() - started:.0f} s"
    finally:
        sock.close()
    return "read whole"


def _crowded(server: Server, window: float) -> dict[str, Any]:
    """1,100 idle connections against a server limited to 1,024 open files: how long a new
    client, trying again when it is refused, waits for an answer beside them (None: none
    within `window` seconds), and how many of them the server closed by then."""
    socks = []
    for _ in range(CROWD):
        try:
            socks.append(socket.create_connection(("127.0.0.1", server.port), timeout=2))
        except OSError:
            break
    time.sleep(1)
    started = time.monotonic()
    wait, refused = None, 0
    while (left := started + window - time.monotonic()) > 0:
        try:
            if httpx.get(f"{server.base}/healthz", timeout=min(5.0, left)).status_code == 200:
                wait = round(time.monotonic() - started, 1)
                break
        except httpx.TransportError:
            refused += 1
            time.sleep(0.5)
    time.sleep(max(0.0, started + window - time.monotonic()))
    shut = sum(closed(sock) for sock in socks)
    for sock in socks:
        sock.close()
    time.sleep(1)
    return {
        "connected": len(socks),
        "new client answered after s": wait,
        "new client's tries refused or timed out": refused,
        f"closed by the server within {window + 1:.0f} s": shut,
        "answered after they left": httpx.get(f"{server.base}/healthz").status_code == 200,
    }


def behaviours(server: Server, key: str, idle: int, timeout: int) -> dict[str, Any]:
    """What `server` does to idle and slow clients, all watched together for the timeout and
    MARGIN seconds more; then the crowd past its open files."""
    window = timeout + MARGIN
    found: dict[str, Any] = {}
    slow: list[str] = []
    watched = {
        "idle new connections": lambda: _idle_closed(server.port, idle, window, False),
        "idle after one answer": lambda: _idle_closed(server.port, 50, window, True),
        "1 MB body at 10 KB/s": lambda: _trickled_body(server.port, key, window),
    }
    threads = [
        threading.Thread(target=lambda n=name, f=find: found.__setitem__(n, f()))
        for name, find in watched.items()
    ] + [
        threading.Thread(target=lambda: slow.append(_slow_headers(server.port, window)))
        for _ in range(5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found["5 slow headers"] = dict(Counter(slow))
    found[f"{CROWD:,} idle past {FILES:,} open files"] = _crowded(server, window)
    return found


def seed(folder: Path) -> tuple[Path, str, list[str]]:
    """A SQLite database with UNITS units, its admin key and the units' paths."""
    url = f"sqlite:///{folder}/units.db"
    env = {
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_AUTO_MIGRATE": "true",
        "UNITS_API_RATE_LIMIT": "100000000/minute",
    }
    log = RESULTS / "slow_clients_seed.log"
    port = free_port()
    server = start_server(url, port, 1, log, env)
    try:
        key = _admin_key(log)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}
        ) as client:
            paths = [
                "/api/v2/units/"
                + client.post("/api/v2/units/", json={"name": f"Unit {n}", "type": "villa"}).json()[
                    "id"
                ]
                for n in range(UNITS)
            ]
    finally:
        server.terminate()
        server.wait(timeout=30)
    return folder / "units.db", key, paths


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {m: statistics.median(r[m] for r in runs) for m in runs[0]}


def main() -> None:
    args = parse_args()
    RESULTS.mkdir(exist_ok=True)
    # This process holds the crowd's connections: more than the servers may.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    folder = Path(tempfile.mkdtemp())
    database, key, paths = seed(folder)
    listed = RESULTS / "slow_clients_paths.txt"
    listed.write_text("".join(f"{path}\n" for path in paths))
    wrk = {"connections": 32, "script": "paths.lua", "script_args": (str(listed),)}
    servers: list[Server] = []
    alone: dict[str, list[dict[str, float]]] = {name: [] for name in args.servers}
    beside: dict[str, list[dict[str, float]]] = {name: [] for name in args.servers}
    report: dict[str, Any] = {
        "settings": {
            "client timeout s": args.timeout,
            "keep-alive s": KEEP_ALIVE,
            "open files": FILES,
            "commands": {name: command(name, 8000, args.timeout)[1:] for name in args.servers},
        }
    }
    try:
        for name in args.servers:
            servers.append(Server(name, database, folder, args.timeout))
        for _ in range(args.runs):
            for server in servers:
                alone[server.name].append(run_wrk(server.base, key, duration=args.duration, **wrk))
                with Holders(server.port, args.idle, args.slow):
                    beside[server.name].append(
                        run_wrk(server.base, key, duration=args.duration, **wrk)
                    )
        for server in servers:
            figures: dict[str, Any] = {"alone": _median(alone[server.name])}
            figures["beside slow and idle clients"] = _median(beside[server.name])
            figures["p99 ratio"] = (
                figures["beside slow and idle clients"]["p99_ms"] / figures["alone"]["p99_ms"]
            )
            figures["behaviours"] = behaviours(server, key, args.idle, args.timeout)
            report[server.name] = figures
            (RESULTS / "slow_clients.json").write_text(json.dumps(report, indent=2))
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    _print(report, servers)


def _print(report: dict[str, Any], servers: list[Server]) -> None:
    for server in servers:
        figures = report[server.name]
        print(server.name)
        for name in ("alone", "beside slow and idle clients"):
            each = figures[name]
            print(
                f"  {name:<30}{each['rps']:>9,.0f}/s  p50 {each['p50_ms']:.1f} ms  "
                f"p99 {each['p99_ms']:.1f} ms  non-2xx {each['non_2xx']:.0f}  "
                f"socket errors {each['socket_errors']:.0f}"
            )
        print(f"  p99 beside them / alone: {figures['p99 ratio']:.2f} (target < 3)")
        for name, seen in figures["behaviours"].items():
            print(f"  {name}: {seen}")


def _admin_key(log: Path) -> str:
    """The first admin key the server printed as it started on an empty database."""
    for line in log.read_text().splitlines():
        if line.startswith("uak_"):
            return line.strip()
    raise SystemExit(f"no admin key in {log}")


if __name__ == "__main__":
    main()
