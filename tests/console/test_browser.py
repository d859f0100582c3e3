"""What an inventory manager does, in headless Chromium: sign in, search in Arabic, draw a box
on the map, edit a price and meet someone else's change, publish, change many units with a
preview, sign out; and one whole flow by keyboard alone. No page logs a console error."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.conftest import Console

# A 1x1 transparent PNG.
PICTURE = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    opened = browser.new_context(locale="en-US")
    # Units' pictures live on other hosts; the browser gets a small picture for each, so no
    # page waits on (or fails to reach) a network the tests do not have.
    opened.route(
        "https://**/*", lambda route: route.fulfill(body=PICTURE, content_type="image/png")
    )
    yield opened
    opened.close()


# A form sent back with its problem keeps the API's status (409, 412, 422); Chromium logs the
# status of such a page as a console error, which is the page working as meant.
FORM_OUTCOMES = re.compile(r"Failed to load resource: .* status of (409|412|422) ")


@pytest.fixture
def page(context: Any) -> Iterator[Any]:
    opened = context.new_page()
    errors: list[str] = []
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    assert [error for error in errors if not FORM_OUTCOMES.match(error)] == []


def sign_in(
    page: Any, console: Console, key: str | None = None, then: str = "/console/units"
) -> None:
    page.goto(f"{console.base}{then}")
    page.get_by_label("API key").fill(key or console.admin_key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(then) + "$"))


def town() -> str:
    return f"Town {uuid.uuid4().hex[:8]}"


def test_sign_in_search_in_arabic_and_sign_out(page: Any, console_server: Console) -> None:
    place = town()
    lake = console_server.create_unit(name="Lake House", unitNameAr="بيت البحيرة", city=place)
    console_server.create_unit(name="Hill House", unitNameAr="بيت التل", city=place)
    sign_in(page, console_server)
    page.get_by_role("link", name="العربية").click()
    page.wait_for_load_state()
    assert page.locator("html").get_attribute("dir") == "rtl"
    page.get_by_label("المدينة").fill(place)
    page.get_by_label("بحث").fill("بحيرة")
    page.get_by_role("button", name="تطبيق").click()
    page.wait_for_url(re.compile("q="))
    rows = page.locator("table.units tbody tr")
    assert rows.count() == 1
    assert rows.first.get_by_role("link").inner_text() == "بيت البحيرة"
    rows.first.get_by_role("link").click()
    page.wait_for_url(re.compile(lake["id"]))
    page.get_by_role("link", name="English").click()
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(re.compile("/console/login$"))
    page.goto(f"{console_server.base}/console/units")
    assert "/console/login" in page.url


def test_drawing_a_box_on_the_map_filters_by_it(page: Any, console_server: Console) -> None:
    place = town()
    west = console_server.create_unit(
        name="West Point", city=place, unitLocation={"type": "Point", "coordinates": [31.0, 30.0]}
    )
    east = console_server.create_unit(
        name="East Point", city=place, unitLocation={"type": "Point", "coordinates": [32.0, 30.5]}
    )
    sign_in(page, console_server, then=f"/console/units?city={place.replace(' ', '+')}")
    assert page.locator("#map .point").count() == 2
    page.locator("#map").scroll_into_view_if_needed()
    frame = page.locator("#map").bounding_box()
    # The frame holds both points with a tenth of padding: the left third holds only the
    # western one.
    page.mouse.move(frame["x"] + 5, frame["y"] + 5)
    page.mouse.down()
    page.mouse.move(frame["x"] + frame["width"] * 0.3, frame["y"] + frame["height"] - 5, steps=5)
    page.mouse.up()
    page.wait_for_url(re.compile("west="))
    assert page.locator("#map .point").count() == 1
    links = page.locator("table.units tbody a")
    assert links.count() == 1 and west["id"] in links.first.get_attribute("href")
    assert east["id"] not in page.content()
    assert float(page.get_by_label("west").input_value()) < 31.0


def test_a_price_edit_meets_a_change_made_in_another_session(
    browser: Any, page: Any, console_server: Console
) -> None:
    unit = console_server.create_unit(name="Contested Villa", price=1000000)
    sign_in(page, console_server, then=f"/console/units/{unit['id']}/edit")
    other = browser.new_context()
    try:
        second = other.new_page()
        sign_in(second, console_server, then=f"/console/units/{unit['id']}/edit")
        second.get_by_label("Price", exact=True).fill("1250000.50")
        second.get_by_role("button", name="Save").click()
        second.wait_for_url(re.compile(r"done=saved"))
        assert "1,250,000.5" in second.content()
    finally:
        other.close()
    page.get_by_label("Price", exact=True).fill("999999.99")
    page.get_by_role("button", name="Save").click()
    alert = page.get_by_role("alert")
    assert "Changed by someone else since you opened it." in alert.inner_text()
    assert page.get_by_label("Price", exact=True).input_value() == "999999.99"
    with page.context.expect_page() as opened:
        page.get_by_role("link", name="See the new version").click()
    fresh = opened.value
    fresh.wait_for_load_state()
    assert "1,250,000.5" in fresh.content()
    fresh.close()
    assert console_server.unit(unit["id"])["price"] == 1250000.5


def test_publish_then_only_allowed_actions_remain(page: Any, console_server: Console) -> None:
    unit = console_server.create_unit(
        name="Ready Villa", city="Cairo", price=10, unitImageUrl="https://cdn.example.com/a.jpg"
    )
    sign_in(page, console_server, then=f"/console/units/{unit['id']}")
    picture = page.locator('img[src="https://cdn.example.com/a.jpg"]')
    assert picture.count() == 1
    picture.first.wait_for()
    assert picture.first.evaluate("image => image.complete && image.naturalWidth") == 1
    page.get_by_label("Channels (comma separated)").fill("website, app")
    page.get_by_role("button", name="Publish").click()
    page.wait_for_url(re.compile("done=publish"))
    assert page.get_by_role("status").inner_text() == "Done."
    assert page.get_by_role("button", name="Unpublish").count() == 1
    assert page.get_by_role("button", name="Restore").count() == 0
    assert console_server.unit(unit["id"])["publishing"]["channels"] == ["website", "app"]


def test_bulk_change_shows_how_many_before_applying(page: Any, console_server: Console) -> None:
    place = town()
    for _ in range(3):
        console_server.create_unit(city=place, price=100)
    sign_in(page, console_server, then="/console/bulk")
    page.get_by_label("Raw filter (RSQL)").fill(f'city=="{place}"')
    page.get_by_label("Set price to").fill("150.25")
    page.get_by_role("button", name="Preview").click()
    assert page.locator("#preview").inner_text() == "3 units would change"
    listed = console_server.http.get("/api/v2/units/", params={"p": f'city=="{place}"'}).json()
    assert {unit["price"] for unit in listed["data"]} == {100}
    page.get_by_role("button", name=re.compile("Apply to all")).click()
    assert "3 changed" in page.get_by_role("status").inner_text()
    listed = console_server.http.get("/api/v2/units/", params={"p": f'city=="{place}"'}).json()
    assert {unit["price"] for unit in listed["data"]} == {150.25}


def test_a_whole_flow_by_keyboard_alone(page: Any, console_server: Console) -> None:
    """Sign in, search, open a unit and reserve it, with Tab and Enter only."""
    place = town()
    unit = console_server.create_unit(name="Keyboard Flat", city=place)
    page.goto(f"{console_server.base}/console/units")
    page.keyboard.press("Tab")  # the skip link
    focused_key = False
    for _ in range(8):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "key":
            focused_key = True
            break
    assert focused_key
    page.keyboard.type(console_server.admin_key)
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile("/console/units$"))
    _tab_to(page, "q")
    page.keyboard.type("Keyboard")
    _tab_to(page, "city")
    page.keyboard.type(place)
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile("q=Keyboard"))
    _tab_to_link(page, f"/console/units/{unit['id']}")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(unit["id"] + "$"))
    _tab_to_button(page, "sell")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile("done=sell"))
    assert console_server.unit(unit["id"])["availability"]["status"] == "sold"


def _tab_until(page: Any, check: str, times: int = 80) -> None:
    for _ in range(times):
        page.keyboard.press("Tab")
        if page.evaluate(check):
            return
    raise AssertionError(f"Tab never reached: {check}")


def _tab_to(page: Any, element_id: str) -> None:
    _tab_until(page, f"document.activeElement.id === {element_id!r}")


def _tab_to_link(page: Any, href: str) -> None:
    _tab_until(page, f"document.activeElement.getAttribute('href') === {href!r}")


def _tab_to_button(page: Any, value: str) -> None:
    _tab_until(page, f"document.activeElement.value === {value!r}")


def test_import_a_file_with_errors_then_download_an_export(
    page: Any, console_server: Console, tmp_path: Any
) -> None:
    place = town()
    rows = ["name,type,city,price", f"Good Flat,flat,{place},100", f",flat,{place},5"]
    rows.append(f"Bad Price,villa,{place},-3")
    upload = tmp_path / "units.csv"
    upload.write_text("\n".join(rows) + "\n")
    sign_in(page, console_server, then="/console/imports")
    page.get_by_label("File (csv, jsonl, xlsx)").set_input_files(str(upload))
    assert page.get_by_label("Dry run (write nothing)").is_checked()
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url(re.compile(r"/console/imports/[0-9a-f-]{36}$"))
    page.locator("#rows-failed").wait_for()
    page.locator("[data-refresh]").wait_for(state="detached", timeout=30000)
    assert page.locator("#rows-created").inner_text() == "1"
    assert page.locator("#rows-failed").inner_text() == "2"
    errors = page.locator("table.row-errors tbody tr")
    assert errors.count() == 2
    assert errors.nth(0).locator("td").nth(1).inner_text() == "name"
    assert errors.nth(1).locator("td").nth(1).inner_text() == "price"
    page.get_by_role("link", name="Import it for real").click()
    page.get_by_label("File (csv, jsonl, xlsx)").set_input_files(str(upload))
    page.get_by_label("Dry run (write nothing)").uncheck()
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url(re.compile(r"/console/imports/[0-9a-f-]{36}$"))
    page.locator("[data-refresh]").wait_for(state="detached", timeout=30000)
    assert page.locator("#rows-created").inner_text() == "1"

    page.get_by_role("link", name="Exports").click()
    page.get_by_label("Format").select_option("csv")
    page.get_by_label("Raw filter (RSQL)").fill(f'city=="{place}"')
    page.get_by_role("button", name="Start the export").click()
    page.wait_for_url(re.compile(r"/console/exports/[0-9a-f-]{36}$"))
    page.get_by_role("link", name="Download").wait_for(timeout=30000)
    with page.expect_download() as started:
        page.get_by_role("link", name="Download").click()
    saved = tmp_path / "export.csv"
    started.value.save_as(saved)
    text = saved.read_text(encoding="utf-8-sig")
    assert "Good Flat" in text and "Bad Price" not in text
