"""A Python client generated from the served document (openapi-python-client) works end to end.

The generator lives in its own environment (`make install` builds it), since its pins do not
fit the service's; the generated client runs there too, against a server on a loopback port.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import REQUIRE_SERVICES

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = Path(
    os.environ.get(
        "UNITS_API_TEST_CLIENT_GENERATOR",
        ROOT / ".venv" / "client-generator" / "bin" / "openapi-python-client",
    )
)

USE_THE_CLIENT = """
import json, sys, uuid
from units_client import AuthenticatedClient
from units_client.api.api_keys import list_api_keys
from units_client.api.operations import get_health
from units_client.api.units import (
    create_unit, get_unit, list_unit_history, list_units, patch_unit, run_unit_query,
)
from units_client.models import Problem, QueryRequest, UnitPatch, UnitRead, UnitWrite

client = AuthenticatedClient(base_url=sys.argv[1], token=sys.argv[2])
created = create_unit.sync_detailed(
    client=client, body=UnitWrite(name="Generated", type_="villa", price=1234567.89)
)
unit = created.parsed
assert isinstance(unit, UnitRead), created.content
fetched = get_unit.sync(client=client, id=uuid.UUID(unit.id))
assert isinstance(fetched, UnitRead), fetched
patched = patch_unit.sync(client=client, id=uuid.UUID(unit.id), body=UnitPatch(city="Cairo"))
page = list_units.sync(client=client, limit=5, sort_by="price, createdAt", order="asc")
history = list_unit_history.sync(client=client, id=uuid.UUID(unit.id), limit=1)
query = run_unit_query.sync(client=client, body=QueryRequest(filter_="city==Cairo", limit=1))
missing = get_unit.sync(client=client, id=uuid.uuid4())
print(json.dumps({
    "status": created.status_code,
    "location": created.headers["location"],
    "fetched": [fetched.id, fetched.name, fetched.type_, fetched.price, fetched.version],
    "patched": [patched.city, patched.version],
    "listed": [type(page).__name__, page.meta.limit],
    "history": [[entry.action for entry in history.data], history.next_cursor is not None],
    "queried": len(query.data),
    "missing": isinstance(missing, Problem) and missing.status,
    "keys": type(list_api_keys.sync(client=client)).__name__,
    "health": get_health.sync(client=client).status,
}))
"""


@pytest.fixture(scope="module")
def generator() -> Path:
    if not GENERATOR.exists():
        message = f"no client generator at {GENERATOR}: run make install"
        if REQUIRE_SERVICES:
            pytest.fail(message)
        pytest.skip(message)
    return GENERATOR


def test_a_generated_client_creates_reads_and_lists_units(
    generator: Path, served: tuple[str, str], tmp_path: Path
) -> None:
    base, key = served
    document = tmp_path / "openapi.json"
    document.write_bytes(httpx.get(f"{base}/openapi.json").content)
    config = tmp_path / "generator.yaml"
    config.write_text("post_hooks: []\n")
    package = tmp_path / "units_client"
    generated = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            str(document),
            "--output-path",
            str(package),
            "--meta",
            "none",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert "Warning" not in generated.stdout, generated.stdout
    script = tmp_path / "use_client.py"
    script.write_text(USE_THE_CLIENT)
    used = subprocess.run(
        [str(generator.parent / "python"), str(script), base, key],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert used.returncode == 0, used.stderr
    outcome = json.loads(used.stdout)
    unit_id = outcome["fetched"][0]
    assert outcome["status"] == 201 and outcome["location"] == f"/api/v2/units/{unit_id}/"
    assert outcome["fetched"][1:] == ["Generated", "villa", 1234567.89, 1]
    assert outcome["patched"] == ["Cairo", 2]
    assert outcome["listed"] == ["UnitPage", 5]
    assert outcome["history"] == [["patch"], True]
    assert outcome["queried"] == 1
    assert outcome["missing"] == 404
    assert outcome["keys"] == "ApiKeyPage"
    assert outcome["health"] == "ok"
    modules = {path.stem for path in (package / "api" / "units").glob("*.py")}
    assert {"create_unit", "get_unit", "list_units", "run_unit_query"} <= modules
