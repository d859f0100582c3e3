"""The sample data a demo, the tests and the benchmarks seed: valid, reproducible, and a unit
a buyer would believe (its bedrooms, currency, price, handover and Arabic agree)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from units_api.sample_data import CITIES, COUNTRIES, CURRENCIES, FEMININE, fake_units
from units_api.units.validation import validate_unit

UNITS = list(fake_units(2000, seed=1))
_BEDROOMS = re.compile(r"(\d+) bedrooms?\b")
_BEDROOMS_AR = {"غرفة نوم واحدة": 1, "غرفتي نوم": 2}
_BEDROOMS_AR_COUNTED = re.compile(r"(\d+) غرف نوم")


def _english(text: str) -> int:
    return sum(int(found) for found in _BEDROOMS.findall(text))


def _arabic(text: str) -> int:
    named = sum(count for words, count in _BEDROOMS_AR.items() if words in text)
    return named + sum(int(found) for found in _BEDROOMS_AR_COUNTED.findall(text))


def test_every_unit_is_valid_and_the_seed_gives_the_same_units() -> None:
    for unit in UNITS[:200]:
        validate_unit(unit)
    assert list(fake_units(50, seed=1)) == UNITS[:50]


@pytest.mark.parametrize("index", range(0, 2000, 7))
def test_bedrooms_agree_with_the_floor_plans_and_descriptions(index: int) -> None:
    unit = UNITS[index]
    floors = unit["floorsPlan"]
    bedrooms = unit["bedrooms"]
    if bedrooms is None:
        assert unit["type"] in ("office", "retail")
        assert all("bedroom" not in floor["floorDesc"] for floor in floors)
        return
    assert sum(_english(floor["floorDesc"]) for floor in floors) == bedrooms
    assert sum(_arabic(floor["floorDescAr"]) for floor in floors) == bedrooms
    assert _english(unit["unitDesc"].replace("-bedroom", " bedroom")) == bedrooms
    assert _arabic(unit["unitDescAr"]) == bedrooms
    assert sum(floor["baths"] for floor in floors) == unit["bathrooms"]
    assert unit["bathrooms"] >= 1
    if unit["type"] == "studio":
        assert bedrooms == 0
    else:
        assert bedrooms >= 1
        assert unit["bathrooms"] <= bedrooms + 1


def test_currency_and_country_are_the_city_s() -> None:
    for unit in UNITS:
        country = COUNTRIES[unit["city"]]
        assert (unit["country"], unit["currency"]) == (country, CURRENCIES[country])
    assert {unit["currency"] for unit in UNITS} == {"EGP", "AED", "SAR"}


def test_a_handover_date_comes_with_an_off_plan_unit_alone_and_lies_ahead() -> None:
    for unit in UNITS:
        if unit["completionStatus"] == "offPlan":
            assert unit["handoverDate"] >= "2027-01-01"
            assert unit["offeringType"] == "sale"
        else:
            assert (unit["completionStatus"], unit["handoverDate"]) == ("ready", None)
    off_plan = sum(unit["completionStatus"] == "offPlan" for unit in UNITS)
    assert 0.2 < off_plan / len(UNITS) < 0.45


# Sale prices a buyer would expect, by currency and type: low, high.
SALE_PRICES: dict[tuple[str, str], tuple[int, int]] = {
    ("EGP", "studio"): (700_000, 7_500_000),
    ("EGP", "apartment"): (1_500_000, 25_000_000),
    ("EGP", "villa"): (5_000_000, 70_000_000),
    ("AED", "studio"): (300_000, 2_500_000),
    ("AED", "apartment"): (700_000, 8_000_000),
    ("AED", "villa"): (2_500_000, 20_000_000),
    ("SAR", "studio"): (100_000, 800_000),
    ("SAR", "apartment"): (250_000, 3_000_000),
    ("SAR", "villa"): (1_000_000, 7_000_000),
}


def test_prices_are_in_the_ranges_of_their_type_and_city() -> None:
    for unit in UNITS:
        price = unit["price"]
        if unit["offeringType"] == "rent":
            # A month's rent: a small share of what the unit would sell for.
            assert price < 250_000 and unit["paymentPlans"] == []
            continue
        low, high = SALE_PRICES.get((unit["currency"], unit["type"]), (0, 10**9))
        assert low <= price <= high, unit["name"]
    offered = Counter(unit["offeringType"] for unit in UNITS)
    assert 0.05 < offered["rent"] / len(UNITS) < 0.25


def test_arabic_adjectives_agree_with_their_noun() -> None:
    feminine_endings = ("ة",)
    for unit in UNITS:
        kind, words = unit["type"], unit["unitNameAr"].split()
        adjective = _adjective(unit)
        if adjective is None:
            continue
        if kind in FEMININE:
            assert adjective.endswith(feminine_endings), unit["unitNameAr"]
        else:
            assert not adjective.endswith(feminine_endings), unit["unitNameAr"]
        assert words[-1] == unit["name"].split()[-1]  # the unit's code


_AGREEING = ("عصري", "عائلي", "فاخر", "مريح", "متميز", "عملي")


def _adjective(unit: dict[str, Any]) -> str | None:
    """The name's adjective when it is one that agrees with its noun (not a phrase)."""
    words = unit["unitNameAr"].split()
    found = [word for word in words if word.rstrip("ة") in _AGREEING]
    return found[0] if found else None


def test_the_cities_keep_their_share_and_their_places() -> None:
    """What the search and map benchmarks rely on: every city about a tenth of the units,
    spread within 0.05 degrees of its centre."""
    shares = Counter(unit["city"] for unit in UNITS)
    assert set(shares) == {city for city, _, _ in CITIES}
    assert all(150 < count < 250 for count in shares.values())
    centres = {city: centre for city, _, centre in CITIES}
    for unit in UNITS:
        lng, lat = unit["unitLocation"]["coordinates"]
        centre = centres[unit["city"]]
        assert abs(float(lng) - centre[0]) <= 0.05 and abs(float(lat) - centre[1]) <= 0.05
