"""robots.txt and the sitemaps (section 17) through the app, on both databases: which units
they carry, the files' split, the XML as sitemaps.org and hreflang alternates have it,
escaping, entity tags and gzip."""

from __future__ import annotations

import gzip
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator

import pytest

from tests.conftest import READY_UNIT, Api, start_api
from units_api.config import Settings
from units_api.sitemaps import service

UNITS = "/api/v2/units"
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
XHTML = "{http://www.w3.org/1999/xhtml}"


async def publish(api: Api, unit_id: str, *channels: str) -> None:
    response = await api.request(
        "PUT",
        f"{UNITS}/publishing-actions/{unit_id}",
        json={"action": "publish", "channels": list(channels or ["website"])},
    )
    assert response.status_code == 200, response.text


async def act(api: Api, unit_id: str, path: str, action: str) -> None:
    response = await api.request("PUT", f"{UNITS}/{path}/{unit_id}", json={"action": action})
    assert response.status_code == 200, response.text


async def units_in_every_state(api: Api) -> tuple[list[str], list[str]]:
    """Units live on the website, and units that are not (each for another reason)."""
    label = f"shop-{uuid.uuid4().hex[:8]}"
    await api.add_channel(label)
    live = [(await api.create_unit(**READY_UNIT))["id"] for _ in range(3)]
    for unit_id in live:
        await publish(api, unit_id)
    await act(api, live[1], "availability-actions", "sell")  # sold: its page stays
    draft, unpublished, blocked, unready, labelled = [
        (await api.create_unit(**READY_UNIT))["id"] for _ in range(5)
    ]
    await publish(api, unpublished)
    await act(api, unpublished, "publishing-actions", "unpublish")
    await publish(api, blocked)
    await act(api, blocked, "availability-actions", "block")
    await publish(api, unready)
    cleared = await api.request("PATCH", f"{UNITS}/{unready}", json={"unitImageUrl": None})
    assert cleared.status_code == 200, cleared.text
    await publish(api, labelled, label)
    return live, [draft, unpublished, blocked, unready, labelled]


def pages(base: str, unit_ids: list[str]) -> set[str]:
    return {f"{base}{path}{unit}" for unit in unit_ids for path in ("/listings/", "/ar/listings/")}


async def read_xml(api: Api, url: str) -> ET.Element:
    response = await api.client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/xml; charset=utf-8"
    return ET.fromstring(response.content)


async def crawl(api: Api, base: str) -> list[ET.Element]:
    """Every sitemap file the index names, in its order."""
    index = await read_xml(api, "/sitemap.xml")
    assert index.tag == f"{SITEMAP}sitemapindex"
    locations = [entry.findtext(f"{SITEMAP}loc") for entry in index]
    assert all(entry.tag == f"{SITEMAP}sitemap" for entry in index)
    files = []
    for location in locations:
        assert location is not None and location.startswith(f"{base}/sitemaps/")
        files.append(await read_xml(api, location.removeprefix(base)))
    return files


def urls_of(files: list[ET.Element]) -> list[str]:
    return [url.findtext(f"{SITEMAP}loc") or "" for file in files for url in file]


async def test_robots_allows_the_pages_and_names_the_sitemap(api: Api) -> None:
    response = await api.client.get("/robots.txt")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == (
        "User-agent: *\n"
        "Allow: /listings/\n"
        "Allow: /ar/listings/\n"
        "Disallow: /api/\n"
        "Disallow: /console/\n"
        "\n"
        "Sitemap: http://units.test/sitemap.xml\n"
    )
    head = await api.client.head("/robots.txt")
    assert head.status_code == 200
    assert head.headers["content-length"] == str(len(response.content))


async def test_the_sitemaps_carry_exactly_the_live_units_in_both_languages(api: Api) -> None:
    live, not_live = await units_in_every_state(api)
    found = urls_of(await crawl(api, "http://units.test"))
    assert len(found) == len(set(found))  # each page once
    assert pages("http://units.test", live) <= set(found)
    assert not pages("http://units.test", not_live) & set(found)


