"""The console in a manager's words, over HTTP on both databases, in English and Arabic: a
unit's history as sentences, the form's messages beside their fields (the API's own kept as
their title), prices with their currency, floor plan and feature pictures; and every word the
console's templates and cells pass to t() has its Arabic."""

from __future__ import annotations

import ast
import re
import uuid
from decimal import Decimal
from pathlib import Path

from tests.conftest import READY_UNIT, Api
from tests.console.test_pages import csrf_of, sign_in
from units_api.console import web
from units_api.console.i18n import ARABIC, LANGUAGE_COOKIE

CONSOLE = Path(web.__file__).parent
# t("...") in a template, page.t("..."), language.t("..."), lang.t("...") in Python.
T_CALL = re.compile(r"""\bt\(\s*(["'])((?:(?!\1).)+)\1\s*[,)]""")


def history_of(page: str) -> str:
    return page.split('id="history-heading"')[1]


async def test_history_reads_as_sentences_in_both_languages(api: Api) -> None:
    unit = await api.create_unit(**{**READY_UNIT, "price": 4850000})
    path = f"/api/v2/units/{unit['id']}"
    await api.request("PATCH", path, json={"price": 4700000})
    plans = [{"planName": f"Plan {n}", "downPayment": 1000 * n} for n in range(1, 4)]
    await api.request("PATCH", path, json={"paymentPlans": plans, "currency": "AED"})
    publish = {"action": "publish", "channels": ["website"]}
    actions = "/api/v2/units/publishing-actions/" + unit["id"]
    await api.request("PUT", actions, json=publish, headers={"if-match": '"3"'})
    reserve = {"action": "reserve", "until": "2030-01-02T10:30:00Z"}
    availability = "/api/v2/units/availability-actions/" + unit["id"]
    reserved = await api.request("PUT", availability, json=reserve, headers={"if-match": '"4"'})
    assert reserved.status_code == 200, reserved.text
    client = await sign_in(api)
    shown = history_of((await client.get(f"/console/units/{unit['id']}")).text)
    assert (
        '<span title="price">Price</span>: <bdi dir="ltr">4,850,000 → 4,700,000 EGP</bdi>' in shown
    )
    assert (
        '<span title="paymentPlans">Payment plans</span>: <bdi dir="ltr">— → 3 payment plans</bdi>'
        in (shown)
    )
    assert (
        '<span title="publishing">Publishing</span>: <bdi dir="ltr">Draft → Published to website'
        in (shown)
    )
    assert '<bdi dir="ltr">Available → Reserved until 2030-01-02 10:30 UTC</bdi>' in shown
    assert '"planName"' not in shown  # no raw JSON
    assert "<td>Edited</td>" in shown and "<td>Published</td>" in shown

    client.cookies.set(LANGUAGE_COOKIE, "ar")
    shown = history_of((await client.get(f"/console/units/{unit['id']}")).text)
    assert (
        '<span title="price">السعر</span>: <bdi dir="rtl">٤٬٨٥٠٬٠٠٠ ← ٤٬٧٠٠٬٠٠٠ EGP</bdi>' in shown
    )
    assert '<bdi dir="rtl">— ← ٣ خطط سداد</bdi>' in shown
    assert (
        '<span title="publishing">النشر</span>: <bdi dir="rtl">مسودة ← منشورة على website</bdi>'
        in (shown)
    )
    assert '<bdi dir="rtl">متاحة ← محجوزة حتى ٢٠٣٠-٠١-٠٢ ١٠:٣٠ UTC</bdi>' in shown
    assert "<td>عُدّلت</td>" in shown and "<td>منشورة</td>" in shown


async def test_money_in_a_change_of_currency_is_in_the_new_currency(api: Api) -> None:
    unit = await api.create_unit(name="Moved", price=Decimal("1000.5"))
    path = f"/api/v2/units/{unit['id']}"
    changed = await api.request("PATCH", path, json={"price": 2000, "currency": "SAR"})
    assert changed.status_code == 200, changed.text
    client = await sign_in(api)
    shown = history_of((await client.get(f"/console/units/{unit['id']}")).text)
    assert '<bdi dir="ltr">1,000.5 → 2,000 SAR</bdi>' in shown
    assert '<span title="currency">Currency</span>: <bdi dir="ltr">— → SAR</bdi>' in shown


