"""A real server on a loopback port, on its own SQLite database, for the contract tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import wait_until_ready
from tests.test_cli import free_port


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The base URL of a started server with one unit, and its first admin key."""
    port = free_port()
    database = tmp_path_factory.mktemp("served") / "units.db"
    env = {
        **os.environ,
        "UNITS_API_DATABASE_URL": f"sqlite:///{database}",
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_RATE_LIMIT": "1000000/minute",
        "UNITS_API_WEBHOOK_ALLOW_PRIVATE": "true",  # a webhook to a loopback port
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "units_api", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=Path(__file__).parent,
    )
    assert process.stdout is not None
    process.stdout.readline()
    key = process.stdout.readline().strip()
    base = f"http://127.0.0.1:{port}"
    wait_until_ready(base)
    headers = {"Authorization": f"Bearer {key}"}
    httpx.post(f"{base}/api/v2/units/", headers=headers, json={"name": "a", "type": "b"})
    yield base, key
    process.terminate()
    process.wait(timeout=20)
