"""What the access log and the request metrics cost a request by themselves: the service's
middleware (`RequestContextMiddleware`) around an app that answers at once, called in an event
loop as a server calls it, with both on, each alone, and both off, in alternating rounds.

Needs no database or server: a figure of the code alone, steadier than a rate of a server on
a shared machine (`ops.py` measures that). The log's lines go to a file, as a server's do when
its output is redirected; the metrics to a directory of their own, as `units-api serve`
gives its processes. Prints the best of the rounds per request (the least disturbed), and
what each configuration adds to both off.

    .venv/bin/python bench/middleware.py                       # 25 rounds of 4,000 requests
    .venv/bin/python bench/middleware.py --rounds 50 --requests 2000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from units_api import metrics
from units_api.http.middleware import RequestContextMiddleware
from units_api.logs import AccessLog

UNIT_PATH = "/api/v2/units/0192a6f0-1d3e-7f5a-9b7c-8d9e0f1a2b3c"


class _Route:
    path_format = "/api/v2/units/{unit_id}"


_ROUTE = _Route()


async def _answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    scope["route"] = _ROUTE
    headers = [(b"content-type", b"application/json"), (b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


async def _send(message: Any) -> None:
    return None


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "method": "GET",
        "path": UNIT_PATH,
        "raw_path": UNIT_PATH.encode(),
        "query_string": b"",
        "headers": [(b"host", b"units.test"), (b"authorization", b"Bearer uak_x")],
        "client": ("127.0.0.1", 50000),
        "state": {"key_id": "0192a6f0-key"},
    }


async def _round(middleware: RequestContextMiddleware, requests: int) -> float:
    """Seconds a request, over `requests` in a row."""
    started = time.perf_counter()
    for _ in range(requests):
        await middleware(_scope(), _receive, _send)
    return (time.perf_counter() - started) / requests


async def measure(rounds: int, requests: int) -> dict[str, float]:
    configurations = {
        "both on": RequestContextMiddleware(_answer, log_requests=True, count_requests=True),
        "access log only": RequestContextMiddleware(_answer, True, count_requests=False),
        "metrics only": RequestContextMiddleware(_answer, False, count_requests=True),
        "both off": RequestContextMiddleware(_answer, False, count_requests=False),
    }
    best = dict.fromkeys(configurations, float("inf"))
    for _ in range(rounds):
        for name, middleware in configurations.items():
            best[name] = min(best[name], await _round(middleware, requests))
        await asyncio.sleep(0.02)  # the log's timer writes what waits
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--requests", type=int, default=4000, help="a round's requests")
    args = parser.parse_args()
    # A directory of its own, as `serve` gives its processes, removed at exit (never the
    # operator's, which `prepare_directory` would empty).
    os.environ.pop(metrics.MULTIPROCESS_DIR, None)
    metrics.prepare_directory()
    metrics.init()
    logging.getLogger(AccessLog.NAME).setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as directory, Path(directory, "log").open("w") as out:
        real_stderr, sys.stderr = sys.stderr, out
        try:
            best = asyncio.run(measure(args.rounds, args.requests))
        finally:
            sys.stderr = real_stderr
    base = best["both off"]
    print(f"middleware alone, best of {args.rounds} rounds of {args.requests:,} requests")
    print(f"{'configuration':<18}{'us a request':>14}{'over both off':>15}")
    for name, seconds in best.items():
        print(f"{name:<18}{seconds * 1e6:>14.2f}{(seconds - base) * 1e6:>15.2f}")


if __name__ == "__main__":
    main()
