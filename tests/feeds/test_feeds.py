"""The home-listings feed of a meta-catalog channel (section 17), on both databases, through
the real app: credentials, the files against a checker written from Meta's field table,
the states, hostile texts, gzip and conditional requests."""

from __future__ import annotations

import base64
import gzip
import uuid
import xml.etree.ElementTree as ET
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import select, update

from tests.conftest import Api, start_api
from tests.feeds import meta_validator
from units_api.clock import format_time, utcnow
from units_api.config import Settings
from units_api.feeds import service
from units_api.feeds.listings import Channel
from units_api.http.json import dumps, load_stored
from units_api.units.tables import units

UNITS = "/api/v2/units"
META_READY: dict[str, Any] = {
    "name": "Ready Villa",
    "type": "villa",
    "city": "Cairo",
    "price": 2500000,
    "unitImageUrl": "https://cdn.example.com/u/1.jpg",
    "location": "Fifth Settlement",
    "unitDesc": "A villa with a garden.",
    "unitLocation": {"type": "Point", "coordinates": [31.47, 30.03]},
    "country": "EG",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def basic(user: str, password: str) -> dict[str, str]:
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {encoded}"}


class Feed:
    def __init__(self, api: Api, name: str, token: str) -> None:
        self.api, self.name, self.token = api, name, token

    async def get(self, extension: str = "xml", **headers: str) -> httpx.Response:
        return await self.api.client.get(
            f"/feeds/{self.name}.{extension}",
            headers={**basic(self.name, self.token), "Accept-Encoding": "identity", **headers},
        )

    async def listings(self, extension: str = "xml") -> dict[str, dict[str, str]]:
        response = await self.get(extension)
        assert response.status_code == 200, response.text
        parse = meta_validator.parse_xml if extension == "xml" else meta_validator.parse_csv
        return {listing["home_listing_id"]: listing for listing in parse(response.content)}

    async def publish(self, **fields: Any) -> str:
        unit_id: str = (await self.api.create_unit(**{**META_READY, **fields}))["id"]
        published = await self.api.request(
            "PUT",
            f"{UNITS}/publishing-actions/{unit_id}",
            json={"action": "publish", "channels": ["website", self.name]},
        )
        assert published.status_code == 200, published.text
        return unit_id


async def new_feed(api: Api, **settings: Any) -> Feed:
    name = unique("meta")
    created = await api.add_channel(name, "meta-catalog", **settings)
    return Feed(api, name, created["feedToken"])


async def act(api: Api, unit_id: str, machine: str, **body: Any) -> None:
    response = await api.request("PUT", f"{UNITS}/{machine}-actions/{unit_id}", json=body)
    assert response.status_code == 200, response.text


def refused(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith('Basic realm="feeds"')
    assert response.headers["content-type"].startswith("application/problem+json")
    detail: str = response.json()["detail"]
    return detail


async def test_wrong_or_missing_credentials_are_401_whatever_is_wrong(api: Api) -> None:
    feed = await new_feed(api)
    other = await new_feed(api)
    label = unique("label")
    await api.add_channel(label)
    path = f"/feeds/{feed.name}.xml"
    answers = [
        await api.client.get(path),
        await api.client.get(path, headers={"Authorization": f"Bearer {api.admin_key}"}),
        await api.client.get(path, headers={"Authorization": "Basic not-base64!"}),
        await api.client.get(
            path, headers={"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()}
        ),
        await api.client.get(path, headers=basic(feed.name, feed.token + "x")),
        await api.client.get(path, headers=basic(other.name, feed.token)),
        await api.client.get(path, headers=basic(feed.name, other.token)),
        await api.client.get(f"/feeds/{label}.csv", headers=basic(label, feed.token)),
        await api.client.get("/feeds/no-such-channel.xml", headers=basic("no-such-channel", "x")),
    ]
    details = {refused(answer) for answer in answers}
    assert len(details) == 1  # nothing tells which part was wrong
    assert (await feed.get()).status_code == 200
    assert (await feed.get("csv")).status_code == 200


async def test_rotating_the_token_or_deleting_the_channel_shuts_the_old_reader_out(
    api: Api,
) -> None:
    feed = await new_feed(api)
    assert (await feed.get()).status_code == 200
    rotated = await api.request("POST", f"/api/v2/channels/{feed.name}/rotate-token")
    new_token = rotated.json()["feedToken"]
    refused(await feed.get())
    feed.token = new_token
    assert (await feed.get()).status_code == 200
    # A meta-catalog turned into a label has no feed any more.
    assert (await api.add_channel(feed.name, "label"))["kind"] == "label"
    refused(await feed.get())
    deleted = await new_feed(api)
    assert (await api.request("DELETE", f"/api/v2/channels/{deleted.name}")).status_code == 204
    refused(await deleted.get())


async def test_both_files_pass_the_field_table_and_map_every_field(api: Api) -> None:
    feed = await new_feed(
        api,
        urlTemplate="https://homes.example.com/u/{id}?from=meta&x=1",
        propertyTypes={"VILLA": "house", "Duplex": "townhouse"},
    )
    gallery = [f"https://cdn.example.com/g/{index}.jpg" for index in range(25)]
    villa = await feed.publish(
        price=Decimal("4250000.50"),
        currency="AED",
        bedrooms=0,
        bathrooms=2,
        gallery=gallery,
        unitDesc="x" * 4999 + "e\u0301" + "y" * 10,
    )
    flat = await feed.publish(
        name="Rented Flat",
        type="apartment",
        offeringType="rent",
        price=1_000_000_000_000,
        unitImageUrl=None,
        gallery=["https://cdn.example.com/only.png"],
        unitDesc="   ",
        unitShortDesc="Short one.",
        unitLocation={"type": "Point", "coordinates": [-0.1276, 51.5072]},
    )
    duplex = await feed.publish(
        type="duplex", completionStatus="offPlan", handoverDate="2028-06-30"
    )
    for extension in ("xml", "csv"):
        listings = await feed.listings(extension)
        assert set(listings) == {villa, flat, duplex}
        first = listings[villa]
        assert first["name"] == "Ready Villa"
        assert first["availability"] == "for_sale"
        assert first["price"] == "4250000.50 AED"
        assert (first["address.addr1"], first["address.city"]) == ("Fifth Settlement", "Cairo")
        assert (first["address.region"], first["address.country"]) == ("Cairo", "EG")
        assert (first["latitude"], first["longitude"]) == ("30.03", "31.47")
        assert first["neighborhood[0]"] == "Fifth Settlement"
        images = [first[f"image[{index}].url"] for index in range(20)]
        assert images == ["https://cdn.example.com/u/1.jpg", *gallery[:19]]
        assert "image[20].url" not in first
        assert first["url"] == f"https://homes.example.com/u/{villa}?from=meta&x=1"
        # Cut at 5,000 characters, never between a letter and its accent.
        assert first["description"] == "x" * 4999
        assert (first["num_beds"], first["num_baths"]) == ("0", "2")
        assert first["property_type"] == "house"
        assert first["listing_type"] == "for_sale_by_agent"
        second = listings[flat]
        assert second["availability"] == "for_rent"
        assert second["price"] == "1000000000000 EGP"  # the server's default currency
        assert (second["latitude"], second["longitude"]) == ("51.5072", "-0.1276")
        assert second["image[0].url"] == "https://cdn.example.com/only.png"
        assert second["description"] == "Short one."
        assert second["property_type"] == "other"
        assert second["listing_type"] == "for_rent_by_agent"
        assert "num_beds" not in second
        third = listings[duplex]
        assert third["property_type"] == "townhouse"
        assert third["listing_type"] == "new_construction"
        assert third["url"] == f"https://homes.example.com/u/{duplex}?from=meta&x=1"


async def test_the_xml_is_in_meta_s_shape(api: Api) -> None:
    feed = await new_feed(api)
    unit_id = await feed.publish(gallery=["https://cdn.example.com/g/1.jpg"])
    response = await feed.get()
    assert response.headers["content-type"] == "application/xml; charset=utf-8"
    assert response.content.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    root = ET.fromstring(response.content)
    (listing,) = root.findall("listing")
    address = listing.find("address")
    assert address is not None and address.get("format") == "simple"
    assert [c.get("name") for c in address.findall("component")] == [
        "addr1",
        "city",
        "region",
        "country",
    ]
    assert [image.findtext("url") for image in listing.findall("image")] == [
        "https://cdn.example.com/u/1.jpg",
        "https://cdn.example.com/g/1.jpg",
    ]
    assert listing.findtext("url") == f"http://units.test/listings/{unit_id}"
    csv_response = await feed.get("csv")
    assert csv_response.headers["content-type"] == "text/csv; charset=utf-8"
    header = csv_response.content.decode().splitlines()[0].split(",")
    assert header[:9] == [
        "home_listing_id",
        "name",
        "availability",
        "address.addr1",
        "address.city",
        "address.region",
        "address.country",
        "latitude",
        "longitude",
    ]
    assert "neighborhood[0]" in header and "image[19].url" in header


async def sold_at(api: Api, unit_id: str, when: str) -> None:
    """The sale's time written into the stored unit, as if it were sold then."""
    async with api.context.db.transaction() as conn:
        key = uuid.UUID(unit_id)
        doc = (await conn.execute(select(units.c.doc).where(units.c.id == key))).scalar_one()
        unit = load_stored(doc)
        unit["availability"]["changedAt"] = when
        await conn.execute(update(units).where(units.c.id == key).values(doc=dumps(unit).decode()))


async def test_each_state_is_listed_as_meta_reads_it_or_left_out(api: Api) -> None:
    feed = await new_feed(api)
    available = await feed.publish()
    reserved = await feed.publish()
    await act(
        api,
        reserved,
        "availability",
        action="reserve",
        until=format_time(utcnow() + timedelta(days=1)),
    )
    sold = await feed.publish()
    await act(api, sold, "availability", action="sell")
    sold_long_ago = await feed.publish()
    await act(api, sold_long_ago, "availability", action="sell")
    await sold_at(api, sold_long_ago, format_time(utcnow() - timedelta(days=31)))
    sold_29_days_ago = await feed.publish()
    await act(api, sold_29_days_ago, "availability", action="sell")
    await sold_at(api, sold_29_days_ago, format_time(utcnow() - timedelta(days=29)))
    blocked = await feed.publish()
    await act(api, blocked, "availability", action="block")
    unpublished = await feed.publish()
    await act(api, unpublished, "publishing", action="unpublish")
    archived = await feed.publish()
    await act(api, archived, "publishing", action="archive")
    deleted = await feed.publish()
    assert (await api.request("DELETE", f"{UNITS}/{deleted}")).status_code == 204
    no_country = await feed.publish()
    await api.request("PATCH", f"{UNITS}/{no_country}", json={"country": None})
    no_image = await feed.publish()
    await api.request("PATCH", f"{UNITS}/{no_image}", json={"unitImageUrl": None})
    elsewhere = (await api.create_unit(**META_READY))["id"]
    await act(api, elsewhere, "publishing", action="publish", channels=["website"])
    draft = (await api.create_unit(**META_READY))["id"]
    for extension in ("xml", "csv"):
        listings = await feed.listings(extension)
        assert {unit: listing["availability"] for unit, listing in listings.items()} == {
            available: "for_sale",
            reserved: "sale_pending",
            sold: "recently_sold",
            sold_29_days_ago: "recently_sold",
        }
        assert not {elsewhere, draft} & set(listings)
    # A unit left out for a missing field is named on its channels page.
    for unit_id, lacking in ((no_country, ["country"]), (no_image, ["image"])):
        rows = (await api.request("GET", f"{UNITS}/{unit_id}/channels")).json()["data"]
        (row,) = [row for row in rows if row["channel"] == feed.name]
        assert (row["live"], row["missing"]) == (False, lacking)


HOSTILE = "Villa </listing><listing> & ]]> <![CDATA[ x ]]> \"q\" 'a' \x01\x08\x0b\x0c\x1f\ufffe end"
CLEANED = "Villa </listing><listing> & ]]> <![CDATA[ x ]]> \"q\" 'a'  end"


async def test_hostile_texts_give_well_formed_files_that_keep_them(api: Api) -> None:
    feed = await new_feed(api, urlTemplate="https://h.example/u/{id}?a=1&b=<2>")
    unit_id = await feed.publish(
        name=HOSTILE[:200],
        location="Zone ]]> & <b>",
        city="Cairo\r\nNew",
        unitDesc="Line one\r\nline two\ttabbed " + HOSTILE,
        gallery=["https://cdn.example.com/a.jpg?x=1&y=2"],
    )
    for extension in ("xml", "csv"):
        listing = (await feed.listings(extension))[unit_id]
        assert listing["name"] == CLEANED
        assert listing["address.addr1"] == listing["neighborhood[0]"] == "Zone ]]> & <b>"
        assert listing["address.city"] == "Cairo\r\nNew"
        assert listing["description"] == "Line one\r\nline two\ttabbed " + CLEANED
        assert listing["image[1].url"] == "https://cdn.example.com/a.jpg?x=1&y=2"
        assert listing["url"] == f"https://h.example/u/{unit_id}?a=1&b=<2>"
    body = (await feed.get()).content
    assert b"<listing>" in body and body.count(b"<listing>") == 1
    assert b"]]>" not in body


async def test_gzip_when_asked(api: Api) -> None:
    feed = await new_feed(api)
    await feed.publish()
    plain = await feed.get()
    assert "content-encoding" not in plain.headers
    assert plain.headers["vary"] == "Accept-Encoding"
    for extension in ("xml", "csv"):
        identity = await feed.get(extension)
        path = f"/feeds/{feed.name}.{extension}"
        headers = {**basic(feed.name, feed.token), "Accept-Encoding": "gzip"}
        async with feed.api.client.stream("GET", path, headers=headers) as response:
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
        assert response.headers["content-encoding"] == "gzip"
        assert response.headers["vary"] == "Accept-Encoding"
        assert gzip.decompress(raw) == identity.content
        assert response.headers["etag"] != identity.headers["etag"]
    refused_gzip = await feed.get(**{"Accept-Encoding": "gzip;q=0, identity"})
    assert "content-encoding" not in refused_gzip.headers


async def test_etag_and_last_modified_answer_304_until_something_changes(api: Api) -> None:
    feed = await new_feed(api)
    unit_id = await feed.publish()
    first = await feed.get()
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert first.headers["etag"] == (await feed.get()).headers["etag"]
    same = await feed.get(**{"If-None-Match": etag})
    assert (same.status_code, same.content, same.headers["etag"]) == (304, b"", etag)
    assert (await feed.get(**{"If-None-Match": f'"other", {etag}'})).status_code == 304
    assert (await feed.get(**{"If-Modified-Since": modified})).status_code == 304
    assert (await feed.get(**{"If-Modified-Since": "not a date"})).status_code == 200
    csv_first = await feed.get("csv")
    assert csv_first.headers["etag"] != etag
    # A change to a unit, then to the channel, gives a new tag and a later date.
    await api.request("PATCH", f"{UNITS}/{unit_id}", json={"name": "Renamed Villa"})
    changed = await feed.get(**{"If-None-Match": etag})
    assert changed.status_code == 200
    assert (await feed.listings())[unit_id]["name"] == "Renamed Villa"
    assert (
        await feed.get(**{"If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"})
    ).status_code == 200
    await api.add_channel(feed.name, "meta-catalog", propertyTypes={"villa": "house"})
    settings_changed = await feed.get(**{"If-None-Match": changed.headers["etag"]})
    assert settings_changed.status_code == 200
    assert (await feed.listings())[unit_id]["property_type"] == "house"
    # A deleted unit changes the tag too.
    tag = settings_changed.headers["etag"]
    assert (await api.request("DELETE", f"{UNITS}/{unit_id}")).status_code == 204
    assert (await feed.get(**{"If-None-Match": tag})).status_code == 200


async def test_a_sale_leaving_the_feed_with_time_changes_its_tag(api: Api) -> None:
    feed = await new_feed(api)
    unit_id = await feed.publish()
    await act(api, unit_id, "availability", action="sell")
    async with api.context.db.read() as conn:
        row = await service.channel_for(
            conn, feed.name, basic(feed.name, feed.token)["Authorization"]
        )
        now = utcnow()
        tags = []
        for moment in (now, now + timedelta(hours=1), now + timedelta(days=31)):
            listed = Channel.of(feed.name, orjson.loads(row["settings"]), "http://x", "EGP", moment)
            found = await service.validators(conn, row, "xml", listed, False)
            tags.append(found.etag)
            if moment == now + timedelta(days=31):
                assert found.last_modified > now + timedelta(days=29)
    # Within the 30 days the tag holds; once the sale has left the feed it changes.
    assert tags[0] == tags[1] != tags[2]


async def test_every_unit_once_across_batches(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches are ranges of ids whatever the units in them (other tests' units, drafts): a
    feed lists each of its units once, in id order, however they fall."""
    monkeypatch.setattr(service, "BATCH", 3)
    feed = await new_feed(api)
    ids = []
    for index in range(7):
        ids.append(await feed.publish(name=f"Batch Villa {index}"))
        await api.create_unit(**META_READY)  # a draft between them
    for extension in ("xml", "csv"):
        response = await feed.get(extension)
        parse = meta_validator.parse_xml if extension == "xml" else meta_validator.parse_csv
        listed = [listing["home_listing_id"] for listing in parse(response.content)]
        assert listed == sorted(ids)


@pytest.mark.parametrize("stored", ["no publishing", "not json", "unpublished"])
async def test_a_stored_unit_the_feed_cannot_read_is_left_out_and_the_rest_goes_out(
    api: Api, stored: str
) -> None:
    """A record written by other means than the service's writes: one the feed cannot read,
    or one whose document disagrees with the columns that selected it."""
    feed = await new_feed(api)
    kept, broken = await feed.publish(), await feed.publish()
    key = uuid.UUID(broken)
    async with api.context.db.transaction() as conn:
        doc = (await conn.execute(select(units.c.doc).where(units.c.id == key))).scalar_one()
        if stored == "no publishing":
            unreadable = dumps({"id": broken, "name": "no publishing"}).decode()
        elif stored == "not json":
            unreadable = doc[: len(doc) // 2]
        else:
            record = orjson.loads(doc)
            record["publishing"] = {**record["publishing"], "status": "draft", "channels": []}
            unreadable = dumps(record).decode()
        await conn.execute(update(units).where(units.c.id == key).values(doc=unreadable))
    try:
        for extension in ("xml", "csv"):
            assert set(await feed.listings(extension)) == {kept}
    finally:  # the table is shared: other tests read every unit's document
        async with api.context.db.transaction() as conn:
            await conn.execute(update(units).where(units.c.id == key).values(doc=doc))


async def test_one_address_is_limited_like_the_public_pages(database_url: str) -> None:
    settings = Settings(database_url=database_url, access_log=False, public_rate_limit="2/minute")
    async for api in start_api(settings):
        feed = await new_feed(api)
        codes = [(await feed.get()).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        refused = await feed.get("csv")
        assert refused.status_code == 429
        assert refused.headers["content-type"] == "application/problem+json"
        assert int(refused.headers["retry-after"]) >= 1
