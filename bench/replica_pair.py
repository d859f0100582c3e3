"""A throwaway PostgreSQL primary and its streaming standby, in a temporary directory on free
ports, run as the `postgres` user when the caller is root (PostgreSQL refuses to run as root).

`bench/replica.py` loads a server that reads from the standby while the primary takes writes,
and `tests/test_replicas.py` tests read replicas against such a pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]

POSTGRES_USER = "postgres"


def server_binaries() -> Path | None:
    """The newest PostgreSQL server binaries on this machine (Debian's layout, or PATH)."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    for candidate in reversed(versions):
        if (candidate / "initdb").exists() and (candidate / "pg_basebackup").exists():
            return candidate
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def cluster_user() -> str | None:
    """Who runs the clusters: `postgres` when the caller is root (PostgreSQL refuses to run
    as root), else the caller itself (""); None when root has no `postgres` user."""
    if os.geteuid() != 0:
        return ""
    try:
        pwd.getpwnam(POSTGRES_USER)
    except KeyError:
        return None
    return POSTGRES_USER


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Pair:
    """A primary and its streaming standby, stopped and removed by `remove`."""

    def __init__(self, bin_dir: Path, user: str) -> None:
        self.bin_dir = bin_dir
        self.user = user
        # Under /tmp when another user runs the clusters: it must reach the directory.
        where = "/tmp" if user else None
        self.root = Path(tempfile.mkdtemp(prefix="units-api-replicas-", dir=where))
        self.primary_dir = self.root / "primary"
        self.standby_dir = self.root / "standby"
        self.primary_port = _free_port()
        self.standby_port = _free_port()
        if user:
            shutil.chown(self.root, user)

    def url(self, port: int) -> str:
        return f"postgresql://postgres@127.0.0.1:{port}/postgres"

    @property
    def primary_url(self) -> str:
        return self.url(self.primary_port)

    @property
    def standby_url(self) -> str:
        return self.url(self.standby_port)

    def run(self, program: str, *args: str) -> None:
        command = [str(self.bin_dir / program), *args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120, cwd=self.root)

    def create(self, settings: Mapping[str, str] | None = None) -> None:
        """Make and start both; `settings` are added to (or override) the primary's
        postgresql.conf, which the standby copies."""
        self.run("initdb", "-D", str(self.primary_dir), "-A", "trust", "-U", POSTGRES_USER)
        conf_lines = {
            "port": str(self.primary_port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.root}'",
            "wal_level": "replica",
            "max_wal_senders": "4",
            "fsync": "off",
            "shared_buffers": "32MB",
            **(settings or {}),
        }
        with (self.primary_dir / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in conf_lines.items())
        with (self.primary_dir / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        self.start(self.primary_dir)
        self.run(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary_port),
            "-U",
            POSTGRES_USER,
            "-D",
            str(self.standby_dir),
            "-R",
        )
        with (self.standby_dir / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {self.standby_port}\n")
        self.start(self.standby_dir)

    def start(self, directory: Path) -> None:
        log = str(directory.parent / f"{directory.name}.log")
        self.run("pg_ctl", "-D", str(directory), "-l", log, "-w", "start")

    def stop(self, directory: Path) -> None:
        if (directory / "postmaster.pid").exists():
            self.run("pg_ctl", "-D", str(directory), "-m", "immediate", "-w", "stop")

    def standby_running(self) -> bool:
        return (self.standby_dir / "postmaster.pid").exists()

    def remove(self) -> None:
        for directory in (self.standby_dir, self.primary_dir):
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.stop(directory)
        shutil.rmtree(self.root, ignore_errors=True)


async def sql(url: str, statement: str) -> Any:
    """One value read by `statement` on a connection of its own."""
    conn = await asyncpg.connect(url, timeout=5)
    try:
        return await conn.fetchval(statement)
    finally:
        await conn.close()


async def caught_up(pair: Pair, seconds: float = 10) -> None:
    """Until the standby has replayed everything the primary has written."""
    target = await sql(pair.primary_url, "SELECT pg_current_wal_lsn()::text")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        replayed = await sql(
            pair.standby_url, f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
        )
        if replayed:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the standby did not catch up")
