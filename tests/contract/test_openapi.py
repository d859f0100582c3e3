"""The OpenAPI document, and schemathesis against a real server that serves it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from tests.conftest import Api, wait_until_ready
from tests.test_cli import free_port


async def test_every_reference_resolves(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    referenced = set(re.findall(r"#/components/schemas/([A-Za-z0-9_]+)", json.dumps(document)))
    assert referenced <= set(document["components"]["schemas"])


async def test_document_is_openapi_3_1_with_every_operation(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    paths = document["paths"]
    assert set(paths["/api/v2/units/"]) == {"get", "post"}
    assert set(paths["/api/v2/units/{id}/"]) == {"get", "put", "patch", "delete"}
    assert "/api/v2/units/{id}/history" in paths
    assert set(paths["/api/v2/api-keys"]) == {"get", "post"}
    schemes = document["components"]["securitySchemes"]
    assert schemes["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schemes["ApiKey"]["description"],
    }
    create = paths["/api/v2/units/"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/UnitWrite"
    )
    for code in ("401", "403", "422", "429"):
        assert "application/problem+json" in create["responses"][code]["content"]
    patch = paths["/api/v2/units/{id}/"]["patch"]
    assert "application/merge-patch+json" in patch["requestBody"]["content"]
    unit = document["components"]["schemas"]["UnitRead"]
    assert {"id", "version", "publishing", "availability", "paymentPlans"} <= set(
        unit["properties"]
    )
    assert document["components"]["schemas"]["Floor"]["properties"]["rooms"]["anyOf"][0] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 10**15,
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    port = free_port()
    database = tmp_path_factory.mktemp("schemathesis") / "units.db"
    env = {
        **os.environ,
        "UNITS_API_DATABASE_URL": f"sqlite:///{database}",
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_RATE_LIMIT": "1000000/minute",
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


@pytest.fixture(scope="module")
def api_schema(served: tuple[str, str]) -> Any:
    base, _ = served
    return schemathesis.openapi.from_url(f"{base}/openapi.json")


CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


def test_no_500_and_every_response_matches_the_document(
    api_schema: Any, served: tuple[str, str]
) -> None:
    base, key = served
    headers = {"Authorization": f"Bearer {key}"}
    labels = []
    for result in api_schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)

        @given(case=operation.as_strategy())
        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
        def check(case: Any) -> None:
            case.call_and_validate(base_url=base, headers=headers, checks=CHECKS)

        check()
    assert "POST /api/v2/units/" in labels and "PATCH /api/v2/units/{id}/" in labels
