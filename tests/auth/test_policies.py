"""Key policies: a key bound to a filter sees and changes nothing outside it."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import READY_UNIT, Api, unit_body


async def scoped_key(api: Api, policy: str) -> str:
    return await api.create_key("units:read", "units:write", policy=policy)


async def test_a_city_bound_key_neither_sees_nor_changes_other_cities(api: Api) -> None:
    scope = f"pol-{uuid.uuid4().hex[:8]}"
    inside = await api.create_unit(city="Alexandria", subProjectId=scope)
    outside = await api.create_unit(city="Cairo", subProjectId=scope)
    key = await scoped_key(api, "city==Alexandria")
    listed = await api.request("GET", f"/api/v2/units/?p=subProjectId=={scope}", key=key)
    assert [u["id"] for u in listed.json()["data"]] == [inside["id"]]
    assert listed.json()["meta"]["total"] == 1

    hidden = f"/api/v2/units/{outside['id']}"
    assert (await api.request("GET", hidden, key=key)).status_code == 404
    assert (await api.request("GET", f"{hidden}/history", key=key)).status_code == 404
    assert (await api.request("PATCH", hidden, json={"price": 1}, key=key)).status_code == 404
    assert (
        await api.request("PUT", hidden, json=unit_body(city="Alexandria"), key=key)
    ).status_code == 404
    assert (await api.request("DELETE", hidden, key=key)).status_code == 404
    untouched = await api.request("GET", hidden)
    assert untouched.json()["version"] == 1

    own = f"/api/v2/units/{inside['id']}"
    assert (await api.request("GET", own, key=key)).status_code == 200
    assert (await api.request("GET", f"{own}/history", key=key)).status_code == 200
    moved = await api.request("PATCH", own, json={"city": "Cairo"}, key=key)
    assert moved.status_code == 403
    assert (await api.request("GET", own)).json()["city"] == "Alexandria"
    history = (await api.request("GET", f"{own}/history")).json()["data"]
    assert [entry["action"] for entry in history] == ["create"]
    renamed = await api.request("PATCH", own, json={"name": "Renamed"}, key=key)
    assert renamed.status_code == 200 and renamed.json()["version"] == 2


async def test_creates_outside_the_policy_are_403_and_write_nothing(api: Api) -> None:
    scope = f"pol-{uuid.uuid4().hex[:8]}"
    key = await scoped_key(api, "city==Alexandria")
    refused = await api.request(
        "POST", "/api/v2/units/", json=unit_body(city="Cairo", subProjectId=scope), key=key
    )
    assert refused.status_code == 403
    accepted = await api.request(
        "POST", "/api/v2/units/", json=unit_body(city="alexandria", subProjectId=scope), key=key
    )
    assert accepted.status_code == 201
    everything = await api.request("GET", f"/api/v2/units/?p=subProjectId=={scope}")
    assert [u["city"] for u in everything.json()["data"]] == ["alexandria"]


async def test_a_published_only_key_sees_no_drafts(api: Api) -> None:
    scope = f"pub-{uuid.uuid4().hex[:8]}"
    draft = await api.create_unit(**READY_UNIT, subProjectId=scope)
    shown = await api.create_unit(**READY_UNIT, subProjectId=scope)
    published = await api.request(
        "PUT", f"/api/v2/units/publishing-actions/{shown['id']}", json={"action": "publish"}
    )
    assert published.status_code == 200, published.text
    key = await api.create_key("units:read", policy="status==published")
    assert (await api.request("GET", f"/api/v2/units/{draft['id']}", key=key)).status_code == 404
    listed = await api.request(
        "GET", "/api/v2/units/", params={"p": f"subProjectId=={scope}"}, key=key
    )
    assert [unit["id"] for unit in listed.json()["data"]] == [shown["id"]]


async def test_a_sub_project_key_with_nested_policy(api: Api) -> None:
    scope = f"pol-{uuid.uuid4().hex[:8]}"
    pool = await api.create_unit(subProjectId=scope, specs=[{"featureTag": "pool"}])
    await api.create_unit(subProjectId=scope, specs=[{"featureTag": "garden"}])
    key = await api.create_key("units:read", policy=f"subProjectId=={scope};specs.featureTag==pool")
    listed = await api.request("GET", "/api/v2/units/", key=key)
    assert [u["id"] for u in listed.json()["data"]] == [pool["id"]]


@pytest.mark.parametrize("policy", ["city==", "colour==red", "price=gt=cheap", "(city==a"])
async def test_bad_policies_are_422(api: Api, policy: str) -> None:
    response = await api.request(
        "POST", "/api/v2/api-keys", json={"name": "x", "scopes": ["units:read"], "policy": policy}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "policy"


async def test_policy_is_shown_on_the_key_record(api: Api) -> None:
    response = await api.request(
        "POST",
        "/api/v2/api-keys",
        json={"name": "x", "scopes": ["units:read"], "policy": "city==Cairo"},
    )
    assert response.json()["policy"] == "city==Cairo"


async def test_a_state_action_leaving_the_policy_is_403_and_changes_nothing(api: Api) -> None:
    unit = await api.create_unit()
    key = await api.create_key("units:read", "units:write", policy="availability==available")
    refused = await api.request(
        "PUT",
        f"/api/v2/units/availability-actions/{unit['id']}",
        json={"action": "block"},
        key=key,
    )
    assert refused.status_code == 403, refused.text
    after = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
    assert (after["version"], after["availability"]["status"]) == (1, "available")
    history = await api.request("GET", f"/api/v2/units/{unit['id']}/history")
    assert len(history.json()["data"]) == 1
