"""Benchmark of the console's pages: server time under load, and load in a real browser.

Seeds N units into PostgreSQL (as bench/write.py does; `--reuse` keeps them), starts one
server, signs in, then:

1. Loads with wrk, 8 connections (eight people at work), each scenario in alternating runs
   beside its bare baseline, the API request the page is built on (same key, same run):
   - the units page, 20 rows, counts estimated, cycling through plain, filtered, sorted and
     searched (English and Arabic) lists; baseline: the same lists from the API;
   - one unit's page (the unit and its history); baseline: GET the unit from the API;
   and reads each page's server time from the access log (`durationMs`, p50 and p99 over
   the runs): wrk's latency adds the wait in the socket before the server takes a request.
   In the same runs, GET one unit at 32 connections measures the machine against the one
   the targets were set on (harness.REFERENCE); the server times are also given at that scale.
2. Opens each page in headless Chromium (the system's), English and Arabic, in a fresh
   browser context each time (nothing cached): DOMContentLoaded, bytes transferred (the
   page, its stylesheet and script; images not counted) and console errors; medians of 5.

    make bench-console                                  # 100,000 units
    make bench-console CONSOLE_ARGS="--units 1000000 --reuse \\
        --database-url postgresql://postgres@127.0.0.1:5432/units_bench_1m"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from harness import (
    DEFAULT_DATABASE,
    REFERENCE,
    RESULTS,
    free_port,
    recreate_database,
    run_wrk,
    scale_of,
    start_server,
)
from write import prepare

from units_api.console.units import LIST_FIELDS
from units_api.migrate import upgrade

LISTS = (
    "",
    "page=2",
    "city=Cairo",
    "sortBy=price",
    "status=published",
    "availability=available&maxPrice=5000000",
    "q=villa",
    f"q={quote('قاهرة')}",
    f"q={quote('حديقة')}&city=Cairo",
)
API_LIST = f"/api/v2/units/?limit=20&fields={LIST_FIELDS}"
API_FILTERS = {
    "": "",
    "page=2": "&page=2",
    "city=Cairo": "&p=" + quote('city=="Cairo"'),
    "sortBy=price": "&sortBy=price",
    "status=published": "&p=" + quote("status==published"),
    "availability=available&maxPrice=5000000": "&p="
    + quote('availability==available;price=le="5000000"'),
    "q=villa": "&q=villa",
    f"q={quote('قاهرة')}": f"&q={quote('قاهرة')}",
    f"q={quote('حديقة')}&city=Cairo": f"&q={quote('حديقة')}&p=" + quote('city=="Cairo"'),
}
MACHINE = "GET one unit, 32 connections"
BROWSER_PAGES = ("units", "unit", "edit", "bulk", "imports", "exports", "webhooks", "keys")
LOADS = 5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=100_000)
    parser.add_argument("--duration", type=int, default=10, help="seconds per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("UNITS_API_BENCH_DATABASE_URL", DEFAULT_DATABASE),
    )
    parser.add_argument("--reuse", action="store_true", help="keep an already seeded database")
    parser.add_argument("--no-browser", action="store_true", help="skip the browser part")
    return parser.parse_args()


def sign_in(base: str, key: str) -> str:
    """A console session's cookie header."""
    with httpx.Client(base_url=base) as client:
        form = client.get("/console/login")
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text)
        assert token, form.text
        answer = client.post(
            "/console/login", data={"key": key, "csrf": token.group(1), "next": "/console/units"}
        )
        assert answer.status_code == 303, answer.text
        return f"units_console={client.cookies['units_console']}"


def write_paths(name: str, paths: list[str]) -> str:
    file = RESULTS / f"console-{name}.txt"
    file.write_text("\n".join(paths) + "\n")
    return str(file)


def load(
    base: str, key: str, cookie: str, args: argparse.Namespace, ids: list[str]
) -> dict[str, Any]:
    unit_paths = write_paths("api-unit", [f"/api/v2/units/{i}" for i in ids[:2000]])
    scenarios = {
        "units page": (write_paths("units", [f"/console/units?{q}" for q in LISTS]), ()),
        "units from the API": (
            write_paths("api-units", [API_LIST + API_FILTERS[q] for q in LISTS]),
            ("Prefer: count=estimated",),
        ),
        "unit page": (write_paths("unit", [f"/console/units/{i}" for i in ids[:2000]]), ()),
        "unit from the API": (unit_paths, ()),
        MACHINE: (unit_paths, ()),  # the same requests at 32 connections
    }
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in scenarios}
    for _ in range(args.runs):
        for name, (paths, headers) in scenarios.items():
            figures = run_wrk(
                base,
                key,
                connections=32 if name == MACHINE else args.connections,
                duration=args.duration,
                threads=2,
                script="paths.lua",
                script_args=(paths,),
                headers=(f"Cookie: {cookie}", *headers),
            )
            assert figures["non_2xx"] == 0, (name, figures)
            runs[name].append(figures)
    return {
        name: {metric: statistics.median(run[metric] for run in done) for metric in done[0]}
        for name, done in runs.items()
    }


