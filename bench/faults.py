"""Benchmark of recovery from database faults: how soon after PostgreSQL answers again the
service answers every request, without being restarted.

Makes a throwaway primary and streaming standby (`replica_pair.py`), seeds a few units and
starts one `units-api serve`. A few clients then send requests in turn (one unit's read, a
list, a create) as fast as they are answered, while the database fails:

- restart: the primary stopped as a restart stops it (`pg_ctl stop -m fast`), down for a
  moment, started again; the database answers again when `pg_ctl start -w` returns.
- failover: the server's URL names both hosts (`?target_session_attrs=read-write`); the
  primary is stopped (`-m immediate`) and the standby promoted; the database answers again
  when `pg_ctl promote -w` returns. A failover spends its pair, so each run makes a new one.

For each run: seconds from the database answering again to the first request that succeeds,
and to the start of the stretch in which every request succeeds (every one sent from then on
to the end of the run); the answers while it was away (503s, and any other error, which the
contract forbids). Each scenario runs RUNS times; the report gives the medians, and all of it
goes to `bench/results/faults.json`.

    make bench-faults
    make bench-faults FAULTS_ARGS="--runs 1 --clients 2"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from harness import RESULTS, free_port, server_env, wait_ready
from replica_pair import Pair, cluster_user, server_binaries

from units_api.http.json import dumps
from units_api.migrate import upgrade

UNITS = "/api/v2/units/"
# The server's bound on waiting for the database (seconds): UNITS_API_DB_UNAVAILABLE_SECONDS.
BOUND = 5.0
DOWN_SECONDS = 2.0
AFTER_SECONDS = 10.0
BEFORE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Answer:
    sent: float
    done: float
    status: int


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each scenario (3)")
    parser.add_argument("--clients", type=int, default=4, help="clients sending at once (4)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    bin_dir, user = server_binaries(), cluster_user()
    if bin_dir is None or user is None:
        raise SystemExit("PostgreSQL's server binaries (initdb, pg_basebackup) are needed")
    RESULTS.mkdir(exist_ok=True)
    report: dict[str, Any] = {"clients": args.clients, "bound_seconds": BOUND}
    pair = Pair(bin_dir, user)
    try:
        pair.create()
        upgrade(pair.primary_url)
        runs = [scenario(pair, pair.primary_url, restart, args) for _ in range(args.runs)]
    finally:
        pair.remove()
    report["restart"] = summary(runs)
    runs = []
    for _ in range(args.runs):
        pair = Pair(bin_dir, user)
        try:
            pair.create()
            upgrade(pair.primary_url)
            runs.append(scenario(pair, both_hosts(pair), failover, args))
        finally:
            pair.remove()
    report["failover"] = summary(runs)
    (RESULTS / "faults.json").write_text(json.dumps(report, indent=2))
    print_report(report)


def both_hosts(pair: Pair) -> str:
    return (
        f"postgresql://postgres@127.0.0.1:{pair.primary_port},127.0.0.1:{pair.standby_port}"
        "/postgres?target_session_attrs=read-write"
    )


def restart(pair: Pair) -> None:
    pair.run("pg_ctl", "-D", str(pair.primary_dir), "-m", "fast", "-w", "stop")
    time.sleep(DOWN_SECONDS)
    pair.start(pair.primary_dir)


def failover(pair: Pair) -> None:
    pair.stop(pair.primary_dir)
    time.sleep(DOWN_SECONDS)
    pair.run("pg_ctl", "-D", str(pair.standby_dir), "-w", "promote")


def scenario(
    pair: Pair, url: str, fault: Callable[[Pair], None], args: argparse.Namespace
) -> dict[str, Any]:
    """One run: a server on `url`, clients sending, `fault` made; the recovery's figures."""
    env = {
        **server_env(),
        "UNITS_API_DATABASE_URL": url,
        "UNITS_API_DB_UNAVAILABLE_SECONDS": str(BOUND),
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_RATE_LIMIT": "100000000/minute",
        "UNITS_API_FILES_DIR": str(pair.root / "files"),
    }
    env.pop("UNITS_API_REDIS_URL", None)
    command = [sys.executable, "-m", "units_api"]
    created = subprocess.run(
        [*command, "keys", "create", "--name", "bench", "--scope", "admin"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    key = created.stdout.splitlines()[0]
    port = free_port()
    log = RESULTS / "faults-server.log"
    with log.open("ab") as out:
        server = subprocess.Popen(
            [*command, "serve", "--port", str(port)], env=env, stdout=out, stderr=out
        )
    try:
        wait_ready(server, f"http://127.0.0.1:{port}/readyz", log)
        answers, back = asyncio.run(load(f"http://127.0.0.1:{port}", key, pair, fault, args))
    finally:
        server.terminate()
        server.wait(30)
    return recovery(answers, back)


async def load(
    base: str, key: str, pair: Pair, fault: Callable[[Pair], None], args: argparse.Namespace
) -> tuple[list[Answer], float]:
    """Clients sending until AFTER_SECONDS after the database answers again; every answer,
    and when it answered again."""
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
    timeout = httpx.Timeout(BOUND * 3)
    limits = httpx.Limits(max_connections=args.clients)
    async with httpx.AsyncClient(
        base_url=base, headers=headers, timeout=timeout, limits=limits
    ) as client:
        body = dumps({"name": "Fault Villa", "type": "villa", "city": "Cairo"})
        made = await client.post(UNITS, content=body)
        made.raise_for_status()
        unit = made.json()["id"]
        answers: list[Answer] = []
        stop = asyncio.Event()

        async def one_client(turn: int) -> None:
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    if turn % 3 == 0:
                        response = await client.get(f"{UNITS}{unit}")
                    elif turn % 3 == 1:
                        response = await client.get(UNITS, params={"limit": "10"})
                    else:
                        response = await client.post(UNITS, content=body)
                    status = response.status_code
                except httpx.TransportError:
                    status = 0
                answers.append(Answer(sent, time.monotonic(), status))
                turn += 1

        clients = [asyncio.create_task(one_client(turn)) for turn in range(args.clients)]
        await asyncio.sleep(BEFORE_SECONDS)
        await asyncio.to_thread(fault, pair)
        back = time.monotonic()
        await asyncio.sleep(AFTER_SECONDS)
        stop.set()
        await asyncio.gather(*clients)
    return answers, back


def recovery(answers: list[Answer], back: float) -> dict[str, Any]:
    """Seconds from `back` to the first success, and to the last failure's answer (every
    request sent after it succeeded); the answers by status while the database was away."""
    ok = [a for a in answers if 200 <= a.status < 300]
    first = min((a.done for a in ok if a.done >= back), default=None)
    failed_after = [a for a in answers if a.status not in range(200, 300) and a.sent >= back]
    last_failure = max((a.done for a in failed_after), default=back)
    return {
        "first_success_s": None if first is None else round(max(first - back, 0.0), 3),
        "all_succeed_s": round(last_failure - back, 3),
        "requests": len(answers),
        "statuses": dict(Counter(str(a.status) for a in answers)),
        "slowest_failure_s": round(
            max((a.done - a.sent for a in answers if a.status >= 500), default=0.0), 3
        ),
    }


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    firsts = [run["first_success_s"] for run in runs if run["first_success_s"] is not None]
    return {
        "median_first_success_s": statistics.median(firsts) if firsts else None,
        "median_all_succeed_s": statistics.median(run["all_succeed_s"] for run in runs),
        "runs": runs,
    }


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['clients']} clients; bound {report['bound_seconds']:g} s")
    print("| fault | first success (median) | all succeed (median) | runs | statuses |")
    print("|---|---|---|---|---|")
    for name in ("restart", "failover"):
        result = report[name]
        statuses: Counter[str] = Counter()
        for run in result["runs"]:
            statuses.update(run["statuses"])
        print(
            f"| {name} | {result['median_first_success_s']} s | "
            f"{result['median_all_succeed_s']} s | {len(result['runs'])} | "
            f"{dict(sorted(statuses.items()))} |"
        )


if __name__ == "__main__":
    main()
