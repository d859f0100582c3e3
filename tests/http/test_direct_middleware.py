"""One unit's routes are served directly (`http/direct.py`), inside the same middleware as
every other route: a real server on PostgreSQL (its fast pool on) answers a direct route and
a framework-routed one alike: request id, rate limit headers, the body limit, an unknown
parameter, a URL too long, the request metrics by route template and the access log."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import fresh_postgres, unit_body
from tests.test_metrics import REQUESTS, _lines, _samples, served
from units_api.http.middleware import MAX_URL_BYTES
from units_api.units.router import DIRECT_OPERATIONS

UNITS = "/api/v2/units"
ONE = "/api/v2/units/{id}"
QUERY = "/api/v2/units/query"
BODY_LIMIT = 4096


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    assert problem["status"] == status
    return problem


def _kind(problem: dict[str, Any]) -> tuple[Any, ...]:
    return problem["type"], problem["title"], problem["status"], sorted(problem)


def test_direct_routes_get_every_middleware_like_routed_ones(tmp_path: Path) -> None:
    assert {"getUnit", "createUnit", "replaceUnit"} <= set(DIRECT_OPERATIONS)
    log = tmp_path / "log"
    env = {"UNITS_API_MAX_BODY_BYTES": str(BODY_LIMIT), "UNITS_API_DB_FAST_POOL_SIZE": "4"}
    with fresh_postgres("units_direct") as url, served(url, log, env=env) as (base, admin):
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {admin}"})
        made = Counter[tuple[str, str, str]]()
        sent_ids: list[str] = []

        def call(method: str, path: str, route: str, **kwargs: Any) -> httpx.Response:
            request_id = f"t-{uuid.uuid4().hex}"
            sent_ids.append(request_id)
            headers = {"X-Request-Id": request_id, **kwargs.pop("headers", {})}
            response = client.request(method, path, headers=headers, **kwargs)
            made[(method, route, str(response.status_code))] += 1
            # The request id: the one sent, on every answer.
            assert response.headers["x-request-id"] == request_id
            return response

        created = client.post(
            "/api/v2/api-keys",
            json={"name": "limited", "scopes": ["admin"], "rateLimit": "1000/hour"},
        )
        assert created.status_code == 201, created.text
        client.headers["Authorization"] = f"Bearer {created.json()['key']}"

        unit = call("POST", UNITS, UNITS, json=unit_body())
        assert unit.status_code == 201, unit.text
        unit_id = unit.json()["id"]
        direct = call("GET", f"{UNITS}/{unit_id}", ONE)
        routed = call("GET", UNITS, UNITS, params={"limit": 1})
        assert direct.status_code == routed.status_code == 200

        # One rate limit, counted by both kinds of route, with the same headers.
        remaining = []
        for response in (unit, direct, routed):
            assert response.headers["ratelimit-policy"] == '"default";q=1000;w=3600'
            remaining.append(int(response.headers["ratelimit"].split(";r=")[1].split(";")[0]))
        assert remaining == [999, 998, 997]

        # An undeclared query parameter: the same 400, before either handler runs.
        unknown = [
            _problem(call("GET", f"{UNITS}/{unit_id}", ONE, params={"bogus": "1"}), 400),
            _problem(call("GET", UNITS, UNITS, params={"bogus": "1"}), 400),
        ]
        assert _kind(unknown[0]) == _kind(unknown[1])
        assert all("bogus" in problem["detail"] for problem in unknown)

        # A URL too long: the same 414.
        long = {"x": "a" * MAX_URL_BYTES}
        too_long = [
            _problem(call("GET", f"{UNITS}/{unit_id}", ONE, params=long), 414),
            _problem(call("GET", UNITS, UNITS, params=long), 414),
        ]
        assert _kind(too_long[0]) == _kind(too_long[1])

        # A body past the limit: the same 413, from a direct write and a routed one.
        big = {**unit_body(), "description": {"en": "x" * BODY_LIMIT}}
        too_big = [
            _problem(call("PUT", f"{UNITS}/{unit_id}", ONE, json=big), 413),
            _problem(call("POST", QUERY, QUERY, json={"filter": "x" * BODY_LIMIT}), 413),
        ]
        assert _kind(too_big[0]) == _kind(too_big[1])

        # Metrics: each request counted once, under its route's template (never the id).
        scrape = httpx.get(f"{base}/metrics")
        assert scrape.status_code == 200
        counted = {
            (labels["method"], labels["route"], labels["status"]): int(value)
            for labels, value in (
                (dict(key), value) for key, value in _samples(scrape.text, REQUESTS).items()
            )
            if labels["route"] in (ONE, UNITS, QUERY)
        }
        assert counted == dict(made)
        assert unit_id not in scrape.text
        client.close()

    # The access log: one line per request, with its id and its key, direct or not.
    access = {
        line["requestId"]: line for line in _lines(log) if line["logger"] == "units_api.access"
    }
    assert set(sent_ids) <= set(access)
    created_key = created.json()["id"]
    assert access[sent_ids[1]]["keyId"] == access[sent_ids[2]]["keyId"] == created_key
    for direct_id, routed_id in zip(sent_ids[3::2], sent_ids[4::2], strict=True):
        direct_line, routed_line = access[direct_id], access[routed_id]
        assert direct_line["status"] == routed_line["status"]
        assert direct_line["keyId"] == routed_line["keyId"]
        assert direct_line["path"] == f"{UNITS}/{unit_id}"
