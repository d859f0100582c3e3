"""The filter rules that are easy to get wrong, each judged three ways: what the contract says,
what SQL finds on each database, and what `filters.evaluate` decides on the documents."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from tests.conftest import READY_UNIT, Api
from tests.filters.scoped_units import (
    Document,
    change_availability,
    create_scope,
    documents,
    evaluated_matches,
    publish,
    sql_matches,
)
from units_api.errors import InvalidParameter
from units_api.filters.evaluate import compile_filter
from units_api.filters.parser import parse_filter
from units_api.filters.sql import to_condition
from units_api.units.filtering import UNIT_CATALOGUE

URL = "https://cdn.example.com/u/{}.jpg"


def unit(**fields: Any) -> dict[str, Any]:
    return {"name": "Unit", "type": "villa", **fields}


class Scope:
    """Units created for one test under labels; every check asks SQL and the evaluator."""

    def __init__(self, api: Api, scope: str, ids: dict[str, str]) -> None:
        self.api, self.scope, self.ids = api, scope, ids
        self.labels = {unit_id: label for label, unit_id in ids.items()}

    @classmethod
    async def create(cls, api: Api, bodies: dict[str, dict[str, Any]]) -> Scope:
        scope, ids = await create_scope(api, list(bodies.values()))
        return cls(api, scope, dict(zip(bodies, ids, strict=True)))

    async def check(self, cases: dict[str, set[str]]) -> None:
        docs = await documents(self.api, self.scope)
        for text, expected in cases.items():
            by_sql = {self.labels[i] for i in await sql_matches(self.api, self.scope, text)}
            evaluated = {self.labels[i] for i in evaluated_matches(docs, text)}
            assert (by_sql, evaluated) == (expected, expected), text


async def test_null_rules_hold_per_element_of_arrays(api: Api) -> None:
    units = await Scope.create(
        api,
        {
            "mixed": unit(
                city="Cairo",
                specs=[{"featureTag": "pool", "active": True}, {"featureTag": None}],
                gallery=[URL.format(1)],
                paymentPlans=[{"downPayment": 10}, {"planName": "later"}],
            ),
            "pool": unit(specs=[{"featureTag": "Pool"}], gallery=[URL.format(1), URL.format(2)]),
            "empty": unit(),
            "nulls": unit(specs=[{"featureTag": None}], paymentPlans=[{"downPayment": None}]),
        },
    )
    everyone = {"mixed", "pool", "empty", "nulls"}
    await units.check(
        {
            "specs.featureTag==pool": {"mixed", "pool"},
            "specs.featureTag=in=(POOL,gym)": {"mixed", "pool"},
            "specs.featureTag!=pool": {"mixed", "nulls"},  # an element that is null, or differs
            "specs.featureTag=out=(pool)": {"mixed", "nulls"},
            "specs.featureTag=null=true": {"mixed", "nulls"},
            "specs.featureTag=null=false": {"mixed", "pool"},  # empty arrays: no element at all
            "specs.active==true": {"mixed"},
            "specs.active!=true": {"mixed", "pool", "nulls"},
            "specs.active=ge=false": {"mixed"},
            "specs.active=lt=true": set(),
            "paymentPlans.downPayment=lt=20": {"mixed"},
            "paymentPlans.downPayment!=10": {"mixed", "nulls"},
            "paymentPlans.downPayment=null=true": {"mixed", "nulls"},
            f"gallery!={URL.format(1)}": {"pool"},
            "gallery=null=false": {"mixed", "pool"},
            "gallery=null=true": set(),
            "city==cairo": {"mixed"},
            "city!=cairo": everyone - {"mixed"},
            "city=out=(cairo)": everyone - {"mixed"},
            "city=in=(cairo,giza)": {"mixed"},
            "city=lt=zzz": {"mixed"},
            "city=null=true": everyone - {"mixed"},
            "expense.value!=1;expense.value=null=true": everyone,
        }
    )


async def test_wildcards_leave_every_other_character_literal(api: Api) -> None:
    units = await Scope.create(
        api,
        {
            "percent": unit(name="50% off"),
            "fifty": unit(name="500 off"),
            "underscore": unit(name="off_plan"),
            "space": unit(name="off plan"),
            "dot": unit(name="v1.2"),
            "digit": unit(name="v102"),
            "star": unit(name="a*b"),
            "letters": unit(name="axxb"),
            "backslash": unit(name="c:\\temp"),
            "lines": unit(name="lines", unitShortDesc="first line\nsecond line"),
        },
    )
    everyone = set(units.ids)
    await units.check(
        {
            'name=="50%*"': {"percent"},
            'name=="*%*"': {"percent"},
            "name==off_*": {"underscore"},
            "name==*_plan": {"underscore"},
            "name==v1.*": {"dot"},
            "name==v1.2": {"dot"},
            "name==v1_2": set(),
            "name==a*b": {"star", "letters"},
            "name==c:\\temp*": {"backslash"},
            'name=="c:\\\\temp"': {"backslash"},
            "name==*": everyone,
            'name!="50%*"': everyone - {"percent"},
            "name=in=(v1.*,off_plan)": {"underscore"},  # no wildcards in lists
            "unitShortDesc==first*line": {"lines"},
            "unitShortDesc==*LINE": {"lines"},
        }
    )


async def test_text_is_case_insensitive_in_latin_and_exact_in_arabic(api: Api) -> None:
    units = await Scope.create(
        api,
        {
            "lower": unit(city="new cairo", unitNameAr="شقة فاخرة"),
            "upper": unit(city="NEW CAIRO", unitNameAr="شقّة فاخرة"),
            "title": unit(city="New Cairo", unitNameAr="شقه فاخره"),
        },
    )
    await units.check(
        {
            'city=="new cairo"': {"lower", "upper", "title"},
            "city==NEW*": {"lower", "upper", "title"},
            'city=in=("New CAIRO")': {"lower", "upper", "title"},
            'city=out=("new cairo")': set(),
            'city!="*CAIRO"': set(),
            'unitNameAr=="شقة فاخرة"': {"lower"},  # filters compare text as written
            'unitNameAr=="شق*"': {"lower", "upper", "title"},
            'unitNameAr=="*فاخرة"': {"lower", "upper"},
            'unitNameAr=in=(شقه*,"شقه فاخره")': {"title"},
            "city=lt=new": {"upper", "title"},  # ordering: code points, case kept
        }
    )


async def test_numbers_compare_exactly(api: Api) -> None:
    units = await Scope.create(
        api,
        {
            "tenth": unit(price=Decimal("0.1"), expense={"value": Decimal("0.1")}),
            "fifth": unit(price=Decimal("0.2")),
            "third": unit(price=Decimal("0.3"), expense={"value": Decimal("0.30000000000000004")}),
            "sum": unit(price=Decimal("0.30000000000000004"), expense={"value": Decimal("0.3")}),
            "padded": unit(price=Decimal("0.30")),
            "big": unit(price=Decimal("1234567.89")),
            "whole": unit(price=3, floorsPlan=[{"rooms": 3, "area": Decimal("120.5")}]),
        },
    )
    everyone = set(units.ids)
    await units.check(
        {
            "price==0.3": {"third", "padded"},
            "price==3E-1": {"third", "padded"},
            "price=in=(0.30,0.1)": {"tenth", "third", "padded"},
            "price=gt=0.3": {"sum", "big", "whole"},
            "price=le=0.3": {"tenth", "fifth", "third", "padded"},
            "price==0.30000000000000004": {"sum"},
            "price!=0.3": everyone - {"third", "padded"},
            "price==1234567.89": {"big"},
            "price=gt=1234567.88;price=lt=1234567.90": {"big"},
            "price==3.000": {"whole"},
            "expense.value=gt=0.3": {"third"},
            "expense.value==0.3": {"sum"},
            "expense.value=null=true": everyone - {"tenth", "third", "sum"},
            "floorsPlan.rooms==3.0": {"whole"},
            "floorsPlan.area=ge=120.50": {"whole"},
        }
    )


def at_offset(time: str, hours: float, shift_ms: int = 0) -> str:
    instant = datetime.fromisoformat(time.replace("Z", "+00:00")) + timedelta(milliseconds=shift_ms)
    return instant.astimezone(timezone(timedelta(hours=hours))).isoformat()


async def test_times_compare_as_instants_at_any_offset(api: Api) -> None:
    units = await Scope.create(api, {"first": unit()})
    await asyncio.sleep(0.01)
    second = await api.create_unit(subProjectId=units.scope)
    units.ids["second"], units.labels[second["id"]] = second["id"], "second"
    first = next(
        doc for doc in await documents(api, units.scope) if doc["id"] == units.ids["first"]
    )
    t1, t2 = first["createdAt"], second["createdAt"]
    await units.check(
        {
            f"createdAt=={at_offset(t1, 2)}": {"first"},
            f"createdAt=={at_offset(t1, -5.5)}": {"first"},
            f"createdAt=gt={at_offset(t1, 5.5)}": {"second"},
            f"createdAt=lt={at_offset(t2, -3)}": {"first"},
            f"createdAt=le={t2}": {"first", "second"},
            f"createdAt=ge={at_offset(t1, 1, shift_ms=1)}": {"second"},
            f"createdAt=lt={t1.removesuffix('Z')}": set(),  # no offset: UTC
            f"createdAt=in=({at_offset(t1, 2)},{t2})": {"first", "second"},
            f"createdAt=out=({at_offset(t1, 2)})": {"second"},
            f"updatedAt=ge={at_offset(t2, 9)}": {"second"},
        }
    )


async def test_server_fields_read_publishing_and_availability(api: Api) -> None:
    units = await Scope.create(
        api, {"web": dict(READY_UNIT), "draft": unit(), "sold": dict(READY_UNIT)}
    )
    await api.add_channel("mobile-app")
    await publish(api, units.ids["web"], action="publish", channels=["website", "mobile-app"])
    await change_availability(api, units.ids["sold"], action="sell")
    web_id = units.ids["web"]
    await units.check(
        {
            "status==PUBLISHED": {"web"},
            "status!=published": {"draft", "sold"},
            "channel==website": {"web"},
            "channel==mobile*": {"web"},
            "channel!=website": {"web"},  # another channel differs
            "channel=out=(website,MOBILE-APP)": set(),
            "channel=null=false": {"web"},
            "availability==sold": {"sold"},
            "availability=in=(available)": {"web", "draft"},
            "version=gt=1": {"web", "sold"},
            f"id=={web_id.upper()}": {"web"},
            f"id!={web_id}": {"draft", "sold"},
            f"id=in=({web_id},{units.ids['draft']})": {"web", "draft"},
        }
    )


def test_text_folds_case_beyond_ascii() -> None:
    """As PostgreSQL does in a UTF-8 locale; SQLite's lower() folds ASCII letters only."""
    matches = compile_filter(parse_filter("city==école,city==ΔΕΛΤΑ*"), UNIT_CATALOGUE)
    assert [matches({"city": city}) for city in ("ÉCOLE", "École", "ecole", "Δέλτα", "δελτα")] == [
        True,
        True,
        False,
        False,
        True,
    ]


