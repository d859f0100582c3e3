"""What the benchmarks share: a fresh database, a real server, wrk, and memory readings."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sqlalchemy.engine import make_url

HERE = Path(__file__).parent
RESULTS = HERE / "results"
DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/units_bench"

# The machine the issues' targets were set on: one `units-api serve` process on 1,000,000 units,
# wrk at 32 connections, answered GET one unit 5,072/s and a create 1,492/s (a PATCH 1,769/s).
# The machine here is shared and its speed changes from day to day (the same GET from 1,873/s
# to 8,603/s), so a benchmark also measures GET one unit or a create in the same run and reads its
# figures against a target at that scale: requests/s times REFERENCE / measured, latencies
# divided by it.
REFERENCE = {"GET one unit": 5_072.0, "create": 1_492.0}


def scale_of(operation: str, measured_rps: float) -> float:
    """How much faster the targets' machine ran `operation` than this one, in this run."""
    return REFERENCE[operation] / measured_rps


async def recreate_database(url: str) -> None:
    parsed = make_url(url).set(drivername="postgresql")
    admin = parsed.set(database="postgres").render_as_string(hide_password=False)
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{parsed.database}"')
    finally:
        await conn.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env() -> dict[str, str]:
    """The environment a benchmark's server or worker starts with: the benchmarks' own settings
    (UNITS_API_BENCH_*) are theirs, and a server refuses names it does not know."""
    return {k: v for k, v in os.environ.items() if not k.startswith("UNITS_API_BENCH_")}


def start_server(
    url: str, port: int, workers: int, log: Path, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    env = {
        **server_env(),
        "UNITS_API_DATABASE_URL": url,
        "UNITS_API_AUTO_MIGRATE": "false",
        **(extra_env or {}),
    }
    command = [
        sys.executable,
        "-m",
        "units_api",
        "serve",
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    process = subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    wait_ready(process, f"http://127.0.0.1:{port}/readyz", log)
    return process


def wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Until `url` answers 200; the process is killed if it never does."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"{url} did not answer; see {log}")


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of the server and its children (workers)."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    total = 0
    for each in [pid, *(int(p) for p in children.stdout.split())]:
        status = Path(f"/proc/{each}/status").read_text()
        match = re.search(r"VmHWM:\s+(\d+)", status)
        total += int(match.group(1)) if match else 0
    return total / 1024


_TICK = os.sysconf("SC_CLK_TCK")


def _process_cpu(pid: int) -> float:
    """CPU seconds (user and system) a process has used; 0 if it is gone or unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def cpu_seconds(pid: int) -> float:
    """CPU seconds used by a server and its children (workers, job processes)."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return sum(_process_cpu(each) for each in [pid, *(int(p) for p in children.stdout.split())])


def postgres_cpu_seconds() -> float | None:
    """CPU seconds used by the local PostgreSQL's processes (None: none readable here)."""
    found = subprocess.run(["pgrep", "-x", "postgres"], capture_output=True, text=True)
    pids = [int(p) for p in found.stdout.split()]
    return sum(_process_cpu(pid) for pid in pids) if pids else None


def _seconds(text: str) -> float:
    match = re.match(r"([\d.]+)(us|ms|s|m)", text)
    assert match, text
    return float(match.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[match.group(2)]


def wrk_command(
    url: str,
    key: str,
    *,
    connections: int,
    duration: int,
    threads: int = 2,
    script: str | None = None,
    script_args: tuple[str, ...] = (),
    headers: tuple[str, ...] = (),
    timeout: str = "30s",
) -> list[str]:
    """The command line of one wrk run (its output is read by `read_wrk`); a request not
    answered within `timeout` is counted as a timeout (`read_wrk`'s "timeouts")."""
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration}s",
        "--latency",
        "--timeout",
        timeout,
        "-H",
        f"Authorization: Bearer {key}",
    ]
    for header in headers:
        command += ["-H", header]
    if script:
        command += ["-s", str(HERE / "lua" / script)]
    command.append(url)
    if script_args:
        command += ["--", *script_args]
    return command


def run_wrk(url: str, key: str, **options: Any) -> dict[str, float]:
    """One wrk run (the options of `wrk_command`), read by `read_wrk`."""
    command = wrk_command(url, key, **options)
    return read_wrk(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def read_wrk(output: str) -> dict[str, float]:
    """A wrk run's requests/s, p50 and p99 in ms, its count of requests, of non-2xx answers,
    of socket errors (connect, read, write, timeout), and of timeouts alone."""
    figures = {}
    for name, pattern in (
        ("rps", r"Requests/sec:\s+([\d.]+)"),
        ("p50_ms", r"\s50%\s+(\S+)"),
        ("p99_ms", r"\s99%\s+(\S+)"),
    ):
        match = re.search(pattern, output)
        assert match, output
        raw = match.group(1)
        figures[name] = float(raw) if name == "rps" else _seconds(raw) * 1000
    requests = re.search(r"(\d+) requests in", output)
    assert requests, output
    figures["requests"] = int(requests.group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    figures["non_2xx"] = int(errors.group(1)) if errors else 0
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    figures["socket_errors"] = sum(int(count) for count in sockets.groups()) if sockets else 0
    figures["timeouts"] = int(sockets.group(4)) if sockets else 0
    return figures
