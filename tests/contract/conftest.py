"""A real server on a loopback port, on its own SQLite database, for the contract tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import served_sqlite


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The base URL of a started server with one unit, and its first admin key."""
    extra = {
        "UNITS_API_RATE_LIMIT": "1000000/minute",
        "UNITS_API_WEBHOOK_ALLOW_PRIVATE": "true",  # a webhook to a loopback port
    }
    with served_sqlite(tmp_path_factory.mktemp("served") / "units.db", extra) as (base, key):
        headers = {"Authorization": f"Bearer {key}"}
        httpx.post(f"{base}/api/v2/units/", headers=headers, json={"name": "a", "type": "b"})
        yield base, key
