"""A listing page and the listings in Chromium, in English and Arabic: what a buyer sees,
the search without JavaScript, the structured data as extruct reads it from the rendered
page; and Lighthouse's SEO and accessibility scores."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from typing import Any

import extruct
import pytest

from tests.conftest import REQUIRE_SERVICES
from tests.website.conftest import Site, chromium_path, lighthouse_path

# A 1x1 PNG, the browser's answer for every picture on another host (the tests have no
# network beyond loopback).
PICTURE = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(java_script_enabled=False)
    context.route(
        "https://**/*", lambda route: route.fulfill(body=PICTURE, content_type="image/png")
    )
    opened = context.new_page()
    errors: list[str] = []
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield opened
    context.close()
    # A bad search's page keeps its 400, which Chromium logs: the page working as meant.
    assert [error for error in errors if "status of 400" not in error] == []


def test_a_listing_page_in_english_and_arabic(page: Any, site: Site) -> None:
    url = f"{site.base}/listings/{site.unit_id}"
    answer = page.goto(url)
    assert answer.status == 200
    assert page.locator("h1").inner_text() == "Garden Villa"
    assert "4,850,000 EGP" in page.locator(".price").inner_text()
    assert page.get_by_role("heading", name="Floor plans").count() == 1
    pictures = page.locator(".gallery img")
    assert pictures.count() == 4  # the unit's image, two gallery pictures, one floor plan
    pictures.first.wait_for()
    assert pictures.first.evaluate("image => image.complete && image.naturalWidth") == 1
    (data,) = extruct.extract(page.content(), base_url=url, syntaxes=["json-ld"])["json-ld"]
    assert data["@type"] == "RealEstateListing"
    assert data["offers"]["priceCurrency"] == "EGP"
    page.get_by_role("link", name="العربية").click()
    page.wait_for_url(re.compile(f"/ar/listings/{site.unit_id}$"))
    assert page.locator("html").get_attribute("dir") == "rtl"
    assert page.locator("h1").inner_text() == "فيلا الحديقة"
    assert site.arabic_city in page.locator("main").inner_text()
    (data,) = extruct.extract(page.content(), base_url=page.url, syntaxes=["json-ld"])["json-ld"]
    assert data["name"] == "فيلا الحديقة"


def test_searching_the_listings_without_javascript(page: Any, site: Site) -> None:
    page.goto(f"{site.base}/ar/listings/")
    assert page.locator("html").get_attribute("dir") == "rtl"
    page.get_by_label("النوع").select_option("apartment")
    page.get_by_role("button", name="اعرض المنازل").click()
    page.wait_for_url(re.compile("type=apartment"))
    cards = page.locator("ul.cards > li")
    assert cards.count() == 1
    assert cards.first.get_by_role("link").inner_text() == "شقة المتنزه"
    page.goto(f"{site.base}/listings/?minPrice=abc")
    assert page.locator("h1").inner_text() == "This search could not be read"


def run_lighthouse(url: str) -> dict[str, Any]:
    tool = lighthouse_path()
    chromium = chromium_path()
    if tool is None or chromium is None:
        reason = (
            "Lighthouse (npm i -E lighthouse@12.2.3 --prefix .venv/lighthouse) or Chromium missing"
        )
        if REQUIRE_SERVICES:
            pytest.fail(reason)
        pytest.skip(reason)
    done = subprocess.run(
        [
            tool,
            url,
            "--only-categories=seo,accessibility",
            "--output=json",
            "--output-path=stdout",
            "--quiet",
            "--chrome-flags=--headless=new --no-sandbox --disable-gpu",
        ],
        env={**os.environ, "CHROME_PATH": chromium},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def failing(report: dict[str, Any], category: str) -> list[str]:
    refs = report["categories"][category]["auditRefs"]
    audits = report["audits"]
    return [
        f"{ref['id']}: {audits[ref['id']].get('title')}"
        for ref in refs
        if ref["weight"] > 0 and audits[ref["id"]]["score"] not in (1, None)
    ]


@pytest.mark.parametrize(
    "path", ["/listings/{id}", "/ar/listings/{id}", "/listings/", "/ar/listings/"]
)
def test_lighthouse_seo_and_accessibility_are_full_marks(site: Site, path: str) -> None:
    report = run_lighthouse(site.base + path.format(id=site.unit_id))
    scores = {name: report["categories"][name]["score"] for name in ("seo", "accessibility")}
    assert scores == {"seo": 1, "accessibility": 1}, failing(report, "seo") + failing(
        report, "accessibility"
    )
