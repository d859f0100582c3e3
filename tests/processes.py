"""The service's own processes, started by tests that cross processes: a server on a loopback
port, workers, and a deployment of both on a PostgreSQL database of its own."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import CLI, cli_admin_key, fresh_postgres, stop_server, wait_until_ready
from tests.test_cli import free_port
from units_api.migrate import upgrade

# A deployment's environment, its server's base URL and an admin key's headers.
Deployed = tuple[dict[str, str], str, dict[str, str]]


@contextmanager
def serving(env: dict[str, str], port: int, log: Path | None = None) -> Iterator[str]:
    """`units-api serve` on `port`, its output in `log` (or nowhere): its base URL once it
    answers; stopped on the way out."""
    process = start_serve(env, port, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base)
        yield base
    finally:
        stop_server(process)


def start_serve(env: dict[str, str], port: int, log: Path | None) -> subprocess.Popen[bytes]:
    """`units-api serve` on `port`, its output in `log` (appended; or nowhere), not waited for."""
    args = [*CLI, "serve", "--port", str(port)]
    if log is None:
        return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with log.open("ab") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=out)


@contextmanager
def deployment(tmp_path: Path, prefix: str, settings: dict[str, str]) -> Iterator[Deployed]:
    """A database of its own and a server that leaves background work to workers, with these
    settings too."""
    with fresh_postgres(prefix) as url:
        upgrade(url)
        env = {
            **os.environ,
            "UNITS_API_DATABASE_URL": url,
            "UNITS_API_ACCESS_LOG": "false",
            "UNITS_API_RUN_JOBS": "false",
            "UNITS_API_RATE_LIMIT": "100000/minute",
            **settings,
        }
        headers = {"Authorization": f"Bearer {cli_admin_key(env)}"}
        with serving(env, free_port(), tmp_path / "server.log") as base:
            yield env, base, headers


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([*CLI, "worker"], env=env, stdout=out, stderr=out)
