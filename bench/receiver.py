"""A fast webhook receiver for benchmarks: answers 204 to every POST and remembers, per unit
and event type, the wall-clock time of the first delivery. GET /stats answers them.

    python bench/receiver.py PORT
"""

from __future__ import annotations

import sys
import time

import orjson
from aiohttp import web

first: dict[str, dict[str, float]] = {}
count = 0


async def receive(request: web.Request) -> web.Response:
    global count
    event = orjson.loads(await request.read())
    count += 1
    first.setdefault(event["type"], {}).setdefault(event["unitId"], time.time())
    return web.Response(status=204)


async def stats(_: web.Request) -> web.Response:
    return web.Response(body=orjson.dumps({"count": count, "first": first}))


async def reset(_: web.Request) -> web.Response:
    global count
    first.clear()
    count = 0
    return web.Response(status=204)


def main() -> None:
    app = web.Application()
    app.router.add_post("/hook", receive)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)


if __name__ == "__main__":
    main()
