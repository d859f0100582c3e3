"""Throwaway PostgreSQL clusters for tests that need a database they may stop, freeze or fail
over: a primary and its streaming standby (`bench/replica_pair.py`) in a temporary directory
on free ports, and the faults made on them for real (signals, `pg_ctl`)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from bench.replica_pair import Pair, cluster_user, server_binaries

from tests.conftest import PG_URL
from units_api.migrate import upgrade


@contextmanager
def throwaway_pair() -> Iterator[Pair]:
    """A migrated primary with its standby, removed on the way out. Without PostgreSQL's
    server binaries the test is skipped, or fails when the suite runs on PostgreSQL."""
    bin_dir, user = server_binaries(), cluster_user()
    if bin_dir is None or user is None:
        message = "these tests need PostgreSQL's server binaries (initdb, pg_basebackup)"
        if PG_URL:
            pytest.fail(message)
        pytest.skip(message)
    made = Pair(bin_dir, user)
    try:
        made.create()
        upgrade(made.primary_url)
        yield made
    finally:
        made.remove()


def cluster_processes(directory: Path) -> list[int]:
    """The postmaster of the cluster in `directory` and every process it started."""
    postmaster = int((directory / "postmaster.pid").read_text().split()[0])
    children = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _parent(entry) == postmaster
    ]
    return [postmaster, *children]


def _parent(entry: Path) -> int | None:
    try:
        fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1])


@contextmanager
def frozen(directory: Path) -> Iterator[None]:
    """The cluster in `directory` stopped dead (SIGSTOP to the postmaster and its backends):
    it takes connections into its backlog and answers nothing; SIGCONT on the way out."""
    processes = cluster_processes(directory)
    for pid in processes:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in processes:
            os.kill(pid, signal.SIGCONT)


def stop_fast(pair: Pair, directory: Path) -> None:
    """Stop the cluster as a restart does: sessions ended, then shut down."""
    pair.run("pg_ctl", "-D", str(directory), "-m", "fast", "-w", "stop")


def promote(pair: Pair) -> None:
    """Make the standby a primary."""
    pair.run("pg_ctl", "-D", str(pair.standby_dir), "-w", "promote")
