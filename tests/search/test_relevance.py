"""Relevance order on both databases: words as written, then name fields, then recency."""

from __future__ import annotations

import uuid
from typing import Any

from tests.conftest import Api


async def make_units(api: Api, scope: str) -> dict[str, str]:
    """Oldest first; the order relevance must give is by score, not by age."""
    bodies = {
        "written_in_name": {"name": "Garden Villa", "unitDesc": "quiet street"},
        "written_in_desc": {"name": "Villa", "unitDesc": "a garden and a pool"},
        "stem_in_name": {"name": "Gardens Court", "unitDesc": "quiet street"},
        "stem_in_desc": {"name": "Villa", "unitDesc": "two gardens"},
        "stem_in_desc_newer": {"name": "Villa", "unitDesc": "many gardens"},
    }
    ids = {}
    for key, body in bodies.items():
        ids[key] = (await api.create_unit(**body, subProjectId=scope))["id"]
    return ids


EXPECTED = [
    "written_in_name",
    "written_in_desc",
    "stem_in_name",
    "stem_in_desc_newer",
    "stem_in_desc",
]


async def list_page(api: Api, scope: str, **params: Any) -> list[str]:
    response = await api.request(
        "GET", "/api/v2/units/", params={"p": f"subProjectId=={scope}", **params}
    )
    assert response.status_code == 200, response.text
    return [unit["id"] for unit in response.json()["data"]]


async def test_list_by_relevance_and_its_pages(api: Api) -> None:
    scope = f"r-{uuid.uuid4().hex[:8]}"
    ids = await make_units(api, scope)
    expected = [ids[key] for key in EXPECTED]
    assert await list_page(api, scope, q="garden", sortBy="relevance") == expected
    paged = [
        unit
        for page in range(1, 6)
        for unit in await list_page(
            api, scope, q="garden", sortBy="relevance", limit="1", page=str(page)
        )
    ]
    assert paged == expected
    ascending = await list_page(api, scope, q="garden", sortBy="relevance", order="asc")
    assert ascending == expected[::-1]


async def test_query_endpoint_by_relevance_with_cursors(api: Api) -> None:
    scope = f"r-{uuid.uuid4().hex[:8]}"
    ids = await make_units(api, scope)
    body: dict[str, Any] = {
        "filter": f"subProjectId=={scope}",
        "q": "garden",
        "sort": [{"field": "relevance"}],
        "limit": 2,
    }
    seen: list[str] = []
    while True:
        response = await api.request("POST", "/api/v2/units/query", json=body)
        assert response.status_code == 200, response.text
        page = response.json()
        seen += [unit["id"] for unit in page["data"]]
        if page["nextCursor"] is None:
            break
        body["cursor"] = page["nextCursor"]
    assert seen == [ids[key] for key in EXPECTED]


async def test_relevance_needs_a_search_text(api: Api) -> None:
    for params in ({"sortBy": "relevance"}, {"sortBy": "relevance", "q": " ,. "}):
        response = await api.request("GET", "/api/v2/units/", params=params)
        assert response.status_code == 400, response.text
        assert response.json()["parameter"] == "sortBy"
    response = await api.request(
        "POST", "/api/v2/units/query", json={"sort": [{"field": "relevance"}]}
    )
    assert response.status_code == 400, response.text
    assert response.json()["parameter"] == "sort"


async def test_empty_sort_parameters_are_refused(api: Api) -> None:
    for name in ("sortBy", "order"):
        response = await api.request("GET", "/api/v2/units/", params={name: ""})
        assert response.status_code == 400, response.text
        assert response.json()["parameter"] == name
