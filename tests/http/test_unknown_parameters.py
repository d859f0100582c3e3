"""An operation takes the query parameters its OpenAPI operation declares, each once: any
other, or one given twice, is a 400 naming it, on every route (http/parameters.py)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import Api
from tests.http.test_errors import assert_problem

UNKNOWN = "/problems/unknown-parameter"


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every (method, path with ids filled in, operation) of the document."""
    return [
        (method.upper(), re.sub(r"\{[A-Za-z]+\}", lambda _: str(uuid.uuid4()), path), operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]


def _query_names(operation: dict[str, Any]) -> list[str]:
    return [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]


def assert_unknown(response: httpx.Response, *names: str) -> dict[str, Any]:
    body = assert_problem(response, 400)
    assert body["type"] == UNKNOWN, body
    assert body["parameter"] == names[0]
    assert [error["field"] for error in body["errors"]] == list(names)  # type: ignore[attr-defined]
    assert all(f"'{name}'" in str(body["detail"]) for name in names)
    return body


async def test_a_misspelt_filter_or_sort_on_the_list_is_a_400_not_every_unit(api: Api) -> None:
    await api.create_unit(city="Cairo")
    response = await api.request("GET", "/api/v2/units/?filter=city==Cairo")
    body = assert_unknown(response, "filter")
    assert "p, q" in str(body["detail"])  # what the list does take
    response = await api.request("GET", "/api/v2/units/?sort=price&limit=5&order=asc&Q=villa")
    assert_unknown(response, "sort", "Q")


@pytest.mark.parametrize(
    ("method", "path", "name"),
    [
        ("POST", "/api/v2/units/query", "filter"),
        ("GET", "/api/v2/units/exports", "page"),
        ("POST", "/api/v2/units/exports", "format"),
        ("GET", "/api/v2/units/imports", "status"),
        ("POST", "/api/v2/units/imports", "mode"),
        ("GET", "/api/v2/webhooks", "active"),
        ("GET", "/api/v2/events", "cursor"),
        ("GET", "/api/v2/api-keys", "revoked"),
        ("GET", "/healthz", "verbose"),
        ("GET", "/metrics", "name[]"),
    ],
)
async def test_a_misspelt_parameter_is_a_400_on_every_kind_of_route(
    api: Api, method: str, path: str, name: str
) -> None:
    response = await api.request(method, f"{path}?{name}=x", json={"filter": "city==Cairo"})
    assert_unknown(response, name)


async def test_the_routes_of_one_unit_served_directly_check_their_query_too(api: Api) -> None:
    unit = await api.create_unit()
    path = f"/api/v2/units/{unit['id']}/"
    assert_unknown(await api.request("GET", f"{path}?fields=name"), "fields")
    assert_unknown(await api.request("GET", f"{path[:-1]}?fields=name"), "fields")
    assert_unknown(await api.request("GET", f"{path}history?page=2"), "page")
    patched = await api.request("PATCH", f"{path}?dryRun=true", json={"city": "Giza"})
    assert_unknown(patched, "dryRun")
    assert_unknown(await api.request("DELETE", f"{path}?force=1"), "force")
    after = await api.request("GET", path)
    assert after.status_code == 200 and after.json()["version"] == unit["version"]  # untouched


async def test_nothing_is_written_when_the_query_is_refused(api: Api) -> None:
    project = f"refused-{uuid.uuid4()}"
    response = await api.request(
        "POST",
        "/api/v2/units/?validate=true",
        json={"name": "a", "type": "b", "subProjectId": project},
    )
    assert_unknown(response, "validate")
    listed = await api.request("GET", "/api/v2/units/", params={"p": f"subProjectId=={project}"})
    assert listed.json()["meta"]["total"] == 0


async def test_every_operation_refuses_a_parameter_it_does_not_declare(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    for method, path, _ in _operations(document):
        response = await api.request(method, f"{path}?undeclared=1&undeclared")
        assert_unknown(response, "undeclared")


async def test_every_declared_parameter_is_taken(api: Api) -> None:
    """Whatever the document declares reaches the handler: a value it rejects is a 400 about
    that value, never an unknown parameter. New parameters are covered as they are declared."""
    document = (await api.client.get("/openapi.json")).json()
    checked = 0
    for method, path, operation in _operations(document):
        names = _query_names(operation)
        if not names:
            continue
        for name in names:
            schema = next(p["schema"] for p in operation["parameters"] if p["name"] == name)
            response = await api.request(method, path, params={name: schema.get("default", "1")})
            assert response.status_code != 400 or response.json()["type"] != UNKNOWN, (path, name)
            checked += 1
        together = {name: "1" for name in names}
        response = await api.request(method, path, params=together)
        assert response.status_code != 400 or response.json()["type"] != UNKNOWN, path
    assert checked >= 7 + 3 + 2 * 6  # the list, the feed, and six lists with limit and cursor


async def test_the_list_takes_all_its_parameters_at_once(api: Api) -> None:
    project = f"all-params-{uuid.uuid4()}"
    await api.create_unit(name="Garden Villa", price=100, subProjectId=project)
    params = {
        "limit": "5",
        "page": "1",
        "sortBy": "price,name",
        "order": "asc",
        "fields": "name,price",
        "p": f"subProjectId=={project}",
        "q": "villa",
    }
    response = await api.request("GET", "/api/v2/units/", params=params)
    assert response.status_code == 200, response.text
    assert [unit["name"] for unit in response.json()["data"]] == ["Garden Villa"]


async def test_a_parameter_given_twice_is_a_400_naming_it(api: Api) -> None:
    response = await api.request("GET", "/api/v2/units/?limit=1&page=1&limit=2")
    body = assert_problem(response, 400)
    assert body["type"] == "/problems/invalid-parameter"
    assert body["parameter"] == "limit"
    assert "2 times" in str(body["detail"]) and "comma-separated" in str(body["detail"])
    unit = await api.create_unit()
    response = await api.request("GET", f"/api/v2/units/{unit['id']}/history?limit=1&limit=1")
    assert assert_problem(response, 400)["parameter"] == "limit"


async def test_names_are_read_as_the_handlers_read_them(api: Api) -> None:
    """Percent-encoded names are decoded, blank values count, and an empty name is a name."""
    response = await api.request("GET", "/api/v2/units/?%6Cimit=5&sort%42y=price")
    assert response.status_code == 200, response.text
    assert_unknown(await api.request("GET", "/api/v2/units/?filter"), "filter")
    assert_unknown(await api.request("GET", "/api/v2/units/?=city==Cairo"), "")
    assert_unknown(await api.request("GET", "/api/v2/units/?sort+by=price"), "sort by")
    assert (await api.request("GET", "/api/v2/units/?&limit=5&")).status_code == 200


async def test_the_key_comes_first_under_the_api(api: Api) -> None:
    response = await api.client.get("/api/v2/units/?filter=city==Cairo")
    assert assert_problem(response, 401)["type"] == "/problems/unauthorized"
    response = await api.client.get("/healthz?verbose=1")  # no key needed: the 400 itself
    assert_unknown(response, "verbose")


async def test_documents_for_people_take_any_query(api: Api) -> None:
    """/openapi.json and /docs are not operations of the document: a cache-busting query or
    a tool's own parameter is left alone there."""
    assert (await api.client.get("/openapi.json?v=2")).status_code == 200
    assert (await api.client.get("/docs?tryItOut=1")).status_code == 200


async def test_the_document_says_every_operation_may_answer_400_and_414(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    for _, path, operation in _operations(document):
        for code in ("400", "414"):
            content = operation["responses"][code]["content"]
            assert "application/problem+json" in content, (path, code)
    listing = document["paths"]["/api/v2/units/"]["get"]
    assert _query_names(listing) == ["limit", "page", "sortBy", "order", "fields", "p", "q"]
    sort_by = re.compile(
        next(p for p in listing["parameters"] if p["name"] == "sortBy")["schema"]["pattern"]
    )
    assert sort_by.fullmatch("relevance") and sort_by.fullmatch("distance, price")
    assert not sort_by.fullmatch("") and not sort_by.fullmatch("closeness")
