"""The OpenAPI document, and schemathesis against a real server that serves it."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import checks
from starlette.datastructures import Headers

from tests.conftest import Api
from units_api.auth.router import KEYS_LIMIT
from units_api.config import DEFAULTS
from units_api.errors import InvalidHeader, InvalidParameter
from units_api.http.docs import comma_list
from units_api.http.etag import IF_MATCH_PATTERN, if_match
from units_api.http.middleware import MAX_URL_BYTES
from units_api.search.normalize import SEARCH_FIELDS
from units_api.units.fields import SORTABLE
from units_api.units.listing import LIST_LIMIT, MAX_DEPTH, parse_list_params
from units_api.units.router import HISTORY_LIMIT
from units_api.units.schemas import MAX_ITEMS, MAX_MATCHED, QUERY_LIMIT

OPERATION_IDS = {
    ("get", "/api/v2/units/"): "listUnits",
    ("post", "/api/v2/units/"): "createUnit",
    ("get", "/api/v2/units/{id}/"): "getUnit",
    ("put", "/api/v2/units/{id}/"): "replaceUnit",
    ("patch", "/api/v2/units/{id}/"): "patchUnit",
    ("delete", "/api/v2/units/{id}/"): "deleteUnit",
    ("get", "/api/v2/units/{id}/history"): "listUnitHistory",
    ("get", "/api/v2/units/{id}/channels"): "listUnitChannels",
    ("get", "/api/v2/channels"): "listChannels",
    ("get", "/api/v2/channels/{name}"): "getChannel",
    ("put", "/api/v2/channels/{name}"): "putChannel",
    ("delete", "/api/v2/channels/{name}"): "deleteChannel",
    ("post", "/api/v2/channels/{name}/rotate-token"): "rotateChannelToken",
    ("get", "/feeds/{channel}.xml"): "getListingsFeedXml",
    ("get", "/feeds/{channel}.csv"): "getListingsFeedCsv",
    ("post", "/api/v2/units/query"): "runUnitQuery",
    ("put", "/api/v2/units/bulk/update"): "bulkUpdateUnits",
    ("put", "/api/v2/units/publishing-actions/{id}"): "runPublishingAction",
    ("put", "/api/v2/units/availability-actions/{id}"): "runAvailabilityAction",
    ("post", "/api/v2/api-keys"): "createApiKey",
    ("get", "/api/v2/api-keys"): "listApiKeys",
    ("get", "/api/v2/api-keys/{id}"): "getApiKey",
    ("delete", "/api/v2/api-keys/{id}"): "revokeApiKey",
    ("get", "/api/v2/events"): "listEvents",
    ("post", "/api/v2/units/exports"): "createExport",
    ("get", "/api/v2/units/exports"): "listExports",
    ("get", "/api/v2/units/exports/{id}"): "getExport",
    ("get", "/api/v2/units/exports/{id}/file"): "downloadExport",
    ("post", "/api/v2/units/imports"): "createImport",
    ("get", "/api/v2/units/imports"): "listImports",
    ("get", "/api/v2/units/imports/{id}"): "getImport",
    ("post", "/api/v2/webhooks"): "createWebhook",
    ("get", "/api/v2/webhooks"): "listWebhooks",
    ("get", "/api/v2/webhooks/{id}"): "getWebhook",
    ("patch", "/api/v2/webhooks/{id}"): "updateWebhook",
    ("delete", "/api/v2/webhooks/{id}"): "deleteWebhook",
    ("post", "/api/v2/webhooks/{id}/rotate-secret"): "rotateWebhookSecret",
    ("post", "/api/v2/webhooks/{id}/test"): "testWebhook",
    ("get", "/api/v2/webhooks/{id}/deliveries"): "listWebhookDeliveries",
    ("get", "/api/v2/webhooks/{id}/deliveries/{deliveryId}/attempts"): (
        "listWebhookDeliveryAttempts"
    ),
    ("post", "/api/v2/webhooks/{id}/deliveries/{deliveryId}/redeliver"): (
        "redeliverWebhookDelivery"
    ),
    ("get", "/api/v2/display-names"): "listDisplayNames",
    ("get", "/api/v2/display-names/{field}/{value}"): "getDisplayName",
    ("put", "/api/v2/display-names/{field}/{value}"): "putDisplayName",
    ("delete", "/api/v2/display-names/{field}/{value}"): "deleteDisplayName",
    ("get", "/healthz"): "getHealth",
    ("get", "/readyz"): "getReadiness",
    ("get", "/metrics"): "getMetrics",
}


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


async def document_of(api: Api) -> dict[str, Any]:
    document: dict[str, Any] = (await api.client.get("/openapi.json")).json()
    return document


def parameters_of(operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {parameter["name"]: parameter for parameter in operation.get("parameters", [])}


async def test_a_delivery_s_headers_are_documented(api: Api) -> None:
    webhooks = (await document_of(api))["webhooks"]
    for entry in webhooks.values():
        headers = parameters_of(entry["post"])
        assert {name for name, header in headers.items() if header["required"]} == {
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
        }
        # Only when the server records traces.
        assert headers["traceparent"]["required"] is False


async def test_every_operation_has_a_short_stable_camel_case_operation_id(api: Api) -> None:
    document = await document_of(api)
    found = {
        (method, path): operation.get("operationId")
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    }
    assert found == OPERATION_IDS
    assert len(set(found.values())) == len(found)
    for operation_id in found.values():
        assert operation_id is not None and re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)*", operation_id)


def test_the_readme_lists_every_operation_id(project_root: Path) -> None:
    readme = (project_root / "README.md").read_text()
    listed = re.search(r"short camelCase `operationId` \(([^)]*)\)", readme)
    assert listed is not None
    assert sorted(re.findall(r"`(\w+)`", listed[1])) == sorted(OPERATION_IDS.values())


async def test_numbers_in_the_document_come_from_the_code(api: Api) -> None:
    document = await document_of(api)
    paths = document["paths"]
    listing = paths["/api/v2/units/"]["get"]
    parameters = parameters_of(listing)
    assert parameters["limit"]["schema"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": LIST_LIMIT.maximum,
        "default": LIST_LIMIT.default,
    }
    assert parameters["page"]["schema"]["maximum"] == MAX_DEPTH
    assert f"{MAX_DEPTH:,}" in listing["description"]
    assert f"{DEFAULTS.count_budget_ms / 1000:g} s by default" in listing["description"]
    history = parameters_of(paths["/api/v2/units/{id}/history"]["get"])
    assert history["limit"]["schema"]["maximum"] == HISTORY_LIMIT.maximum
    keys = parameters_of(paths["/api/v2/api-keys"]["get"])
    assert keys["limit"]["schema"]["default"] == KEYS_LIMIT.default
    bulk = paths["/api/v2/units/bulk/update"]["put"]["description"]
    assert f"1..{MAX_ITEMS:,} items" in bulk and f"at most {MAX_MATCHED:,}" in bulk
    create = parameters_of(paths["/api/v2/units/"]["post"])
    hours = DEFAULTS.idempotency_ttl_seconds // 3600
    assert f"for {hours} hours" in create["Idempotency-Key"]["description"]
    publishing = paths["/api/v2/units/publishing-actions/{id}"]["put"]["description"]
    assert "price > 0" in publishing and "UNITS_API_PUBLISH_REQUIRES" in publishing
    limit = document["components"]["schemas"]["QueryRequest"]["properties"]["limit"]
    assert (limit["maximum"], limit["default"]) == (QUERY_LIMIT.maximum, QUERY_LIMIT.default)
    assert all(f"`{name}`" in document["info"]["description"] for name in SEARCH_FIELDS)


async def test_every_query_parameter_s_max_length_fits_in_a_url(api: Api) -> None:
    """A value of `maxLength` of the widest characters (four UTF-8 bytes, percent-encoded) is
    never a 414: a value the document allows is one the URL holds."""
    widest = chr(0x10FFFF)
    checked = set()
    for path, operations in (await document_of(api))["paths"].items():
        target = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path)
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                most = parameter["schema"].get("maxLength")
                if parameter["in"] != "query" or most is None:
                    continue
                url = f"{target}?{parameter['name']}={quote(widest * most)}"
                assert len(url) <= MAX_URL_BYTES, (path, parameter["name"])
                response = await api.request(method, url)
                assert response.status_code != 414, (path, parameter["name"])
                checked.add(parameter["name"])
    assert {"p", "q"} <= checked


async def test_parameters_say_what_the_server_checks(api: Api) -> None:
    paths = (await document_of(api))["paths"]
    listing = parameters_of(paths["/api/v2/units/"]["get"])
    sort_by = re.compile(listing["sortBy"]["schema"]["pattern"])
    assert sort_by.fullmatch("price") and sort_by.fullmatch("city, price")
    assert not sort_by.fullmatch("colour") and not sort_by.fullmatch("price,")
    fields = re.compile(listing["fields"]["schema"]["pattern"])
    assert fields.fullmatch("id,name,paymentPlans") and not fields.fullmatch("notes")
    assert re.compile(listing["order"]["schema"]["pattern"]).fullmatch("asc,desc")
    unit = parameters_of(paths["/api/v2/units/{id}/"]["put"])
    assert unit["id"]["schema"]["format"] == "uuid"
    assert "pattern" in unit["If-Match"]["schema"]


def _server_accepts_if_match(value: str) -> bool:
    try:
        if_match(Headers({"if-match": value}))
    except InvalidHeader:
        return False
    return True


IF_MATCH_TEXT = st.text(alphabet=st.sampled_from(['"', "W", "/", "*", ",", " ", "\t", "1", "a"]))


@given(value=IF_MATCH_TEXT | st.text(st.characters(max_codepoint=0xFF)))
@settings(max_examples=300)
def test_the_if_match_pattern_is_the_server_s_check(value: str) -> None:
    assert bool(re.fullmatch(IF_MATCH_PATTERN, value)) == _server_accepts_if_match(value)


class _Query:
    def __init__(self, **params: str) -> None:
        self.query_params = params
        self.headers: dict[str, str] = {}


@given(names=st.lists(st.sampled_from([*SORTABLE, "colour", ""]), max_size=4), gap=st.text(" "))
@settings(max_examples=200)
def test_the_sort_pattern_is_the_server_s_check_but_for_repeats(names: list[str], gap: str) -> None:
    value = f"{gap},{gap}".join(names)
    try:
        parse_list_params(_Query(sortBy=value))  # type: ignore[arg-type]
        accepted = True
    except InvalidParameter:
        accepted = False
    distinct = len(set(names)) == len(names)
    assert accepted == (bool(re.fullmatch(comma_list(SORTABLE)["pattern"], value)) and distinct)
    if value == "":
        assert not accepted  # an empty sortBy is a 400, as the pattern says


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
