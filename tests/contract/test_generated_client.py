"""A Python client generated from the served document (openapi-python-client) works end to end.

The generator lives in its own environment (`make install` builds it), since its pins do not
fit the service's; the generated client runs there too, against a server on a loopback port.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REQUIRE_SERVICES
from tests.test_cli import free_port

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


@pytest.fixture(scope="module")
def generated(
    generator: Path, served: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The directory holding `units_client`, generated from the served document."""
    base, _ = served
    directory = tmp_path_factory.mktemp("client")
    document = directory / "openapi.json"
    document.write_bytes(httpx.get(f"{base}/openapi.json").content)
    config = directory / "generator.yaml"
    config.write_text("post_hooks: []\n")
    generated = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            str(document),
            "--output-path",
            str(directory / "units_client"),
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
    return directory


def _use(generator: Path, directory: Path, script: str, *args: str) -> dict[str, Any]:
    """Run `script` with the generated client; what it prints, as JSON."""
    path = directory / "use_client.py"
    path.write_text(script)
    used = subprocess.run(
        [str(generator.parent / "python"), str(path), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=directory,
    )
    assert used.returncode == 0, used.stderr
    outcome: dict[str, Any] = json.loads(used.stdout)
    return outcome


def test_a_generated_client_creates_reads_and_lists_units(
    generator: Path, served: tuple[str, str], generated: Path
) -> None:
    base, key = served
    package = generated / "units_client"
    outcome = _use(generator, generated, USE_THE_CLIENT, base, key)
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


USE_FILES_AND_DELIVERIES = """
import hashlib, io, json, sys, time, uuid
from units_client import AuthenticatedClient
from units_client.api.exports import create_export, download_export, get_export
from units_client.api.imports import create_import
from units_client.api.units import list_units, run_unit_query
from units_client.api.webhooks import (
    create_webhook, list_webhook_deliveries, list_webhook_delivery_attempts, test_webhook,
)
from units_client.models import (
    CreateImportBody, CreateImportBodyFormat, DeliveryAttempts, ExportCreate,
    ExportCreateCompression, ExportCreateFormat, Job, JobStatus,
    ListWebhookDeliveriesEventType, ListWebhookDeliveriesStatus, QueryRequest, UnitListed,
    WebhookCreate,
)
from units_client.types import File

client = AuthenticatedClient(base_url=sys.argv[1], token=sys.argv[2], timeout=60)
dead_url = sys.argv[3]

downloads = {}
for fmt, compression in (
    ("csv", "none"), ("jsonl", "none"), ("xlsx", "none"), ("parquet", "none"),
    ("csv", "gzip"), ("jsonl", "gzip"),
):
    job = create_export.sync(client=client, body=ExportCreate(
        format_=ExportCreateFormat(fmt), compression=ExportCreateCompression(compression),
    ))
    assert isinstance(job, Job), job
    deadline = time.monotonic() + 60
    while job.status in (JobStatus.QUEUED, JobStatus.RUNNING):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
        job = get_export.sync(client=client, id=uuid.UUID(job.id))
    assert job.status == JobStatus.SUCCEEDED, job
    file = download_export.sync(client=client, id=uuid.UUID(job.id))
    assert isinstance(file, File), file
    payload = file.payload.read()
    downloads[f"{fmt}/{compression}"] = [job.id, hashlib.sha256(payload).hexdigest()]

page = list_units.sync(client=client, limit=3)
projected = list_units.sync(client=client, limit=3, fields="name")
queried = run_unit_query.sync(client=client, body=QueryRequest(limit=2))

upload = File(
    payload=io.BytesIO(b'{"name": "Imported", "type": "villa"}\\n'),
    file_name="units.jsonl",
    mime_type="application/x-ndjson",
)
started = create_import.sync(
    client=client, body=CreateImportBody(file=upload, format_=CreateImportBodyFormat.JSONL)
)

hook = create_webhook.sync(client=client, body=WebhookCreate(url=dead_url, event_types=["*"]))
ping = test_webhook.sync(client=client, id=uuid.UUID(hook.id))
log = list_webhook_deliveries.sync(
    client=client,
    id=uuid.UUID(hook.id),
    status=ListWebhookDeliveriesStatus.FAILED,
    event_type=ListWebhookDeliveriesEventType.WEBHOOK_TEST,
)
attempts = list_webhook_delivery_attempts.sync(
    client=client, id=uuid.UUID(hook.id), delivery_id=uuid.UUID(log.data[0].id)
)
assert isinstance(attempts, DeliveryAttempts), attempts

print(json.dumps({
    "downloads": downloads,
    "listed": [type(item).__name__ for item in page.data],
    "listedIds": [item.id for item in page.data if isinstance(item, UnitListed)],
    "projected": [type(item).__name__ for item in projected.data],
    "queried": [type(item).__name__ for item in queried.data],
    "import": [type(started).__name__, started.kind, started.status.value],
    "ping": ping.status_code,
    "log": [[d.event_type, d.status, d.attempts] for d in log.data],
    "attempts": [[a.status_code, bool(a.error), a.response_body] for a in attempts.data],
}))
"""


def test_a_generated_client_downloads_exports_imports_and_reads_delivery_attempts(
    generator: Path, served: tuple[str, str], generated: Path
) -> None:
    base, key = served
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens: every attempt fails
    outcome = _use(generator, generated, USE_FILES_AND_DELIVERIES, base, key, dead)
    headers = {"Authorization": f"Bearer {key}"}
    for name, (job_id, digest) in outcome["downloads"].items():
        served_file = httpx.get(f"{base}/api/v2/units/exports/{job_id}/file", headers=headers)
        assert served_file.status_code == 200, (name, served_file.text)
        assert hashlib.sha256(served_file.content).hexdigest() == digest, name
    assert set(outcome["downloads"]) == {
        "csv/none",
        "jsonl/none",
        "xlsx/none",
        "parquet/none",
        "csv/gzip",
        "jsonl/gzip",
    }
    assert outcome["listed"] and set(outcome["listed"]) == {"UnitListed"}
    assert all(outcome["listedIds"])
    assert outcome["projected"] and "UnitListed" not in outcome["projected"]
    assert outcome["queried"] and set(outcome["queried"]) == {"UnitListed"}
    assert outcome["import"] == ["Job", "import", "queued"]
    assert outcome["ping"] is None
    assert outcome["log"] == [["webhook.test", "failed", 1]]
    assert outcome["attempts"] == [[None, True, None]]
