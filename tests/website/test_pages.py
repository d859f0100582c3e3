"""The website's pages (section 17): one page per live unit and the listings, in English and
Arabic, with their structured data read as tools read it (extruct), 404 and 410 as the
contract says, caching headers, hostile texts and bad searches; on both databases."""

from __future__ import annotations

import re
import uuid
from typing import Any

import extruct
import pytest

from tests.conftest import READY_UNIT, Api, start_api
from units_api.config import Settings

UNITS = "/api/v2/units"
SECRET_READING = "meter-7731-private"


def town() -> str:
    return f"Town {uuid.uuid4().hex[:8]}"


def listed(**fields: Any) -> dict[str, Any]:
    return {
        **READY_UNIT,
        "name": "Garden Villa",
        "unitNameAr": "فيلا الحديقة",
        "type": "villa",
        "price": 4850000,
        "currency": "EGP",
        "country": "EG",
        "location": "Fifth Settlement",
        "bedrooms": 4,
        "bathrooms": 3,
        "surface": 310.5,
        "guaranty": 777123,
        "unitDesc": "A villa with a garden and a pool.",
        "unitDescAr": "فيلا بحديقة ومسبح.",
        "unitLocation": {"type": "Point", "coordinates": [31.47, 30.03]},
        "gallery": ["https://cdn.example.com/g/1.jpg", "https://cdn.example.com/g/2.jpg"],
        "specs": [
            {"featureType": "garden", "featureDesc": "Private garden", "active": True},
            {"featureType": "elevator", "featureDesc": "Hidden spec text", "active": False},
        ],
        "paymentPlans": [
            {
                "planName": "Ten years",
                "downPayment": 485000,
                "installmentsValue": 36375,
                "active": True,
            },
            {"planName": "Withdrawn plan", "active": False},
        ],
        "floorsPlan": [
            {
                "floorName": "Ground floor",
                "rooms": 3,
                "floorImage": "https://cdn.example.com/f/0.png",
            }
        ],
        "readings": [{"service": "water", "Notes": SECRET_READING}],
        **fields,
    }


async def publish(api: Api, unit_id: str, channels: list[str] | None = None) -> None:
    body = {"action": "publish", "channels": channels or ["website"]}
    answer = await api.request("PUT", f"{UNITS}/publishing-actions/{unit_id}", json=body)
    assert answer.status_code == 200, answer.text


async def page(api: Api, path: str, **headers: str) -> Any:
    return await api.client.get(path, headers=headers)


