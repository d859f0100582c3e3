"""Units a filter test owns: created in a scope of their own (`subProjectId`), read back as
the API returns them, and matched by SQL (the list endpoint) and by `filters.evaluate`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.conftest import Api
from units_api.filters.evaluate import compile_filter
from units_api.filters.parser import parse_filter
from units_api.http.json import dumps, load_stored
from units_api.units.filtering import UNIT_CATALOGUE

Document = dict[str, Any]


async def create_scope(api: Api, bodies: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """A new scope holding one unit per body, and their ids in the same order."""
    scope = f"filters-{uuid.uuid4().hex[:12]}"
    ids = []
    for body in bodies:
        response = await api.request(
            "POST",
            "/api/v2/units/",
            content=dumps({**body, "subProjectId": scope}),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return scope, ids


async def publish(api: Api, unit_id: str, **body: Any) -> None:
    path = f"/api/v2/units/publishing-actions/{unit_id}"
    response = await api.request("PUT", path, json=body)
    assert response.status_code == 200, response.text


async def change_availability(api: Api, unit_id: str, **body: Any) -> None:
    path = f"/api/v2/units/availability-actions/{unit_id}/"
    response = await api.request("PUT", path, json=body)
    assert response.status_code == 200, response.text


def later(hours: int = 1) -> str:
    return (datetime.now(UTC) + timedelta(hours=hours)).isoformat().replace("+00:00", "Z")


async def documents(api: Api, scope: str) -> list[Document]:
    """Every unit of the scope, exactly as the API returns it, with exact numbers."""
    response = await api.request(
        "GET", "/api/v2/units/", params={"p": f"subProjectId=={scope}", "limit": "100"}
    )
    assert response.status_code == 200, response.text
    found: list[Document] = load_stored(response.content)["data"]
    return found


async def sql_matches(api: Api, scope: str, text: str) -> set[str]:
    """The ids of the scope's units the database finds for a filter."""
    response = await api.request(
        "GET",
        "/api/v2/units/",
        params={"p": f"subProjectId=={scope};({text})", "limit": "100", "fields": "id"},
    )
    assert response.status_code == 200, (text, response.text)
    return {unit["id"] for unit in response.json()["data"]}


def evaluated_matches(docs: list[Document], text: str) -> set[str]:
    """The ids of the documents `filters.evaluate` finds for a filter."""
    matches = compile_filter(parse_filter(text), UNIT_CATALOGUE)
    return {doc["id"] for doc in docs if matches(doc)}