def browse(base: str, key: str, unit_id: str) -> dict[str, dict[str, float]]:
    """Each page, in each language, loaded LOADS times in fresh contexts."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("the browser part needs chromium (apt-get install chromium)")
    urls = {
        "units": "/console/units",
        "unit": f"/console/units/{unit_id}",
        "edit": f"/console/units/{unit_id}/edit",
        "bulk": "/console/bulk",
        "imports": "/console/imports",
        "exports": "/console/exports",
        "webhooks": "/console/webhooks",
        "keys": "/console/keys",
    }
    found: dict[str, dict[str, float]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        cookie = sign_in(base, key).split("=", 1)[1]
        for language in ("en", "ar"):
            for name in BROWSER_PAGES:
                loads = []
                for _ in range(LOADS):
                    context = browser.new_context()
                    context.add_cookies(
                        [
                            {"name": "units_console", "value": cookie, "url": f"{base}/console/"},
                            {
                                "name": "units_console_lang",
                                "value": language,
                                "url": f"{base}/console/",
                            },
                        ]
                    )
                    page = context.new_page()
                    errors: list[str] = []
                    page.on(
                        "console",
                        lambda m, errors=errors: (
                            errors.append(m.text) if m.type == "error" else None
                        ),
                    )
                    page.goto(f"{base}{urls[name]}", wait_until="load")
                    timing = page.evaluate(
                        """() => {
                          const nav = performance.getEntriesByType("navigation")[0];
                          const parts = performance.getEntriesByType("resource")
                            .filter((r) => r.initiatorType !== "img");
                          return {
                            dcl: nav.domContentLoadedEventEnd - nav.startTime,
                            bytes: nav.transferSize + parts.reduce((s, r) => s + r.transferSize, 0),
                          };
                        }"""
                    )
                    loads.append({**timing, "errors": len(errors)})
                    context.close()
                found[f"{name} ({language})"] = {
                    "dcl_ms": statistics.median(load["dcl"] for load in loads),
                    "kb": statistics.median(load["bytes"] for load in loads) / 1024,
                    "errors": max(load["errors"] for load in loads),
                }
        browser.close()
    return found


UNIT_PAGE = re.compile(r"/console/units/[0-9a-f-]{36}")


def server_times(log: Path) -> dict[str, dict[str, float]]:
    """Each page's own time in the server, from its access log lines (`durationMs`: from the
    request's arrival in the application to its answer's last part): p50 and p99 over every
    run, the browser's loads left out (they come after)."""
    found: dict[str, list[float]] = {"units page": [], "unit page": []}
    for line in log.read_text(errors="replace").splitlines():
        if '"durationMs"' not in line or '"/console/units' not in line:
            continue
        entry = json.loads(line)
        if entry["path"] == "/console/units":
            found["units page"].append(entry["durationMs"])
        elif UNIT_PAGE.fullmatch(entry["path"]):
            found["unit page"].append(entry["durationMs"])
    return {
        name: {
            "p50_ms": statistics.median(times),
            "p99_ms": statistics.quantiles(times, n=100)[98],
            "requests": len(times),
        }
        for name, times in found.items()
        if len(times) >= 100
    }


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    if not args.reuse:
        asyncio.run(recreate_database(args.database_url))
    upgrade(args.database_url)
    key, ids, _ = asyncio.run(prepare(args.database_url, args.units, args.reuse))
    RESULTS.mkdir(exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"UNITS_API_CONSOLE_SIGNIN_RATE": "1000/minute"}
    log = RESULTS / "console.log"
    server = start_server(args.database_url, port, args.workers, log, env)
    try:
        cookie = sign_in(base, key)
        report: dict[str, Any] = {"units": args.units, "load": load(base, key, cookie, args, ids)}
        report["server_time"] = server_times(log)
        if not args.no_browser:
            report["browser"] = browse(base, key, ids[0])
    finally:
        server.terminate()
        server.wait(timeout=30)
    (RESULTS / "console.json").write_text(json.dumps(report, indent=2))
    print(
        f"\nConsole pages, {args.units:,} units in PostgreSQL; {args.connections} connections; "
        f"median of {args.runs} x {args.duration} s; {args.workers} server process(es)"
    )
    print(f"{'scenario':<24}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for name, figures in report["load"].items():
        print(
            f"{name:<24}{figures['rps']:>9,.0f}{figures['p50_ms']:>9.2f}{figures['p99_ms']:>9.2f}"
        )
    for page, figures in report["server_time"].items():
        print(
            f"{page}, server time (access log, {figures['requests']:,} requests): "
            f"p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms"
        )
    scale = scale_of("GET one unit", report["load"][MACHINE]["rps"])
    print(
        f"this machine: GET one unit {report['load'][MACHINE]['rps']:,.0f}/s at 32 connections "
        f"against {REFERENCE['GET one unit']:,.0f} where the targets were set; server times at "
        f"that scale (divided by {scale:.2f}):"
    )
    for page, figures in report["server_time"].items():
        print(
            f"  {page}: p50 {figures['p50_ms'] / scale:.2f} ms, "
            f"p99 {figures['p99_ms'] / scale:.2f} ms"
        )
    for page, api in (("units page", "units from the API"), ("unit page", "unit from the API")):
        ratio = report["load"][page]["rps"] / report["load"][api]["rps"]
        print(f"{page} / its API request: {ratio:.2f}x the requests/s")
    if "browser" in report:
        print(f"\nIn Chromium, fresh context, median of {LOADS} loads (images not counted)")
        print(f"{'page':<20}{'DOMContentLoaded ms':>21}{'KB':>8}{'console errors':>16}")
        for name, figures in report["browser"].items():
            print(
                f"{name:<20}{figures['dcl_ms']:>21.0f}{figures['kb']:>8.1f}{figures['errors']:>16}"
            )


if __name__ == "__main__":
    main()
