"""Benchmark of other clients' reads while slow and idle clients hold connections (CONTRACT
16: 500 idle connections and 50 clients sending their headers a byte a second keep GET one
unit's p99 under 3x its value without them).

    make bench-slow-clients
    .venv/bin/python bench/slow_clients.py --runs 3 --duration 10

One `units-api serve` process on a SQLite database of its own with 1,000 units; wrk (32
connections) asks for them in turn, alone, then with the idle and slow connections open
(kept open, and the slow ones fed a byte a second, for the whole run), alternately, `--runs`
times each. Reports the medians and the ratio of the p99s.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from harness import RESULTS, free_port, run_wrk, start_server

UNITS = 1_000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--slow", type=int, default=50)
    return parser.parse_args()


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
            for sock in held:  # a closed one reads as b"" at once
                sock.setblocking(False)
                try:
                    closed = sock.recv(1) == b""
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if closed:
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


def main() -> None:
    args = parse_args()
    RESULTS.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp())
    port = free_port()
    url = f"sqlite:///{folder}/units.db"
    env = {
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_AUTO_MIGRATE": "true",
        "UNITS_API_RATE_LIMIT": "100000000/minute",
    }
    log = RESULTS / "slow_clients_server.log"
    server = start_server(url, port, 1, log, env)
    base = f"http://127.0.0.1:{port}"
    try:
        key = _admin_key(log)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as client:
            ids = [
                client.post("/api/v2/units/", json={"name": f"Unit {n}", "type": "villa"}).json()[
                    "id"
                ]
                for n in range(UNITS)
            ]
        listed = RESULTS / "slow_clients_paths.txt"
        listed.write_text("".join(f"/api/v2/units/{unit_id}\n" for unit_id in ids))
        wrk = {"connections": 32, "script": "paths.lua", "script_args": (str(listed),)}
        alone, beside = [], []
        for _ in range(args.runs):
            alone.append(run_wrk(base, key, duration=args.duration, **wrk))
            with Holders(port, args.idle, args.slow):
                beside.append(run_wrk(base, key, duration=args.duration, **wrk))
    finally:
        server.terminate()
        server.wait(timeout=30)
    report: dict[str, Any] = {
        name: {m: statistics.median(r[m] for r in runs) for m in runs[0]}
        for name, runs in (("alone", alone), ("beside slow and idle clients", beside))
    }
    ratio = report["beside slow and idle clients"]["p99_ms"] / report["alone"]["p99_ms"]
    report["p99 ratio"] = ratio
    (RESULTS / "slow_clients.json").write_text(json.dumps(report, indent=2))
    for name in ("alone", "beside slow and idle clients"):
        figures = report[name]
        print(
            f"{name:<30}{figures['rps']:>9,.0f}/s  p50 {figures['p50_ms']:.1f} ms  "
            f"p99 {figures['p99_ms']:.1f} ms  non-2xx {figures['non_2xx']:.0f}  "
            f"socket errors {figures['socket_errors']:.0f}"
        )
    print(f"p99 beside them / alone: {ratio:.2f} (target < 3)")


def _admin_key(log: Path) -> str:
    """The first admin key the server printed as it started on an empty database."""
    for line in log.read_text().splitlines():
        if line.startswith("uak_"):
            return line.strip()
    raise SystemExit(f"no admin key in {log}")


if __name__ == "__main__":
    main()