def jsonld_of(html: str, url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = extruct.extract(html, base_url=url, syntaxes=["json-ld"])[
        "json-ld"
    ]
    return found


async def test_a_live_units_page_in_english_and_arabic(api: Api) -> None:
    unit = await api.create_unit(**listed())
    await publish(api, unit["id"])
    url = f"http://units.test/listings/{unit['id']}"
    answer = await page(api, f"/listings/{unit['id']}")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert answer.headers["cache-control"] == "public, max-age=60, stale-while-revalidate=600"
    html = answer.text
    assert '<html lang="en" dir="ltr">' in html
    assert "<title>Garden Villa · Cairo</title>" in html
    assert f'<link rel="canonical" href="{url}">' in html
    assert (
        f'<link rel="alternate" hreflang="ar" href="http://units.test/ar/listings/{unit["id"]}">'
        in html
    )
    assert f'<link rel="alternate" hreflang="x-default" href="{url}">' in html
    assert '<meta property="og:image" content="https://cdn.example.com/u/1.jpg">' in html
    assert f'<meta property="og:url" content="{url}">' in html
    assert "4,850,000 EGP" in html
    for shown in (
        "Private garden",
        "Ten years",
        "Ground floor",
        "https://cdn.example.com/g/2.jpg",
        "https://cdn.example.com/f/0.png",
    ):
        assert shown in html
    for hidden in (SECRET_READING, "777,123", "777123", "Hidden spec text", "Withdrawn plan"):
        assert hidden not in html
    (data,) = jsonld_of(html, url)
    assert data["@type"] == "RealEstateListing"
    assert data["url"] == url
    assert data["name"] == "Garden Villa"
    assert (
        data["datePosted"]
        == (await api.request("GET", f"{UNITS}/{unit['id']}")).json()["publishing"]["publishedAt"]
    )
    assert data["offers"] == {
        "@type": "Offer",
        "price": 4850000,
        "priceCurrency": "EGP",
        "availability": "https://schema.org/InStock",
        "businessFunction": "http://purl.org/goodrelations/v1#Sell",
        "url": url,
    }
    about = data["about"]
    assert about["@type"] == "SingleFamilyResidence"
    assert (about["numberOfBedrooms"], about["numberOfBathroomsTotal"]) == (4, 3)
    assert about["floorSize"] == {"@type": "QuantitativeValue", "value": 310.5, "unitCode": "MTK"}
    assert about["geo"] == {"@type": "GeoCoordinates", "latitude": 30.03, "longitude": 31.47}
    assert about["address"]["addressCountry"] == "EG"
    assert data["image"][0] == "https://cdn.example.com/u/1.jpg"

    arabic = await page(api, f"/ar/listings/{unit['id']}/garden-villa")
    assert arabic.status_code == 200
    assert '<html lang="ar" dir="rtl">' in arabic.text
    assert "فيلا الحديقة" in arabic.text
    assert "القاهرة" in arabic.text  # the city's Arabic name
    (data,) = jsonld_of(arabic.text, f"http://units.test/ar/listings/{unit['id']}")
    assert data["name"] == "فيلا الحديقة"
    assert data["inLanguage"] == "ar"
    assert (
        f'<link rel="canonical" href="http://units.test/ar/listings/{unit["id"]}">' in arabic.text
    )


async def test_states_answer_200_404_or_410(api: Api) -> None:
    async def status(unit_id: str) -> int:
        return int((await page(api, f"/listings/{unit_id}")).status_code)

    draft = await api.create_unit(**listed())
    assert await status(draft["id"]) == 404
    assert await status(str(uuid.uuid4())) == 404
    assert (await page(api, "/listings/not-a-uuid")).status_code == 404
    reserved = await api.create_unit(**listed())
    await publish(api, reserved["id"])
    body = {"action": "reserve", "until": "2099-01-01T00:00:00Z"}
    answer = await api.request("PUT", f"{UNITS}/availability-actions/{reserved['id']}", json=body)
    assert answer.status_code == 200, answer.text
    answer = await page(api, f"/listings/{reserved['id']}")
    assert answer.status_code == 200
    (data,) = jsonld_of(answer.text, "http://units.test/")
    assert data["offers"]["availability"] == "https://schema.org/Reserved"
    sold = {"action": "sell"}
    answer = await api.request("PUT", f"{UNITS}/availability-actions/{reserved['id']}", json=sold)
    assert answer.status_code == 200, answer.text
    (data,) = jsonld_of((await page(api, f"/listings/{reserved['id']}")).text, "http://units.test/")
    assert data["offers"]["availability"] == "https://schema.org/SoldOut"

    async def gone_after(change: Any) -> None:
        unit = await api.create_unit(**listed())
        await publish(api, unit["id"])
        assert await status(unit["id"]) == 200
        await change(unit["id"])
        gone = await page(api, f"/listings/{unit['id']}")
        assert gone.status_code == 410, unit
        assert "This home is no longer listed" in gone.text
        arabic = await page(api, f"/ar/listings/{unit['id']}")
        assert arabic.status_code == 410
        assert "هذا المنزل لم يعد معروضًا" in arabic.text

    async def act(axis: str, action: str) -> Any:
        async def run(unit_id: str) -> None:
            answer = await api.request(
                "PUT", f"{UNITS}/{axis}-actions/{unit_id}", json={"action": action}
            )
            assert answer.status_code == 200, answer.text

        return run

    await gone_after(await act("publishing", "unpublish"))
    await gone_after(await act("publishing", "archive"))
    await gone_after(await act("availability", "block"))

    async def deleted(unit_id: str) -> None:
        assert (await api.request("DELETE", f"{UNITS}/{unit_id}")).status_code == 204

    async def off_the_website(unit_id: str) -> None:
        await api.add_channel("app")
        await publish(api, unit_id, ["app"])

    async def unready(unit_id: str) -> None:
        answer = await api.request("PATCH", f"{UNITS}/{unit_id}", json={"city": None})
        assert answer.status_code == 200

    for change in (deleted, off_the_website, unready):
        await gone_after(change)
    never = await api.create_unit(**listed())
    await deleted(never["id"])
    assert await status(never["id"]) == 404


async def test_pages_answer_304_to_a_current_copy(api: Api) -> None:
    unit = await api.create_unit(**listed())
    await publish(api, unit["id"])
    first = await page(api, f"/listings/{unit['id']}")
    tag, modified = first.headers["etag"], first.headers["last-modified"]
    assert (await page(api, f"/listings/{unit['id']}", **{"If-None-Match": tag})).status_code == 304
    since = await page(api, f"/listings/{unit['id']}", **{"If-Modified-Since": modified})
    assert since.status_code == 304
    assert since.headers["etag"] == tag
    arabic = await page(api, f"/ar/listings/{unit['id']}", **{"If-None-Match": tag})
    assert arabic.status_code == 200  # another language, another tag
    await api.request("PATCH", f"{UNITS}/{unit['id']}", json={"price": 4700000})
    changed = await page(api, f"/listings/{unit['id']}", **{"If-None-Match": tag})
    assert changed.status_code == 200
    assert "4,700,000 EGP" in changed.text
    index = await page(api, "/listings/")
    again = await page(api, "/listings/", **{"If-None-Match": index.headers["etag"]})
    assert again.status_code == 304


async def test_a_units_texts_cannot_break_out_of_the_page(api: Api) -> None:
    hostile = '</script><script>alert(1)</script><img src=x onerror=alert(2)> & "quotes"'
    unit = await api.create_unit(
        **listed(name=hostile, unitDesc=hostile, unitNameAr=hostile, location=hostile)
    )
    await publish(api, unit["id"])
    for path in (f"/listings/{unit['id']}", f"/ar/listings/{unit['id']}"):
        html = (await page(api, path)).text
        assert "<script>alert(1)" not in html
        assert "<img src=x" not in html
        assert len(re.findall(r"<script\b", html)) == 1  # the JSON-LD block, whole
        (data,) = jsonld_of(html, "http://units.test/")
        assert data["name"] == hostile


async def test_the_listings_search_in_both_languages(api: Api) -> None:
    place = town()
    bodies = [
        listed(city=place, name="Lake Villa", price=3000000, bedrooms=3),
        listed(city=place, name="Hill Apartment", type="apartment", price=1500000, bedrooms=2),
        listed(city=place, name="Sea Studio", type="studio", price=900000, bedrooms=0),
    ]
    ids = []
    for body in bodies:
        unit = await api.create_unit(**body)
        await publish(api, unit["id"])
        ids.append(unit["id"])
    hidden = await api.create_unit(**listed(city=place, name="Draft Villa"))

    async def found(path: str = "/listings/", **params: str) -> list[str]:
        answer = await api.client.get(path, params={"city": place, **params})
        assert answer.status_code == 200, answer.text
        return re.findall(r'/listings/([0-9a-f-]{36})">', answer.text)

    assert await found() == list(reversed(ids))  # newest first
    assert hidden["id"] not in await found()
    assert await found(type="apartment") == [ids[1]]
    assert await found(minPrice="1000000", maxPrice="3000000") == [ids[1], ids[0]]
    assert await found(bedrooms="0") == [ids[2]]
    assert await found(q="lake") == [ids[0]]
    assert await found("/ar/listings/", type="villa") == [ids[0]]
    arabic = await api.client.get("/ar/listings/", params={"city": place})
    assert '<html lang="ar" dir="rtl">' in arabic.text
    assert f"/ar/listings/{ids[0]}" in arabic.text
    cairo = await api.client.get("/ar/listings/", params={"city": "القاهرة", "q": "Garden"})
    assert cairo.status_code == 200


@pytest.mark.parametrize(
    "params",
    [
        {"page": "0"},
        {"page": str(10**9)},
        {"page": "abc"},
        {"minPrice": "abc"},
        {"maxPrice": "-1"},
        {"bedrooms": "1.5"},
        {"q": "x" * 10_000},
        {"city": "y" * 1_000},
    ],
)
async def test_bad_searches_are_html_400s_in_the_pages_language(
    api: Api, params: dict[str, str]
) -> None:
    for path, words in (
        ("/listings/", "This search could not be read"),
        ("/ar/listings/", "تعذرت قراءة هذا البحث"),
    ):
        answer = await api.client.get(path, params=params)
        # A URL longer than any server takes is refused before routing, as a page too.
        assert answer.status_code == (414 if len(str(answer.url)) > 8192 else 400), (path, params)
        assert answer.headers["content-type"].startswith("text/html")
        assert words in answer.text


async def test_a_page_past_the_last_is_404(api: Api) -> None:
    answer = await api.client.get("/listings/", params={"city": town(), "page": "2"})
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("text/html")


async def test_one_address_is_limited(database_url: str) -> None:
    settings = Settings(database_url=database_url, access_log=False, public_rate_limit="3/minute")
    async for api in start_api(settings):
        codes = [
            (await api.client.get("/listings/", params={"city": town()})).status_code
            for _ in range(4)
        ]
        assert codes == [200, 200, 200, 429]
        refused = await api.client.get(f"/ar/listings/{uuid.uuid4()}")
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert "طلبات كثيرة جدًا" in refused.text


async def test_a_kept_page_follows_the_channels_and_display_names(api: Api) -> None:
    place = town()
    unit = await api.create_unit(**listed(city=place))
    outlet = f"outlet-{uuid.uuid4().hex[:8]}"
    await api.add_channel(outlet)
    await publish(api, unit["id"], [outlet])
    path = f"/listings/{unit['id']}"
    assert (await page(api, path)).status_code == 410  # published, but to no website
    await api.add_channel(outlet, "website")
    shown = await page(api, path)
    assert shown.status_code == 200
    assert place in shown.text
    named = await api.request(
        "PUT", f"/api/v2/display-names/city/{place}", json={"en": "Lakeside", "ar": "ضفة البحيرة"}
    )
    assert named.status_code in (200, 201), named.text
    again = await page(api, path)
    assert "Lakeside" in again.text
    assert "ضفة البحيرة" in (await page(api, f"/ar/listings/{unit['id']}")).text
    await api.add_channel(outlet, "label")
    assert (await page(api, path)).status_code == 410


async def test_any_slug_after_the_id_is_the_same_page(api: Api) -> None:
    unit = await api.create_unit(**listed())
    await publish(api, unit["id"])
    for slug in ("garden-villa", "a/b/c", "line%0Abreak", "%D9%81%D9%8A%D9%84%D8%A7"):
        answer = await page(api, f"/listings/{unit['id']}/{slug}")
        assert answer.status_code == 200, slug
        assert (
            f'<link rel="canonical" href="http://units.test/listings/{unit["id"]}">' in answer.text
        )
    too_long = await page(api, f"/ar/listings/{unit['id']}/{'x' * 400}")
    assert too_long.status_code == 404
    assert too_long.headers["content-type"].startswith("text/html")


async def test_a_kept_listings_page_follows_every_change(api: Api) -> None:
    """The listings are kept per change of the units, the website channels and the display
    names: each change shows at once, in both languages."""
    place = town()

    async def shown(path: str = "/listings/") -> str:
        answer = await api.client.get(path, params={"city": place})
        assert answer.status_code == 200, answer.text
        return str(answer.text)

    # None yet: a page without units, kept too.
    assert re.findall(r'/listings/([0-9a-f-]{36})">', await shown()) == []
    first = await api.create_unit(**listed(city=place, name="First Villa"))
    assert "First Villa" not in await shown()  # a draft
    await publish(api, first["id"])
    assert "First Villa" in await shown()
    assert "First Villa" in await shown()  # kept, and the same
    second = await api.create_unit(**listed(city=place, name="Second Villa"))
    await publish(api, second["id"])
    assert "Second Villa" in await shown()
    renamed = await api.request("PATCH", f"{UNITS}/{first['id']}", json={"name": "Renamed Villa"})
    assert renamed.status_code == 200, renamed.text
    text = await shown()
    assert "Renamed Villa" in text and "First Villa" not in text
    named = await api.request(
        "PUT", f"/api/v2/display-names/city/{place}", json={"en": "Lakeside", "ar": "ضفة البحيرة"}
    )
    assert named.status_code in (200, 201), named.text
    assert "Lakeside" in await shown()
    assert "ضفة البحيرة" in await shown("/ar/listings/")
    outlet = f"outlet-{uuid.uuid4().hex[:8]}"
    await api.add_channel(outlet, "website")
    await publish(api, second["id"], [outlet])
    assert "Second Villa" in await shown()  # on the new website channel
    await api.add_channel(outlet, "label")
    assert "Second Villa" not in await shown()  # that channel is no website now