BAD_FILTERS = [
    "colour==red",
    "price=gt=cheap",
    "price==NaN",
    "price=lt=Infinity",
    "version==1.5",
    "specs.active==yes",
    "createdAt=lt=yesterday",
    "id==not-a-uuid",
    "city==a;price==x",
    "city==a,(specs.featureNumber=in=(1,two))",
    "specs.featureTag=null=maybe",
    "createdAt=lt=0001-01-01T00:00:00+01:00",  # before the first representable instant
    "price=gt=1E-2000",
    "version==1E+999999999",
    "floorsPlan.rooms==1E+30",
]


@pytest.mark.parametrize("text", BAD_FILTERS)
@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_evaluator_rejects_what_sql_rejects_with_the_same_error(
    text: str, dialect: str
) -> None:
    tree = parse_filter(text, "filter")
    with pytest.raises(InvalidParameter) as by_sql:
        to_condition(tree, UNIT_CATALOGUE, dialect, "filter")
    with pytest.raises(InvalidParameter) as evaluated:
        compile_filter(tree, UNIT_CATALOGUE, "filter")
    assert evaluated.value.detail == by_sql.value.detail
    assert evaluated.value.extra == by_sql.value.extra


def test_a_compiled_filter_judges_many_documents() -> None:
    matches = compile_filter(parse_filter("price=ge=10;specs.featureTag==pool"), UNIT_CATALOGUE)
    documents: list[Document] = [
        {"price": Decimal("10.0"), "specs": [{"featureTag": "POOL"}]},
        {"price": 10, "specs": [{"featureTag": "gym"}, {"featureTag": "pool"}]},
        {"price": Decimal("9.99"), "specs": [{"featureTag": "pool"}]},
        {"price": 11, "specs": []},
        {"price": 11},  # a missing key reads as null
        {},
    ]
    assert [matches(doc) for doc in documents] == [True, True, False, False, False, False]
    assert compile_filter(None, UNIT_CATALOGUE)({}) is True