async def test_form_messages_are_in_a_managers_words_with_the_apis_kept(api: Api) -> None:
    client = await sign_in(api)
    form = await client.get("/console/units/new")
    fields = {
        "csrf": csrf_of(form),
        "name": "Worded",
        "type": "villa",
        "price": "abc",
        "surface": "big",
        "bedrooms": "2.5",
        "currency": "egp",
        "unitImageUrl": "not a url",
        "paymentPlans.0.downPayment": "lots",
    }
    answer = await client.post("/console/units/new", data=fields)
    assert answer.status_code == 422
    text = answer.text
    assert (
        '<span class="field-error" id="price-error" title="must be a JSON number">'
        "Enter a price, e.g. 4850000</span>"
    ) in text
    assert ">Enter a surface in square metres, e.g. 180</span>" in text
    assert ">Enter a number of bedrooms, e.g. 3</span>" in text
    assert re.search(
        r'id="currency-error" title="must be an ISO 4217[^"]*">'
        r"Enter a currency code of three capitals, e.g. EGP</span>",
        text,
    )
    assert ">Enter a full web address, starting with https://</span>" in text
    assert 'id="paymentPlans.0.downPayment-error" title="must be a JSON number">' in text
    assert ">Enter a number, e.g. 4850000</span>" in text

    client.cookies.set(LANGUAGE_COOKIE, "ar")
    arabic = (await client.post("/console/units/new", data=fields)).text
    assert 'title="must be a JSON number">أدخل السعر، مثل 4850000</span>' in arabic
    assert ">أدخل عدد غرف النوم، مثل 3</span>" in arabic
    assert ">أدخل رمز العملة بثلاثة أحرف كبيرة، مثل EGP</span>" in arabic
    assert ">أدخل رقماً، مثل 4850000</span>" in arabic


async def test_a_message_without_friendlier_words_is_shown_as_the_api_wrote_it(api: Api) -> None:
    client = await sign_in(api)
    form = await client.get("/console/units/new")
    fields = {
        "csrf": csrf_of(form),
        "name": "Bounds",
        "type": "villa",
        "unitLocation.lng": "31",
        "unitLocation.lat": "95",
        "startingPrice": "10",
        "maxPrice": "5",
    }
    answer = await client.post("/console/units/new", data=fields)
    assert answer.status_code == 422
    assert (
        '<span class="field-error" id="startingPrice-error" '
        'title="must be less than or equal to maxPrice">'
        "Must not be more than the maximum price</span>"
    ) in answer.text
    assert "latitude must be within [-90, 90]" in answer.text


async def test_the_list_shows_prices_with_their_currency(api: Api) -> None:
    town = f"Money {uuid.uuid4().hex[:8]}"
    await api.create_unit(name="Pound", price=11998000, city=town)
    await api.create_unit(name="Dirham", price=Decimal("2500000.5"), currency="AED", city=town)
    client = await sign_in(api)
    page = (await client.get("/console/units", params={"city": town})).text
    assert '<td class="num">11,998,000 EGP</td>' in page
    assert '<td class="num">2,500,000.5 AED</td>' in page
    client.cookies.set(LANGUAGE_COOKIE, "ar")
    page = (await client.get("/console/units", params={"city": town})).text
    assert '<td class="num">١١٬٩٩٨٬٠٠٠ EGP</td>' in page
    assert '<td class="num">٢٬٥٠٠٬٠٠٠٫٥ AED</td>' in page


async def test_floor_plan_and_feature_pictures_are_drawn(api: Api) -> None:
    unit = await api.create_unit(
        name="Planned",
        floorsPlan=[
            {"floorName": "Ground", "floorImage": "https://img.example.com/ground.png"},
            {"floorName": "Roof", "floorImage": "http://plain.example.com/roof.png"},
        ],
        specs=[{"featureType": "pool", "featureImage": "https://img.example.com/pool.jpg"}],
    )
    client = await sign_in(api)
    for language in ("en", "ar"):
        client.cookies.set(LANGUAGE_COOKIE, language)
        page = (await client.get(f"/console/units/{unit['id']}")).text
        drawn = re.findall(r'<img class="thumb" src="([^"]+)"', page)
        assert sorted(drawn) == [
            "https://img.example.com/ground.png",
            "https://img.example.com/pool.jpg",
        ]
        assert '<a href="http://plain.example.com/roof.png" rel="noopener noreferrer">' in page


def _words_passed_to_t() -> dict[str, set[str]]:
    """Every literal passed to t() in the console's templates and Python, by file."""
    found: dict[str, set[str]] = {}
    for path in sorted((CONSOLE / "templates").glob("*.html")):
        found[path.name] = {match[1] for match in T_CALL.findall(path.read_text())}
    for path in sorted(CONSOLE.glob("*.py")):
        words: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
                and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
                == "t"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                words.add(node.args[0].value)
        found[path.name] = words
    return found


def test_every_word_given_to_t_has_its_arabic() -> None:
    found = _words_passed_to_t()
    assert len(found["unit.html"]) > 20 and len(found["channels.py"]) > 5  # the scan works
    missing = {
        name: sorted(word for word in words if word not in ARABIC)
        for name, words in found.items()
        if any(word not in ARABIC for word in words)
    }
    assert missing == {}


def test_words_chosen_at_run_time_have_their_arabic() -> None:
    """Words a page passes to t() from a table rather than as a literal."""
    from units_api.console import channels, history, messages
    from units_api.units.states import AVAILABILITY, PUBLISHING

    actions = {
        action for table in (PUBLISHING, AVAILABILITY) for a in table.values() for action in a
    }
    chosen = [
        *web.ERROR_MESSAGES.values(),
        web.SOMETHING_WRONG,
        *messages.WORDS.values(),
        *history.STATE_WORDS.values(),
        *channels.KINDS,
        *(action.capitalize() for action in actions),  # the unit page's buttons
        *(history.ACTIONS[action] for action in actions),
        *history.ACTIONS.values(),
    ]
    assert [word for word in chosen if word not in ARABIC] == []
