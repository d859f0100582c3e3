"""The console in a real browser: Debian's Chromium driven by Playwright, against
`units-api serve` on a loopback port (no browser is downloaded; `chromium` comes from the
system's packages)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REQUIRE_SERVICES, served_sqlite

CHROMIUM_PATHS = ("chromium", "chromium-browser", "/usr/bin/chromium")


def chromium_path() -> str | None:
    for name in (os.environ.get("UNITS_API_TEST_CHROMIUM"), *CHROMIUM_PATHS):
        if name and (found := shutil.which(name)):
            return found
    return None


@dataclass
class Console:
    base: str
    admin_key: str
    http: httpx.Client

    def create_unit(self, **fields: Any) -> dict[str, Any]:
        body = {"name": "Browser Villa", "type": "villa", **fields}
        answer = self.http.post("/api/v2/units/", json=body)
        assert answer.status_code == 201, answer.text
        created: dict[str, Any] = answer.json()
        return created

    def create_key(self, *scopes: str) -> str:
        answer = self.http.post("/api/v2/api-keys", json={"name": "browser", "scopes": scopes})
        assert answer.status_code == 201, answer.text
        secret: str = answer.json()["key"]
        return secret

    def unit(self, unit_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.http.get(f"/api/v2/units/{unit_id}").json()
        return found


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    folder = tmp_path_factory.mktemp("console")
    env = {
        "UNITS_API_FILES_DIR": str(folder / "files"),
        "UNITS_API_CONSOLE_SIGNIN_RATE": "1000/minute",
        "UNITS_API_JOBS_INTERVAL_SECONDS": "0.2",
        "UNITS_API_JOB_POLL_SECONDS": "0.2",
    }
    with served_sqlite(Path(folder) / "units.db", env) as (base, key):
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            yield Console(base, key, http)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        reason = "no Chromium installed (apt-get install chromium); browser tests not run"
        if REQUIRE_SERVICES:
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])
        yield launched
        launched.close()
