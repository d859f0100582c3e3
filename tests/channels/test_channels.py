"""Channels as a resource (section 17): names and kinds, settings, feed tokens, readiness per
kind at publish, a unit's standing on its channels, and deletion that takes the name off
every unit with events; on both databases."""

from __future__ import annotations

import uuid
from typing import Any

from tests.conftest import READY_UNIT, Api
from tests.events.test_feed import feed_end, follow, of
from units_api.channels import readiness, service

CHANNELS = "/api/v2/channels"
UNITS = "/api/v2/units"
META_READY = {
    **READY_UNIT,
    "location": "Fifth Settlement",
    "unitDesc": "A villa with a garden.",
    "unitLocation": {"type": "Point", "coordinates": [31.47, 30.03]},
    "country": "EG",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def act(api: Api, unit_id: str, **body: Any) -> Any:
    return await api.request("PUT", f"{UNITS}/publishing-actions/{unit_id}", json=body)


async def errors_of(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return {error["field"]: error["message"] for error in response.json()["errors"]}


async def test_every_database_has_the_website_channel(api: Api) -> None:
    listed = (await api.request("GET", CHANNELS)).json()["data"]
    website = next(channel for channel in listed if channel["name"] == "website")
    assert website["kind"] == "website"
    assert website["feedUrls"] is None
    one = await api.request("GET", f"{CHANNELS}/website")
    assert one.json() == website


async def test_create_replace_read_and_the_events_they_write(api: Api) -> None:
    name = unique("partners")
    start = await feed_end(api)
    created = await api.request("PUT", f"{CHANNELS}/{name}", json={"kind": "label"})
    assert created.status_code == 201, created.text
    assert created.json()["kind"] == "label"
    assert created.json()["feedToken"] is None
    replaced = await api.request(
        "PUT",
        f"{CHANNELS}/{name}",
        json={"kind": "meta-catalog", "settings": {"propertyTypes": {"villa": "house"}}},
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["feedToken"].startswith("uft_")
    read = (await api.request("GET", f"{CHANNELS}/{name}")).json()
    assert read["kind"] == "meta-catalog"
    assert read["settings"] == {"propertyTypes": {"villa": "house"}}
    assert "feedToken" not in read
    assert read["feedUrls"]["xml"].endswith(f"/feeds/{name}.xml")
    assert read["feedUrls"]["csv"].endswith(f"/feeds/{name}.csv")
    found, _ = await follow(api, start)
    mine = [event for event in found if event["type"].startswith("channel.")]
    assert [(e["type"], e["data"]["name"], e["unitId"]) for e in mine] == [
        ("channel.created", name, None),
        ("channel.updated", name, None),
    ]


async def test_feed_tokens_are_shown_once_stored_hashed_and_rotated(api: Api) -> None:
    name = unique("meta")
    token = (await api.add_channel(name, "meta-catalog"))["feedToken"]
    # Replacing the settings keeps the token.
    again = await api.add_channel(name, "meta-catalog", urlTemplate="https://h.example/u/{id}")
    assert again["feedToken"] is None
    async with api.context.db.read() as conn:
        assert await service.feed_channel(conn, name, token) is not None
        assert await service.feed_channel(conn, name, token + "x") is None
        assert await service.feed_channel(conn, name, None) is None
    rotated = await api.request("POST", f"{CHANNELS}/{name}/rotate-token")
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["feedToken"]
    assert new != token
    assert rotated.json()["feedTokenPrefix"] == new[:12]
    async with api.context.db.read() as conn:
        assert await service.feed_channel(conn, name, token) is None
        assert await service.feed_channel(conn, name, new) is not None
    label = unique("label")
    await api.add_channel(label)
    refused = await api.request("POST", f"{CHANNELS}/{label}/rotate-token")
    assert refused.status_code == 409


async def test_bad_names_kinds_and_settings_are_422_with_paths(api: Api) -> None:
    cases = [
        ("Website", {"kind": "label"}, "name"),
        ("a" * 41, {"kind": "label"}, "name"),
        ("web_site", {"kind": "label"}, "name"),
        (unique("x"), {"kind": "billboard"}, "kind"),
        (unique("x"), {}, "kind"),
        (unique("x"), {"kind": "label", "colour": "red"}, "colour"),
        (unique("x"), {"kind": "label", "settings": {"urlTemplate": "x"}}, "settings.urlTemplate"),
        (
            unique("x"),
            {"kind": "meta-catalog", "settings": {"urlTemplate": "https://h.example/u"}},
            "settings.urlTemplate",
        ),
        (
            unique("x"),
            {"kind": "meta-catalog", "settings": {"urlTemplate": "ftp://h.example/{id}"}},
            "settings.urlTemplate",
        ),
        (
            unique("x"),
            {"kind": "meta-catalog", "settings": {"propertyTypes": {"villa": "castle"}}},
            "settings.propertyTypes.villa",
        ),
    ]
    for name, body, field in cases:
        response = await api.request("PUT", f"{CHANNELS}/{name}", json=body)
        assert field in await errors_of(response), (name, body, response.text)
    missing = await api.request("GET", f"{CHANNELS}/{unique('none')}")
    assert missing.status_code == 404
    assert (await api.request("DELETE", f"{CHANNELS}/{unique('none')}")).status_code == 404


async def test_the_website_channel_stays_a_website(api: Api) -> None:
    changed = await api.request("PUT", f"{CHANNELS}/website", json={"kind": "label"})
    assert changed.status_code == 409
    assert (await api.request("DELETE", f"{CHANNELS}/website")).status_code == 409
    kept = await api.request("PUT", f"{CHANNELS}/website", json={"kind": "website"})
    assert kept.status_code == 200


async def test_reading_needs_units_read_and_changing_needs_admin(api: Api) -> None:
    reader = await api.create_key("units:read")
    assert (await api.request("GET", CHANNELS, key=reader)).status_code == 200
    refused = await api.request(
        "PUT", f"{CHANNELS}/{unique('x')}", key=reader, json={"kind": "label"}
    )
    assert refused.status_code == 403
    writer = await api.create_key("units:write")
    assert (await api.request("GET", CHANNELS, key=writer)).status_code == 403


async def test_publishing_to_a_name_that_is_no_channel_is_422_listing_them(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    for channels in (["webiste"], ["Website "], ["website", "nowhere"]):
        response = await act(api, unit["id"], action="publish", channels=channels)
        errors = await errors_of(response)
        bad = len(channels) - 1
        assert f"channels[{bad}]" in errors
        assert "website" in errors[f"channels[{bad}]"]
    later = "2099-01-01T00:00:00Z"
    scheduled = await act(api, unit["id"], action="schedule", at=later, channels=["webiste"])
    assert "channels[0]" in await errors_of(scheduled)
    stored = (await api.request("GET", f"{UNITS}/{unit['id']}")).json()
    assert stored["publishing"]["status"] == "draft"


async def test_each_kind_has_its_readiness_rules(api: Api) -> None:
    meta = unique("meta")
    await api.add_channel(meta, "meta-catalog")
    bare = await api.create_unit(**READY_UNIT)
    refused = await act(api, bare["id"], action="publish", channels=["website", meta])
    errors = await errors_of(refused)
    assert {f"channels.{meta}.{field}" for field in ("unitLocation", "location", "unitDesc")} == {
        field for field in errors if field.startswith("channels.")
    }
    no_image = await api.create_unit(**{**READY_UNIT, "unitImageUrl": None})
    refused = await act(api, no_image["id"], action="publish", channels=["website"])
    assert "channels.website.image" in await errors_of(refused)
    # A label asks nothing more than section 7's rules.
    label = unique("label")
    await api.add_channel(label)
    assert (await act(api, no_image["id"], action="publish", channels=[label])).status_code == 422
    ready = await api.create_unit(**META_READY)
    published = await act(api, ready["id"], action="publish", channels=["website", meta])
    assert published.status_code == 200, published.text


async def test_a_units_channels_say_whether_it_is_live_and_what_is_missing(api: Api) -> None:
    meta = unique("meta")
    await api.add_channel(meta, "meta-catalog", urlTemplate="https://homes.example/u/{id}")
    label = unique("label")
    await api.add_channel(label)
    unit = await api.create_unit(**META_READY)
    unit_id = unit["id"]
    assert (
        await act(api, unit_id, action="publish", channels=["website", meta, label])
    ).status_code == 200
    standing = await api.request("GET", f"{UNITS}/{unit_id}/channels")
    assert standing.status_code == 200, standing.text
    rows = {row["channel"]: row for row in standing.json()["data"]}
    assert list(rows) == ["website", meta, label]
    assert rows["website"]["live"] and rows["website"]["missing"] == []
    assert rows["website"]["url"] == f"http://units.test/listings/{unit_id}"
    assert rows[meta]["url"] == f"https://homes.example/u/{unit_id}"
    assert rows[label] == {
        "channel": label,
        "kind": "label",
        "live": True,
        "url": None,
        "missing": [],
    }
    # An edit that clears a field takes the unit off the channels that need it.
    await api.request("PATCH", f"{UNITS}/{unit_id}", json={"city": None, "country": None})
    rows = {
        row["channel"]: row
        for row in (await api.request("GET", f"{UNITS}/{unit_id}/channels")).json()["data"]
    }
    assert (rows["website"]["live"], rows["website"]["missing"]) == (False, ["city"])
    assert (rows[meta]["live"], rows[meta]["missing"]) == (False, ["city", "country"])
    assert rows[label]["live"] is True
    await api.request("PATCH", f"{UNITS}/{unit_id}", json={"city": "Cairo"})
    blocked = await api.request(
        "PUT", f"{UNITS}/availability-actions/{unit_id}", json={"action": "block"}
    )
    assert blocked.status_code == 200, blocked.text
    rows = {
        row["channel"]: row
        for row in (await api.request("GET", f"{UNITS}/{unit_id}/channels")).json()["data"]
    }
    assert rows["website"] == {**rows["website"], "live": False, "missing": []}
    # Outside a key's policy the unit does not exist.
    key = await api.create_key("units:read", policy="city==Nowhere")
    hidden = await api.request("GET", f"{UNITS}/{unit_id}/channels", key=key)
    assert hidden.status_code == 404


async def test_deleting_a_channel_takes_it_off_every_unit_with_events(api: Api) -> None:
    name = unique("partners")
    await api.add_channel(name)
    follower = await api.create_key("events:read", policy=f"channel=={name}")
    start, follower_start = await feed_end(api), await feed_end(api, follower)
    units = [await api.create_unit(**READY_UNIT) for _ in range(3)]
    for unit in units[:2]:
        assert (
            await act(api, unit["id"], action="publish", channels=["website", name])
        ).status_code == 200
    deleted = await api.request("DELETE", f"{CHANNELS}/{name}")
    assert deleted.status_code == 204
    assert (await api.request("GET", f"{CHANNELS}/{name}")).status_code == 404
    for unit in units[:2]:
        stored = (await api.request("GET", f"{UNITS}/{unit['id']}")).json()
        assert stored["publishing"]["channels"] == ["website"]
        assert stored["publishing"]["status"] == "published"
        assert stored["version"] == 3
        history = (await api.request("GET", f"{UNITS}/{unit['id']}/history")).json()["data"]
        assert history[0]["action"] == "channel-delete"
        assert history[0]["changes"]["publishing"]["to"]["channels"] == ["website"]
    untouched = (await api.request("GET", f"{UNITS}/{units[2]['id']}")).json()
    assert untouched["version"] == 1
    found, _ = await follow(api, start)
    for unit in units[:2]:
        (last,) = of(found, unit["id"])[-1:]
        assert last["type"] == "unit.updated"
        assert last["data"]["changes"]["publishing"]["from"]["channels"] == ["website", name]
    assert [e["data"]["name"] for e in found if e["type"] == "channel.deleted"] == [name]
    # The follower whose policy names the channel is told each unit left it.
    seen, _ = await follow(api, follower_start, key=follower)
    for unit in units[:2]:
        assert [(e["type"], e.get("left", False)) for e in of(seen, unit["id"])] == [
            ("unit.published", False),
            ("unit.updated", True),
        ]
    assert not [e for e in seen if e["type"].startswith("channel.")]


async def test_the_live_filter_agrees_with_a_units_standing(api: Api) -> None:
    """The rules as a filter (what pages, sitemaps and feeds list) pick exactly the units the
    one-unit rules call live."""
    meta = unique("meta")
    await api.add_channel(meta, "meta-catalog")
    town = unique("Town")
    bodies = [
        {**META_READY, "city": town},
        {**META_READY, "city": town, "unitImageUrl": None, "gallery": ["https://c.example/g.jpg"]},
        {**META_READY, "city": town, "unitDesc": None, "unitShortDesc": "Short."},
        {**META_READY, "city": town},
        {**META_READY, "city": town},
        {**META_READY, "city": town},
    ]
    ids = [(await api.create_unit(**body))["id"] for body in bodies]
    for unit_id in ids[:5]:
        published = await act(api, unit_id, action="publish", channels=["website", meta])
        assert published.status_code == 200, published.text
    await api.request("PATCH", f"{UNITS}/{ids[3]}", json={"price": 0, "country": None})
    await api.request("PUT", f"{UNITS}/availability-actions/{ids[4]}", json={"action": "block"})
    for kind, name in (("website", "website"), ("meta-catalog", meta)):
        rule = readiness.live_filter(kind, [name])
        listed = await api.request(
            "GET", f"{UNITS}/", params={"p": f'{rule};city=="{town}"', "limit": 50}
        )
        assert listed.status_code == 200, listed.text
        chosen = {unit["id"] for unit in listed.json()["data"]}
        standing = set()
        for unit_id in ids:
            rows = (await api.request("GET", f"{UNITS}/{unit_id}/channels")).json()["data"]
            standing |= {unit_id for row in rows if row["channel"] == name and row["live"]}
        assert chosen == standing
        assert chosen == set(ids[:3])
