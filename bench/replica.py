"""Benchmark of a read replica under writes: lists and searches read from a streaming standby
while the primary takes creates at a fixed rate, then the standby stopped under the same load.

Makes a throwaway primary and standby (`replica_pair.py`; fsync on, as PostgreSQL's default), seeds
N units on the primary, waits until the standby has replayed them, and starts one
`units-api serve` with the standby as its replica. Two wrk runs go at once: creates POSTed at a
fixed rate (`lua/paced.lua`) and lists read in turn from a few list and search paths
(`lua/paths.lua`) as fast as their connections allow. After a warm-up, the first phase lasts D
seconds with the standby up; in the second the standby is stopped (`pg_ctl stop -m immediate`)
a few seconds in, and both loads go on. The server's reads by database
(`units_api_database_reads_total` in /metrics) say which database served the lists: read at
the start and end of the first phase, and every 0.1 s in the second, for how soon after the
stop the primary served them; the server's log says when it left the replica.

    make bench-replica                    # 20,000 units, 20 s up, then 10 s with the stop
    make bench-replica REPLICA_ARGS="--units 3000 --duration 5 --stopped 5"
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import time
from asyncio.subprocess import PIPE, Process
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlencode

import asyncpg
import httpx
from find import SCENARIOS
from harness import (
    REFERENCE,
    RESULTS,
    cpu_seconds,
    free_port,
    read_wrk,
    scale_of,
    start_server,
    wrk_command,
)
from replica_pair import Pair, caught_up, cluster_user, server_binaries
from write import prepare

from units_api.config import Settings
from units_api.http.json import dumps
from units_api.migrate import upgrade
from units_api.replicas import CHECK_SECONDS
from units_api.sample_data import fake_unit

PRIMARY, REPLICA = "primary", "replica-1"
# What the server logs when it leaves a replica for the primary (replicas.py).
LEFT = ("read replica unreachable, reads go to the primary", "read replica skipped")
SAMPLE_SECONDS = 0.1
# Seconds a paced list connection may wait between requests: under uvicorn's keep-alive (5 s).
KEEP_ALIVE_SECONDS = 4
# The target: lists from the replica while the primary takes this many creates/s, on the
# machine the targets were set on; CALIBRATE_SECONDS of creates alone say what that is here.
TARGET_RATE = 1_000
CALIBRATE_SECONDS = 10
# PostgreSQL's own defaults where the pair's (made for tests) differ: commits are flushed.
PAIR_SETTINGS = {"fsync": "on", "shared_buffers": "128MB"}
LISTED = ("default list", "filtered list", "search English", "search Arabic", "map near")
READS = re.compile(r'units_api_database_reads_total\{database="([^"]+)"\} (\S+)')
# Seconds the standby is behind in replaying what it has received (0 when nothing is left).
REPLAY_LAG = (
    "SELECT CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0"
    " ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END"
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--units", type=int, default=20_000, help="units seeded")
    parser.add_argument("--duration", type=int, default=20, help="seconds with the standby up")
    parser.add_argument(
        "--stopped", type=int, default=10, help="seconds of the phase the standby is stopped in"
    )
    parser.add_argument(
        "--stop-after", type=float, default=2.0, help="seconds into that phase it is stopped"
    )
    parser.add_argument(
        "--warmup", type=int, default=2, help="seconds of both loads before measuring"
    )
    parser.add_argument(
        "--rate",
        type=int,
        default=None,
        help="creates/s asked of the primary; by default TARGET_RATE at the scale of the machine "
        "the targets were set on, from creates alone measured first (harness.REFERENCE)",
    )
    parser.add_argument("--create-connections", type=int, default=32)
    parser.add_argument("--list-connections", type=int, default=8)
    parser.add_argument(
        "--list-rate",
        type=float,
        default=None,
        help="lists/s, paced as the creates are (a website's browsing at a steady rate); by "
        "default as fast as their connections allow",
    )
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    parser.add_argument(
        "--max-lag",
        type=float,
        default=Settings.model_fields["replica_max_lag_seconds"].default,
        help="the server's UNITS_API_REPLICA_MAX_LAG_SECONDS",
    )
    return parser.parse_args()


@dataclass(frozen=True)
class Load:
    """The two wrk runs of a phase: creates at a fixed rate, and lists as fast as they go
    (or at `--list-rate`)."""

    base: str
    key: str
    args: argparse.Namespace
    unit_file: Path
    paths_file: Path

    def creates(self, seconds: int, rate: int | None = None) -> list[str]:
        """Creates at `rate` per second (the one asked by default)."""
        return wrk_command(
            self.base,
            self.key,
            connections=self.args.create_connections,
            duration=seconds,
            threads=1,  # paced.lua's rate is per thread
            script="paced.lua",
            script_args=("/api/v2/units/", str(self.unit_file), str(rate or self.args.rate)),
        )

    @property
    def list_connections(self) -> int:
        """At a list rate, no more connections than keep each one sending at least every
        KEEP_ALIVE_SECONDS: the server closes a connection left idle longer (wrk would count
        the close as an error)."""
        rate = self.args.list_rate
        if rate is None:
            return self.args.list_connections
        return max(1, min(self.args.list_connections, int(rate * KEEP_ALIVE_SECONDS)))

    def lists(self, seconds: int) -> list[str]:
        return wrk_command(
            self.base,
            self.key,
            connections=self.list_connections,
            duration=seconds,
            threads=1,
            script="paths.lua",
            script_args=(
                str(self.paths_file),
                *(() if self.args.list_rate is None else (str(self.args.list_rate),)),
            ),
        )


class Sample(NamedTuple):
    """The server's reads by database, asked for at `sent` and answered at `received`
    (seconds from the phase's start): the counts of a moment between the two."""

    sent: float
    received: float
    counts: dict[str, float]


@dataclass
class Phase:
    """What one phase's sampling saw: reads by database, the standby's replay lag, and when
    the standby's stop began and ended (seconds from the phase's start; the beginning also on
    the wall clock, as the server's log writes it)."""

    samples: list[Sample] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    stop_began: float | None = None
    stop_ended: float | None = None
    stop_wall: float | None = None


def main() -> None:
    args = parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    bin_dir, user = server_binaries(), cluster_user()
    if bin_dir is None or user is None:
        raise SystemExit("PostgreSQL's server binaries (initdb, pg_basebackup) are needed")
    RESULTS.mkdir(exist_ok=True)
    pair = Pair(bin_dir, user)
    try:
        pair.create(PAIR_SETTINGS)
        upgrade(pair.primary_url)
        key, _, seed_rate = asyncio.run(prepare(pair.primary_url, args.units, reuse=False))
        asyncio.run(caught_up(pair, seconds=300))
        report = measure(args, pair, key)
    finally:
        pair.remove()
    report["seed_units_per_s"] = seed_rate
    (RESULTS / "replica.json").write_text(json.dumps(report, indent=2))
    print_report(report)


def measure(args: argparse.Namespace, pair: Pair, key: str) -> dict[str, Any]:
    """Both phases against one server reading from the pair's standby."""
    port = free_port()
    extra = {
        "UNITS_API_DATABASE_REPLICA_URLS": pair.standby_url,
        "UNITS_API_REPLICA_MAX_LAG_SECONDS": str(args.max_lag),
    }
    log = RESULTS / "replica-server.log"
    server = start_server(pair.primary_url, port, args.workers, log, extra)
    base = f"http://127.0.0.1:{port}"
    load = Load(base, key, args, *write_inputs())
    try:
        alone = calibrate(load) if args.rate is None else None
        if alone is not None:
            args.rate = round(TARGET_RATE / scale_of("create", alone["rps"]))
        if args.warmup:
            asyncio.run(run_phase(load, args.warmup, pair, server.pid, stop_at=None))
        up = asyncio.run(run_phase(load, args.duration, pair, server.pid, stop_at=None))
        stopped = asyncio.run(
            run_phase(load, args.stopped, pair, server.pid, stop_at=args.stop_after)
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    stopped["left_replica"] = left_after(log, stopped.pop("stop_wall"))
    return {
        "units": args.units,
        "rate_asked": args.rate,
        "creates_alone": alone,
        "create_connections": args.create_connections,
        "list_connections": load.list_connections,
        "list_rate_asked": args.list_rate,
        "workers": args.workers,
        "max_lag_s": args.max_lag,
        "check_s": CHECK_SECONDS,
        "list_paths": list_paths(),
        "up": {"seconds": args.duration, **up},
        "stopped": {"seconds": args.stopped, "stop_after_s": args.stop_after, **stopped},
    }


def calibrate(load: Load) -> dict[str, float]:
    """Creates alone, as fast as they go (no lists, the standby up and replaying), measured
    against the machine the targets were set on."""
    command = load.creates(CALIBRATE_SECONDS, rate=1_000_000)  # slots never wait
    figures = read_wrk(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    assert figures["non_2xx"] == 0 and figures["socket_errors"] == 0, figures
    return figures


def list_paths() -> list[str]:
    """The list and search paths read in turn: some of bench-find's scenarios."""
    queries = (urlencode(SCENARIOS[name]["params"]) for name in LISTED)
    return [f"/api/v2/units/?{query}" if query else "/api/v2/units/" for query in queries]


def write_inputs() -> tuple[Path, Path]:
    """The unit every create POSTs, and the list paths, as files for wrk's scripts."""
    unit_file = RESULTS / "replica-unit.json"
    unit_file.write_bytes(dumps(fake_unit(random.Random(7))))
    paths_file = RESULTS / "replica-paths.txt"
    paths_file.write_text("\n".join(list_paths()) + "\n")
    return unit_file, paths_file


async def run_phase(
    load: Load, seconds: int, pair: Pair, server: int, stop_at: float | None
) -> dict[str, Any]:
    """Both loads for `seconds`. With the standby up, the server's reads by database are read
    at the start and the end (a scrape costs the server CPU) and the standby's replay lag every
    SAMPLE_SECONDS; with `stop_at`, the standby is stopped that many seconds in and the reads
    are read every SAMPLE_SECONDS. Also the server's CPU (cores it kept busy)."""
    wrks = [
        await asyncio.create_subprocess_exec(*command, stdout=PIPE, stderr=PIPE)
        for command in (load.creates(seconds), load.lists(seconds))
    ]
    phase = Phase()
    started, cpu = time.monotonic(), cpu_seconds(server)
    clusters = {name: cluster_cpu(pair, name) for name in CLUSTERS} if stop_at is None else {}
    children = children_cpu()
    lag_conn = await asyncpg.connect(pair.standby_url) if stop_at is None else None
    stopping: asyncio.Task[None] | None = None
    async with httpx.AsyncClient(base_url=load.base, timeout=10) as client:
        phase.samples.append(await sample(client, started))
        while any(wrk.returncode is None for wrk in wrks):
            if lag_conn is not None:
                phase.lags.append(float(await lag_conn.fetchval(REPLAY_LAG)))
            else:
                phase.samples.append(await sample(client, started))
            if stop_at is not None and stopping is None and elapsed(started) >= stop_at:
                stopping = asyncio.create_task(stop_standby(pair, phase, started))
            await asyncio.sleep(SAMPLE_SECONDS)
        phase.samples.append(await sample(client, started))
    if lag_conn is not None:
        await lag_conn.close()
    if stopping is not None:
        await stopping
    took = elapsed(started)
    cores = (cpu_seconds(server) - cpu) / took
    used = {name: (cluster_cpu(pair, name) - cpu) / took for name, cpu in clusters.items()}
    creates, lists = [await finished(wrk) for wrk in wrks]
    if used:  # the wrk processes have been waited for: their CPU is the children's now
        used["wrk"] = (children_cpu() - children) / took
    return {
        "creates": creates,
        "lists": lists,
        "server_cores": cores,
        **({"cores": {"server": cores, **used}} if used else {}),
        **summarise(phase),
    }


CLUSTERS = ("primary", "standby")


def cluster_cpu(pair: Pair, name: str) -> float:
    """CPU seconds used so far by one of the pair's PostgreSQL servers (the postmaster and its
    backends, WAL sender and receiver, startup process replaying)."""
    directory = pair.primary_dir if name == "primary" else pair.standby_dir
    try:
        postmaster = int((directory / "postmaster.pid").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0
    return cpu_seconds(postmaster)


def children_cpu() -> float:
    """CPU seconds of this process's children that have ended and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def elapsed(started: float) -> float:
    return time.monotonic() - started


async def sample(client: httpx.AsyncClient, started: float) -> Sample:
    """Reads served so far by each database, as /metrics counts them."""
    sent = elapsed(started)
    text = (await client.get("/metrics")).text
    counts = {name: float(value) for name, value in READS.findall(text)}
    return Sample(sent, elapsed(started), counts)


async def stop_standby(pair: Pair, phase: Phase, started: float) -> None:
    phase.stop_began, phase.stop_wall = elapsed(started), time.time()
    await asyncio.to_thread(pair.stop, pair.standby_dir)
    phase.stop_ended = elapsed(started)


async def finished(wrk: Process) -> dict[str, float]:
    output, errors = await wrk.communicate()
    if wrk.returncode != 0:
        raise SystemExit(f"wrk failed: {errors.decode()}")
    figures = read_wrk(output.decode())
    figures["errors"] = figures["non_2xx"] + figures["socket_errors"]
    return figures


def summarise(phase: Phase) -> dict[str, Any]:
    """Reads by database over the phase (and the replica's share), the replay lag seen, and
    for a stop: how soon the primary served lists, and whether the replica served any after."""
    first, last = phase.samples[0].counts, phase.samples[-1].counts
    served = {name: last[name] - first.get(name, 0.0) for name in last}
    total = sum(served.values())
    summary: dict[str, Any] = {
        "reads": served,
        "replica_share": served.get(REPLICA, 0.0) / total if total else None,
    }
    if phase.lags:
        summary["replay_lag_s"] = {
            "median": statistics.median(phase.lags),
            "max": max(phase.lags),
        }
    if phase.stop_began is not None and phase.stop_ended is not None:
        summary.update(after_stop(phase.samples, phase.stop_began, phase.stop_ended))
        summary["stop_wall"] = phase.stop_wall
    return summary


def after_stop(samples: list[Sample], began: float, ended: float) -> dict[str, Any]:
    """Seconds from the stop's beginning to the first sample showing a read by the primary
    (a bound from above: when that sample came back), and the replica's reads counted in
    samples asked for once the standby was down."""
    before = next(s.counts for s in reversed(samples) if s.received <= began)
    primary_at = next(
        (
            s.received - began
            for s in samples
            if s.counts.get(PRIMARY, 0.0) > before.get(PRIMARY, 0.0)
        ),
        None,
    )
    down = [s.counts.get(REPLICA, 0.0) for s in samples if s.sent >= ended]
    gaps = [later.received - earlier.received for earlier, later in itertools.pairwise(samples)]
    return {
        "stop_began_s": began,
        "stop_took_s": ended - began,
        "primary_served_within_s": primary_at,
        "replica_reads_once_down": down[-1] - down[0] if down else 0.0,
        "sampled_every_s": statistics.median(gaps),
        "timeline": [
            [round(s.received, 2), s.counts.get(PRIMARY, 0.0), s.counts.get(REPLICA, 0.0)]
            for s in samples
        ],
    }


def left_after(log: Path, began: float) -> dict[str, Any] | None:
    """When, after `began` (the wall clock), the server's log first says it left the replica
    for the primary: a read found it unreachable, or a check found it down or behind."""
    with log.open() as lines:
        for line in lines:
            if '"units_api.replicas"' not in line:
                continue
            entry = json.loads(line)
            at = datetime.fromisoformat(entry["time"]).timestamp()
            if entry["message"] in LEFT and at >= began:
                return {"after_s": at - began, "message": entry["message"]}
    return None


def print_report(report: dict[str, Any]) -> None:
    print(
        f"\nLists on a read replica while the primary takes creates "
        f"({report['rate_asked']:,}/s asked): {report['units']:,} units seeded; "
        f"{report['workers']} server process(es); creates on {report['create_connections']} "
        f"connections, lists on {report['list_connections']}"
        + ("" if report["list_rate_asked"] is None else f" at {report['list_rate_asked']:g}/s")
    )
    if report["seed_units_per_s"]:
        print(f"seeding: {report['seed_units_per_s']:,.0f} units/s")
    alone = report["creates_alone"]
    if alone is not None:
        scale = scale_of("create", alone["rps"])
        print(
            f"creates alone: {alone['rps']:,.0f}/s (p99 {alone['p99_ms']:.1f} ms) against "
            f"{REFERENCE['create']:,.0f} where the targets were set: {TARGET_RATE:,}/s there is "
            f"{report['rate_asked']:,}/s here (scale {scale:.2f})"
        )
    print(
        f"{'phase':<24}{'creates/s':>10}{'p99 ms':>8}{'errors':>8}"
        f"{'lists/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'errors':>8}{'on replica':>12}{'server':>8}"
    )
    stopped = report["stopped"]
    for name, label in (
        ("up", f"standby up, {report['up']['seconds']} s"),
        ("stopped", f"stopped at {stopped['stop_began_s']:.1f} s of {stopped['seconds']} s"),
    ):
        phase = report[name]
        creates, lists = phase["creates"], phase["lists"]
        share = phase["replica_share"]
        shown = f"{share * 100:.1f} %" if share is not None else "-"
        print(
            f"{label:<24}{creates['rps']:>10,.0f}{creates['p99_ms']:>8.1f}"
            f"{creates['errors']:>8,.0f}{lists['rps']:>9,.0f}{lists['p50_ms']:>8.1f}"
            f"{lists['p99_ms']:>8.1f}{lists['errors']:>8,.0f}{shown:>12}"
            f"{phase['server_cores']:>8.2f}"
        )
    print(
        "errors: non-2xx answers and socket errors; on replica: its share of the list reads; "
        "server: the cores its process(es) kept busy"
    )
    cores = report["up"].get("cores")
    if cores:
        print(
            "cores kept busy with the standby up: "
            + ", ".join(f"{name} {value:.2f}" for name, value in cores.items())
            + f" (in all {sum(cores.values()):.2f} of {os.cpu_count()})"
        )
    lag = report["up"].get("replay_lag_s")
    if lag:
        print(f"standby's replay lag while up: median {lag['median']:.3f}, max {lag['max']:.3f} s")
    left = stopped["left_replica"]
    print(
        f"standby stopped {stopped['stop_began_s']:.1f} s into the phase (pg_ctl -m immediate, "
        f"{stopped['stop_took_s']:.2f} s); replicas checked every {report['check_s']:g} s, "
        f"lag limit {report['max_lag_s']:g} s"
    )
    if left is not None:
        print(f"  the server left the replica {left['after_s']:.2f} s after: {left['message']!r}")
    within = stopped["primary_served_within_s"]
    print(
        f"  lists served by the primary within "
        f"{'-' if within is None else f'{within:.2f}'} s of the stop (/metrics, sampled every "
        f"{stopped['sampled_every_s']:.2f} s); by the replica once it was down: "
        f"{stopped['replica_reads_once_down']:,.0f}"
    )


if __name__ == "__main__":
    main()
