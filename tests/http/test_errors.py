"""Every error is problem+json, including the framework's own answers."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from tests.conftest import Api, start_api, unit_body
from units_api.config import Settings
from units_api.migrate import head_revision

PROBLEM_KEYS = {"type", "title", "status", "detail", "instance", "requestId"}


def assert_problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = response.json()
    assert set(body) >= PROBLEM_KEYS
    assert body["status"] == status
    assert body["requestId"] == response.headers["x-request-id"]
    assert "Traceback" not in response.text
    return body


async def test_unknown_route_is_a_404_problem(api: Api) -> None:
    body = assert_problem(await api.request("GET", "/api/v2/nothing-here"), 404)
    assert body["instance"] == "/api/v2/nothing-here"


async def test_wrong_method_is_405_with_allow(api: Api) -> None:
    unit = await api.create_unit()
    response = await api.request("POST", f"/api/v2/units/{unit['id']}/")
    assert_problem(response, 405)
    assert response.headers["allow"] == "DELETE, GET, PATCH, PUT"
    response = await api.request("DELETE", "/api/v2/units/")
    assert_problem(response, 405)
    assert "POST" in response.headers["allow"]


METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


async def test_every_known_path_answers_405_with_allow_for_other_methods(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    for template, operations in document["paths"].items():
        path = re.sub(r"\{[A-Za-z_]+\}", lambda _: str(uuid.uuid4()), template)
        allowed = sorted(method.upper() for method in operations)
        for method in set(METHODS) - set(allowed):
            response = await api.request(method, path, content=b"{}")
            assert_problem(response, 405)
            assert response.headers["allow"] == ", ".join(allowed), (method, path)


async def test_a_fixed_path_is_never_read_as_a_unit_id(api: Api) -> None:
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        response = await api.request(method, "/api/v2/units/query/", json={})
        body = assert_problem(response, 405)
        assert response.headers["allow"] == "POST"
        assert body["type"] == "/problems/method-not-allowed"
    response = await api.request("GET", "/api/v2/units/bulk/update")
    assert_problem(response, 405)
    assert response.headers["allow"] == "PUT"


async def test_a_key_comes_before_404_and_405_under_the_api(api: Api) -> None:
    for method, path in (("PUT", "/api/v2/units/query"), ("GET", "/api/v2/units/x")):
        response = await api.client.request(method, path)
        assert_problem(response, 401)
        assert response.headers["www-authenticate"].startswith("Bearer")
    response = await api.client.request("POST", "/healthz")
    assert_problem(response, 405)
    assert response.headers["allow"] == "GET"


async def test_malformed_json_is_400(api: Api) -> None:
    for raw in (b"{", b"", b'{"name": "a",}', b"\xff\xfe"):
        response = await api.request(
            "POST", "/api/v2/units/", content=raw, headers={"content-type": "application/json"}
        )
        assert_problem(response, 400)


async def test_deeply_nested_json_is_400_not_500(api: Api) -> None:
    raw = b"[" * 100_000 + b"]" * 100_000
    response = await api.request(
        "POST", "/api/v2/units/", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code in (400, 422)


async def test_wrong_content_type_is_415(api: Api) -> None:
    unit = await api.create_unit()
    response = await api.request(
        "POST", "/api/v2/units/", content=b"name=a", headers={"content-type": "text/plain"}
    )
    assert_problem(response, 415)
    response = await api.request(
        "PUT",
        f"/api/v2/units/{unit['id']}",
        content=b"{}",
        headers={"content-type": "application/merge-patch+json"},
    )
    assert_problem(response, 415)
    response = await api.request(
        "PATCH",
        f"/api/v2/units/{unit['id']}",
        content=b'{"price": 1}',
        headers={"content-type": "application/merge-patch+json; charset=utf-8"},
    )
    assert response.status_code == 200


async def test_declared_length_over_the_limit_is_413(api: Api) -> None:
    response = await api.request(
        "POST",
        "/api/v2/units/",
        content=b"{}",
        headers={"content-type": "application/json", "content-length": str(5 * 1024 * 1024)},
    )
    assert_problem(response, 413)


async def test_request_id_is_echoed_or_generated(api: Api) -> None:
    echoed = await api.request("GET", "/healthz", headers={"X-Request-ID": "abc-123"})
    assert echoed.headers["x-request-id"] == "abc-123"
    generated = await api.request("GET", "/healthz")
    assert len(generated.headers["x-request-id"]) >= 16
    hostile = await api.request("GET", "/healthz", headers={"X-Request-ID": "a\tb" * 200})
    assert hostile.headers["x-request-id"] != "a\tb" * 200


async def test_unexpected_errors_are_500_problems_without_internals(settings: Settings) -> None:
    async for api in start_api(settings):

        async def boom() -> None:
            raise RuntimeError("secret internals")

        api.client._transport.app.add_api_route("/boom", boom)  # type: ignore[attr-defined]
        transport = httpx.ASGITransport(app=api.client._transport.app, raise_app_exceptions=False)  # type: ignore[attr-defined]
        async with httpx.AsyncClient(transport=transport, base_url="http://units.test") as client:
            response = await client.get("/boom")
        body = assert_problem(response, 500)
        assert "secret internals" not in response.text
        assert body["type"] == "/problems/internal-error"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json", "/metrics", "/docs"])
async def test_operational_endpoints_need_no_key(api: Api, path: str) -> None:
    response = await api.client.get(path)
    assert response.status_code == 200


async def test_readyz_reports_the_schema(api: Api) -> None:
    body = (await api.client.get("/readyz")).json()
    assert body["status"] == "ready" and body["migration"] == head_revision()


async def test_write_body_round_trip_names_trailing_slash_paths(api: Api) -> None:
    response = await api.request("POST", "/api/v2/units", json=unit_body())
    assert response.status_code == 201