async def test_each_url_has_its_time_and_the_alternates_of_both_languages(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    await publish(api, unit["id"])
    read = (await api.request("GET", f"{UNITS}/{unit['id']}")).json()
    english = f"http://units.test/listings/{unit['id']}"
    arabic = f"http://units.test/ar/listings/{unit['id']}"
    entries = {
        url.findtext(f"{SITEMAP}loc"): url
        for file in await crawl(api, "http://units.test")
        for url in file
    }
    for page in (english, arabic):
        url = entries[page]
        assert [child.tag for child in url][:2] == [f"{SITEMAP}loc", f"{SITEMAP}lastmod"]
        lastmod = url.findtext(f"{SITEMAP}lastmod") or ""
        assert lastmod == read["updatedAt"]  # as the API writes it
        alternates = [
            (link.get("rel"), link.get("hreflang"), link.get("href"))
            for link in url.findall(f"{XHTML}link")
        ]
        assert alternates == [
            ("alternate", "en", english),
            ("alternate", "ar", arabic),
            ("alternate", "x-default", english),
        ]


@pytest.fixture
async def odd_base_api(settings: Settings) -> AsyncIterator[Api]:
    odd = settings.model_copy(update={"public_base_url": "https://homes.example/a&b'<c>\""})
    async for instance in start_api(odd):
        yield instance


async def test_a_base_url_of_any_characters_is_escaped(odd_base_api: Api) -> None:
    api = odd_base_api
    base = "https://homes.example/a&b'<c>\""
    unit = await api.create_unit(**READY_UNIT)
    await publish(api, unit["id"])
    robots = (await api.client.get("/robots.txt")).text
    assert "Allow: /a&b'<c>\"/listings/\n" in robots
    assert robots.endswith(f"Sitemap: {base}/sitemap.xml\n")
    raw = (await api.client.get("/sitemap.xml")).text
    assert "a&amp;b&apos;&lt;c&gt;&quot;" in raw
    files = await crawl(api, base)
    found = urls_of(files)
    assert pages(base, [unit["id"]]) <= set(found)
    links = {link.get("href") for file in files for link in file.iter(f"{XHTML}link")}
    assert pages(base, [unit["id"]]) <= links


async def test_files_hold_at_most_their_share_and_together_every_page(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "UNITS_PER_FILE", 3)
    monkeypatch.setattr(service, "BATCH", 2)
    live, not_live = await units_in_every_state(api)
    more = [(await api.create_unit(**READY_UNIT))["id"] for _ in range(5)]
    for unit_id in more:
        await publish(api, unit_id)
    files = await crawl(api, "http://units.test")
    assert len(files) >= 3
    assert all(len(file) <= 6 for file in files)
    found = urls_of(files)
    assert len(found) == len(set(found))
    assert pages("http://units.test", live + more) <= set(found)
    assert not pages("http://units.test", not_live) & set(found)
    # Each file's pages come in id order, after the unit its name starts after.
    index = await read_xml(api, "/sitemap.xml")
    names = [(entry.findtext(f"{SITEMAP}loc") or "").rsplit("/", 1)[1] for entry in index]
    assert names[0] == "listings-start.xml"
    for name, file in zip(names[1:], files[1:], strict=True):
        after = name.removeprefix("listings-after-").removesuffix(".xml")
        ids = [(url.findtext(f"{SITEMAP}loc") or "").rsplit("/", 1)[1] for url in file]
        assert all(uuid.UUID(unit) > uuid.UUID(after) for unit in ids)


def test_a_file_is_never_past_50_megabytes_whatever_the_base() -> None:
    short = service.units_per_file("https://h.example")
    assert short == service.UNITS_PER_FILE
    long_base = "https://homes.example/" + "x" * 1500
    count = service.units_per_file(long_base)
    entry = service._unit_entry(long_base, str(uuid.uuid4()), "2026-11-28T10:00:00.000Z")
    assert count < service.UNITS_PER_FILE
    assert count * len(entry.encode()) <= service.MAX_FILE_BYTES - 200


@pytest.mark.parametrize(
    "name",
    [
        "listings-after-not-a-uuid.xml",
        "listings-after-0189C5B8-3A2B-7C4D-8E9F-0123456789AB.xml",  # not the canonical form
        "listings-after-ffffffff-ffff-ffff-ffff-ffffffffffff.xml",  # nothing after it
        "listings.xml",
        "other.xml",
    ],
)
async def test_a_file_that_is_not_or_no_longer_is_answers_404(api: Api, name: str) -> None:
    response = await api.client.get(f"/sitemaps/{name}")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_entity_tags_answer_304_until_a_unit_changes(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    first = await api.client.get("/sitemap.xml")
    tag = first.headers["etag"]
    again = await api.client.get("/sitemap.xml", headers={"If-None-Match": tag})
    assert again.status_code == 304
    assert again.headers["etag"] == tag
    file = await api.client.get("/sitemaps/listings-start.xml")
    assert file.headers["etag"] != tag
    await publish(api, unit["id"])
    changed = await api.client.get("/sitemap.xml", headers={"If-None-Match": tag})
    assert changed.status_code == 200
    assert changed.headers["etag"] != tag


async def test_gzip_when_asked(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    await publish(api, unit["id"])
    asked = await api.client.get(
        "/sitemaps/listings-start.xml", headers={"Accept-Encoding": "gzip"}
    )
    assert asked.headers["content-encoding"] == "gzip"
    plain = await api.client.get(
        "/sitemaps/listings-start.xml", headers={"Accept-Encoding": "gzip;q=0, identity"}
    )
    assert "content-encoding" not in plain.headers
    assert asked.content == plain.content  # httpx decodes gzip
    raw = await api.client.send(
        api.client.build_request(
            "GET", "/sitemaps/listings-start.xml", headers={"Accept-Encoding": "gzip"}
        ),
        stream=True,
    )
    packed = b"".join([chunk async for chunk in raw.aiter_raw()])
    await raw.aclose()
    assert gzip.decompress(packed) == plain.content


async def test_the_key_file_is_only_there_with_a_key(api: Api) -> None:
    assert (await api.client.get("/abcdefgh.txt")).status_code == 404
    assert (await api.client.get("/robots.txt")).status_code == 200
