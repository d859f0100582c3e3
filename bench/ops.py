"""Benchmark of what seeing inside the service costs: GET one unit on a server with request
metrics and the access log on (the defaults) beside the same server with both off, measured
in the same run.

Seeds N units into PostgreSQL (as bench/write.py does; `--reuse` keeps them); for each run
starts both servers afresh, warms each up for 2 s and loads each with wrk (both see the same
noise; each goes first in every other run), and prints the median requests/s, p50 and p99
of each, their ratio, the median of the runs' ratios, and CPU per request.

    make bench-ops                                 # 100,000 units, 5 runs x 10 s, 32 connections
    make bench-ops OPS_ARGS="--units 20000 --runs 3 --workers 2"
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
from typing import Any

from harness import (
    RESULTS,
    cpu_seconds,
    free_port,
    recreate_database,
    run_wrk,
    start_server,
)
from write import parse_args, prepare

from units_api.migrate import upgrade

QUIET = {"UNITS_API_ACCESS_LOG": "false", "UNITS_API_REQUEST_METRICS": "false"}
# Both servers without the dashboards' copy: its load at start, on threads of its own, is not
# what is measured and moved single runs by 10-20 %.
BOTH = {"UNITS_API_DASHBOARDS_COPY": "false"}
WARMUP = 2  # seconds of load a fresh server gets before it is measured


def main() -> None:
    args = parse_args(__doc__, runs=5)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    if not args.reuse:
        asyncio.run(recreate_database(args.database_url))
    upgrade(args.database_url)
    key, ids, _ = asyncio.run(prepare(args.database_url, args.units, args.reuse))
    RESULTS.mkdir(exist_ok=True)
    ids_file = RESULTS / "ids.txt"
    ids_file.write_text("\n".join(ids) + "\n")
    names = {"observed": BOTH, "quiet": {**BOTH, **QUIET}}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for run in range(args.runs):
        # Both servers started afresh for each run: a process keeps for its life what it drew
        # at its start (its cores, the layout of its memory and dicts), which moved one
        # server's figures against another's by 10-15 % for the whole of a run of pairs.
        servers = {}
        try:
            for name, extra in names.items():
                port = free_port()
                log = RESULTS / f"ops-{name}.log"
                servers[name] = (
                    port,
                    start_server(args.database_url, port, args.workers, log, extra),
                )
            # Each server goes first in every other run: neither gains from going first.
            ordered = list(servers.items())
            for name, (port, process) in ordered if run % 2 == 0 else ordered[::-1]:
                load = {
                    "connections": args.connections,
                    "threads": args.threads,
                    "script": "units.lua",
                    "script_args": ("get", str(ids_file)),
                }
                run_wrk(f"http://127.0.0.1:{port}", key, duration=WARMUP, **load)
                cpu = cpu_seconds(process.pid)
                figures = run_wrk(f"http://127.0.0.1:{port}", key, duration=args.duration, **load)
                figures["cpu_us"] = (
                    (cpu_seconds(process.pid) - cpu) / (figures["rps"] * args.duration) * 1e6
                )
                runs[name].append(figures)
        finally:
            for _, process in servers.values():
                process.terminate()
                process.wait(timeout=30)
    report: dict[str, Any] = {
        "units": args.units,
        "runs": args.runs,
        "duration_s": args.duration,
        "connections": args.connections,
        "workers": args.workers,
        **{
            name: {metric: statistics.median(run[metric] for run in done) for metric in done[0]}
            for name, done in runs.items()
        },
        "ratios": [
            observed["rps"] / quiet["rps"]
            for observed, quiet in zip(runs["observed"], runs["quiet"], strict=True)
        ],
    }
    (RESULTS / "ops.json").write_text(json.dumps(report, indent=2))
    print(
        f"\nGET one unit, {args.units:,} units in PostgreSQL; {args.connections} connections; "
        f"median of {args.runs} x {args.duration} s; {args.workers} server process(es)"
    )
    print(f"{'server':<40}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'CPU us':>9}")
    for name, label in (
        ("observed", "request metrics and access log on"),
        ("quiet", "both off"),
    ):
        figures = report[name]
        print(
            f"{label:<40}{figures['rps']:>9,.0f}{figures['p50_ms']:>9.2f}"
            f"{figures['p99_ms']:>9.2f}{figures['cpu_us']:>9.0f}"
        )
    ratios = ", ".join(f"{ratio:.3f}" for ratio in report["ratios"])
    print(
        f"on / off: {report['observed']['rps'] / report['quiet']['rps']:.3f} "
        f"(median rates), {statistics.median(report['ratios']):.3f} (median of the runs' "
        f"ratios); per run: {ratios}"
    )


if __name__ == "__main__":
    main()
