"""The `units-api` command, run as a real process, and a real server over the network."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import stop_server, wait_until_ready

CLI = [sys.executable, "-m", "units_api"]


def run_cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UNITS_API_DATABASE_URL": db_url}
    return subprocess.run(
        [*CLI, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/cli.db"


def test_keys_create_prints_the_secret_alone_first(db_url: str) -> None:
    assert run_cli(db_url, "migrate").returncode == 0
    result = run_cli(
        db_url,
        "keys",
        "create",
        "--name",
        "crm",
        "--scope",
        "units:read",
        "--scope",
        "units:write",
        "--expires-in",
        "30d",
        "--rate-limit",
        "600/minute",
    )
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert first.startswith("uak_") and " " not in first
    record = json.loads("\n".join(rest))
    assert record["scopes"] == ["units:read", "units:write"]
    assert record["rateLimit"] == "600/minute" and record["expiresAt"]
    listed = run_cli(db_url, "keys", "list")
    assert record["id"] in listed.stdout and first not in listed.stdout
    revoked = run_cli(db_url, "keys", "revoke", record["id"])
    assert revoked.returncode == 0
    listed = [json.loads(line) for line in run_cli(db_url, "keys", "list").stdout.splitlines()]
    assert listed[0]["revokedAt"] is not None


def test_keys_create_rejects_bad_input(db_url: str) -> None:
    run_cli(db_url, "migrate")
    bad_scope = run_cli(db_url, "keys", "create", "--name", "x", "--scope", "units:fly")
    assert bad_scope.returncode == 2 and "scopes" in bad_scope.stderr
    bad_expiry = run_cli(
        db_url, "keys", "create", "--name", "x", "--scope", "admin", "--expires-in", "soon"
    )
    assert bad_expiry.returncode == 2
    assert run_cli(db_url, "keys", "revoke", "nope").returncode == 2
    bad_policy = run_cli(
        db_url, "keys", "create", "--name", "x", "--scope", "units:read", "--policy", "colour==red"
    )
    assert bad_policy.returncode == 2 and "policy" in bad_policy.stderr


def test_keys_create_with_a_policy(db_url: str) -> None:
    run_cli(db_url, "migrate")
    result = run_cli(
        db_url,
        "keys",
        "create",
        "--name",
        "site",
        "--scope",
        "units:read",
        "--policy",
        "status==published",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads("\n".join(result.stdout.splitlines()[1:]))["policy"] == "status==published"


def test_seed_is_reproducible(tmp_path: Path) -> None:
    from units_api.sample_data import fake_units

    assert list(fake_units(5, 42)) == list(fake_units(5, 42))
    assert list(fake_units(5, 42)) != list(fake_units(5, 43))
    result = run_cli(f"sqlite:///{tmp_path}/seed.db", "seed", "--count", "25", "--seed", "7")
    assert result.returncode == 0, result.stderr
    assert "seeded 25 units" in result.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_first_start_prints_an_admin_key_that_works(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "UNITS_API_DATABASE_URL": f"sqlite:///{tmp_path}/first.db"}
    process = subprocess.Popen(
        [*CLI, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert "admin key" in banner
        key = process.stdout.readline().strip()
        assert key.startswith("uak_")
        base = f"http://127.0.0.1:{port}"
        wait_until_ready(base)
        headers = {"Authorization": f"Bearer {key}"}
        created = httpx.post(
            f"{base}/api/v2/units/",
            headers=headers,
            json={"name": "Real", "type": "villa", "price": 1234567.89},
        )
        assert created.status_code == 201
        assert b'"price":1234567.89' in created.content
        fetched = httpx.get(f"{base}{created.headers['location']}", headers=headers)
        assert fetched.status_code == 200 and fetched.json() == created.json()
    finally:
        stop_server(process)
    second = subprocess.run(
        [*CLI, "keys", "list"], env=env, capture_output=True, text=True, check=True
    )
    assert len(second.stdout.splitlines()) == 1  # only the bootstrap key


def test_export_then_import_round_trips_on_the_command_line(db_url: str, tmp_path: Path) -> None:
    assert run_cli(db_url, "seed", "--count", "40", "--seed", "5").returncode == 0
    out = tmp_path / "units.jsonl"
    exported = run_cli(db_url, "export", "--format", "jsonl", "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    assert "exported 40 units" in exported.stdout
    lines = out.read_text().splitlines()
    assert len(lines) == 40 and not (tmp_path / "units.jsonl.part").exists()

    again = run_cli(db_url, "import", str(out), "--mode", "upsert")
    assert again.returncode == 0, again.stderr
    assert "40 rows: 0 created, 0 updated, 40 unchanged, 0 failed" in again.stdout
    copy = tmp_path / "copy.csv"
    assert run_cli(db_url, "export", "--format", "csv", "-o", str(copy)).returncode == 0
    created = run_cli(db_url, "import", str(copy))
    assert created.returncode == 0, created.stderr
    assert "40 rows: 40 created, 0 updated, 0 unchanged, 0 failed" in created.stdout
    total = run_cli(db_url, "export", "--format", "jsonl", "--fields", "name", "-o", str(out))
    assert "exported 80 units" in total.stdout


def test_import_lists_failing_rows_and_exits_1(db_url: str, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"name": "Ok", "type": "villa"}\n{"type": "villa", "price": -1}\n')
    dry = run_cli(db_url, "import", str(rows), "--dry-run")
    assert dry.returncode == 1
    assert "2 rows: 1 valid (dry run: nothing written), 1 failed" in dry.stdout
    assert "would be 1 created, 0 updated, 0 unchanged" in dry.stdout
    assert "row 2: name: is required" in dry.stderr and "row 2: price:" in dry.stderr
    atomic = run_cli(db_url, "import", str(rows), "--atomic")
    assert atomic.returncode == 2 and "nothing was written" in atomic.stderr
    refused = run_cli(db_url, "export", "--format", "parquet", "--compression", "gzip")
    assert refused.returncode == 2 and "compression" in refused.stderr
