"""Realistic bilingual units for demos and benchmarks, reproducible from a seed."""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from decimal import Decimal
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import Database, utcnow, uuid7
from units_api.events.tables import events
from units_api.http.json import dumps
from units_api.search import index as search_index
from units_api.search.normalize import record_tokens
from units_api.units import repository
from units_api.units.record import (
    UnitRecord,
    actor_text,
    creation_changes,
    new_availability,
    new_publishing,
)
from units_api.units.tables import unit_history, units
from units_api.units.validation import validate_unit

CITIES = [
    ("Cairo", "القاهرة", (31.2357, 30.0444)),
    ("New Cairo", "القاهرة الجديدة", (31.4913, 30.0074)),
    ("Sheikh Zayed", "الشيخ زايد", (30.9876, 30.0444)),
    ("6th of October", "السادس من أكتوبر", (30.9254, 29.9285)),
    ("Alexandria", "الإسكندرية", (29.9187, 31.2001)),
    ("North Coast", "الساحل الشمالي", (28.9500, 30.9500)),
    ("Riyadh", "الرياض", (46.6753, 24.7136)),
    ("Jeddah", "جدة", (39.1925, 21.4858)),
    ("Dubai", "دبي", (55.2708, 25.2048)),
    ("Abu Dhabi", "أبوظبي", (54.3773, 24.4539)),
]
TYPES = [
    ("apartment", "شقة"),
    ("villa", "فيلا"),
    ("townhouse", "تاون هاوس"),
    ("twin house", "توين هاوس"),
    ("duplex", "دوبلكس"),
    ("penthouse", "بنتهاوس"),
    ("studio", "ستوديو"),
    ("office", "مكتب"),
    ("retail", "محل تجاري"),
    ("chalet", "شاليه"),
]
PROJECTS = [
    "palm-hills",
    "mivida",
    "zed-east",
    "hyde-park",
    "marassi",
    "o-west",
    "sodic-east",
    "al-burouj",
    "jumeirah-park",
    "saadiyat-grove",
]
ADJECTIVES = [
    ("Garden", "بحديقة"),
    ("Sea View", "بإطلالة على البحر"),
    ("Corner", "ناصية"),
    ("Modern", "عصرية"),
    ("Family", "عائلية"),
    ("Luxury", "فاخرة"),
    ("Cozy", "مريحة"),
]
FEATURES = [
    ("pool", "Private swimming pool", "حمام سباحة خاص"),
    ("garden", "Landscaped garden", "حديقة منسقة"),
    ("parking", "Covered parking", "موقف سيارات مغطى"),
    ("security", "24/7 security", "أمن على مدار الساعة"),
    ("gym", "Residents' gym", "صالة رياضية للسكان"),
    ("smart-home", "Smart home system", "نظام منزل ذكي"),
    ("elevator", "Private elevator", "مصعد خاص"),
]
VIEWS = ["garden", "pool", "sea", "street", "park", "lagoon", "city"]
SERVICES = [("electricity", Decimal("1.45")), ("water", Decimal("4.10")), ("gas", Decimal("2.25"))]


def _money(rng: random.Random, low: int, high: int, step: int = 1000) -> int:
    return rng.randrange(low, high, step)


def _floors(rng: random.Random, kind: str, surface: int, price: int) -> list[dict[str, Any]]:
    count = (
        1 if kind in ("apartment", "studio", "office", "retail", "chalet") else rng.randint(2, 3)
    )
    names = [("Ground floor", "الدور الأرضي"), ("First floor", "الدور الأول"), ("Roof", "الروف")]
    return [
        {
            "floorsNumber": index,
            "floorName": names[index][0],
            "floorNameAr": names[index][1],
            "floorDesc": f"{names[index][0]} with living area and {rng.randint(1, 3)} bedrooms.",
            "floorDescAr": f"{names[index][1]} يضم صالة معيشة و{rng.randint(1, 3)} غرف نوم.",
            "rooms": rng.randint(1, 4),
            "baths": rng.randint(1, 3),
            "view": rng.choice(VIEWS),
            "area": surface // count,
            "uom": "m2",
            "price": price // count,
            "extras": rng.choice(["Balcony", "Terrace", "Maid's room", "Storage"]),
            "floorImage": f"https://cdn.example.com/floors/{rng.randrange(10**6)}.jpg",
        }
        for index in range(count)
    ]


def _plans(rng: random.Random, price: int) -> list[dict[str, Any]]:
    plans = []
    for number, (years, down) in enumerate(rng.sample([(5, 10), (7, 5), (8, 15), (10, 0)], 2)):
        payment = price * down // 100
        plans.append(
            {
                "planNumber": number + 1,
                "planName": f"{down}% down, {years} years",
                "planNameAr": f"مقدم {down}٪ على {years} سنوات",
                "planDesc": f"{down}% down, equal quarterly installments over {years} years.",
                "planDescAr": f"مقدم {down}٪ وأقساط ربع سنوية متساوية على {years} سنوات.",
                "minPrice": price,
                "maxPrice": price + price // 10,
                "default": number == 0,
                "downPayment": payment,
                "installmentsValue": round(Decimal(price - payment) / (years * 4), 2),
                "paymentDetails": "Quarterly installments; maintenance deposit due at delivery.",
                "active": True,
            }
        )
    return plans


def _readings(rng: random.Random) -> list[dict[str, Any]]:
    readings = []
    for service, tariff in rng.sample(SERVICES, 2):
        previous = rng.randint(100, 5000)
        current = previous + rng.randint(10, 600)
        readings.append(
            {
                "service": service,
                "currentReading": current,
                "previousReading": previous,
                "cost": (current - previous) * tariff,
                "readingDate": f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}",
                "Notes": rng.choice(["Read by the facility team.", "قراءة شهرية", "Estimated"]),
            }
        )
    return readings


def fake_unit(rng: random.Random) -> dict[str, Any]:
    city, city_ar, (lon, lat) = rng.choice(CITIES)
    kind, kind_ar = rng.choice(TYPES)
    adjective, adjective_ar = rng.choice(ADJECTIVES)
    project = rng.choice(PROJECTS)
    code = f"{rng.choice('ABCDEFGH')}-{rng.randint(1, 400)}"
    surface = rng.randint(45, 600)
    price = _money(rng, 900_000, 45_000_000)
    features = rng.sample(FEATURES, 3)
    return {
        "name": f"{adjective} {kind.title()} {code}",
        "type": kind,
        "location": f"{project.replace('-', ' ').title()}, {city}",
        "price": price,
        "surface": surface,
        "guaranty": rng.choice([0, 1, 2, 5]),
        "city": city,
        "subProjectId": f"{project}-phase-{rng.randint(1, 4)}",
        "priceBase": rng.choice(["total", "per_m2"]),
        "unitImageUrl": f"https://cdn.example.com/units/{rng.randrange(10**7)}.jpg",
        "unitNameAr": f"{kind_ar} {adjective_ar} {code}",
        "unitLocation": {
            "type": "Point",
            "coordinates": [
                round(Decimal(lon + rng.uniform(-0.05, 0.05)), 6),
                round(Decimal(lat + rng.uniform(-0.05, 0.05)), 6),
            ],
        },
        "expense": {"name": "maintenance", "value": price * 8 // 100},
        "startingPrice": price,
        "maxPrice": price + price // 10,
        "unitDesc": f"A {adjective.lower()} {kind} of {surface} m2 in {city}, "
        f"with {', '.join(f[1].lower() for f in features)}.",
        "unitDescAr": f"{kind_ar} {adjective_ar} بمساحة {surface} متر مربع في {city_ar}، "
        f"مع {' و'.join(f[2] for f in features)}.",
        "unitShortDesc": f"{adjective} {kind} in {city}",
        "unitShortDescAr": f"{kind_ar} {adjective_ar} في {city_ar}",
        "gallery": [
            f"https://cdn.example.com/gallery/{rng.randrange(10**7)}.jpg"
            for _ in range(rng.randint(2, 5))
        ],
        "specs": [
            {
                "featureNumber": index + 1,
                "featureType": "amenity",
                "featureTag": tag,
                "featureImage": f"https://cdn.example.com/features/{tag}.png",
                "featureDesc": desc,
                "featureDescAr": desc_ar,
                "active": True,
            }
            for index, (tag, desc, desc_ar) in enumerate(features)
        ],
        "options": [
            {
                "optionNumber": 1,
                "optionName": "Finishing package",
                "optionNameAr": "باقة التشطيب",
                "area": surface,
                "uom": "m2",
                "price": surface * 4500,
                "active": rng.random() > 0.3,
            }
        ],
        "paymentPlans": _plans(rng, price),
        "floorsPlan": _floors(rng, kind, surface, price),
        "readings": _readings(rng),
    }


def fake_units(count: int, seed: int | None) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for _ in range(count):
        yield fake_unit(rng)


SEED_ACTOR = {"type": "system", "id": None, "name": "seed"}


async def _insert_rows(conn: AsyncConnection, rows: dict[str, list[dict[str, Any]]]) -> None:
    await conn.execute(units.insert(), rows["units"])
    await repository.bump_count(conn, len(rows["units"]))
    await search_index.write_many(conn, [(entry["id"], entry["words"]) for entry in rows["words"]])
    await conn.execute(unit_history.insert(), rows["history"])
    await conn.execute(events.insert(), rows["events"])


def _changes_text(fields: dict[str, Any]) -> str:
    return dumps(creation_changes(fields)).decode()


_SEARCH_FROM_ARRAYS = (
    "INSERT INTO unit_search (unit_id, created_at, vector) "
    "SELECT t.u, units.created_at, array_to_tsvector(string_to_array(t.w, ' ')) "
    "FROM unnest($1::uuid[], $2::text[]) AS t(u, w) JOIN units ON units.id = t.u"
)


# The shard of the change trigger (the transaction's), so a batch locks one counter row.
_BUMP_COUNT = "UPDATE unit_counters SET n = n + $1 WHERE shard = txid_current() % 16"


def _rows(bodies: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The units, history entries, events and search words of a batch, ready to write."""
    rows: dict[str, list[dict[str, Any]]] = {"units": [], "history": [], "events": [], "words": []}
    actor = actor_text(SEED_ACTOR)
    for body in bodies:
        fields = validate_unit(body)
        now = utcnow()
        record = UnitRecord(uuid7(), 1, now, now, fields, new_publishing(), new_availability(now))
        columns = record.columns()
        rows["units"].append({"id": record.id, "created_at": now, **columns})
        rows["history"].append(
            {
                "unit_id": record.id,
                "version": 1,
                "at": now,
                "actor": actor,
                "action": "create",
                "changes": _changes_text(fields),
            }
        )
        rows["events"].append(
            {
                "id": uuid7(),
                "type": "unit.created",
                "occurred_at": now,
                "unit_id": record.id,
                "version": 1,
                "actor": actor,
                "data": '{"unit":' + columns["doc"] + "}",
            }
        )
        rows["words"].append({"id": record.id, "words": record_tokens(fields)})
    return rows


def batch_rows(seed: int | None, index: int, size: int) -> dict[str, list[dict[str, Any]]]:
    """The rows of batch `index`: reproducible from (seed, index), so batches can be made in
    other processes."""
    rng = random.Random(None if seed is None else seed * 1_000_003 + index)
    return _rows([fake_unit(rng) for _ in range(size)])


async def _copy_rows(raw: asyncpg.Connection, rows: dict[str, list[dict[str, Any]]]) -> None:
    """PostgreSQL: binary COPY of a batch, in one transaction."""
    async with raw.transaction():
        for table, key in ((units, "units"), (unit_history, "history"), (events, "events")):
            names = list(rows[key][0])
            records = [tuple(row[name] for name in names) for row in rows[key]]
            await raw.copy_records_to_table(table.name, records=records, columns=names)
        await raw.execute(
            _SEARCH_FROM_ARRAYS,
            [w["id"] for w in rows["words"]],
            [" ".join(w["words"]) for w in rows["words"]],
        )
        await raw.execute(_BUMP_COUNT, len(rows["units"]))


async def _seed_postgres(db: Database, sizes: list[int], seed: int | None) -> None:
    """Batches are made in worker processes while the previous ones are copied in; at most
    three wait in memory at a time."""
    loop = asyncio.get_running_loop()
    raw = await db.raw_connection()
    try:
        with ProcessPoolExecutor(max_workers=2) as pool:
            ahead: deque[asyncio.Future[dict[str, list[dict[str, Any]]]]] = deque()
            for index, size in enumerate(sizes):
                ahead.append(loop.run_in_executor(pool, batch_rows, seed, index, size))
                if len(ahead) == 3 or index == len(sizes) - 1:
                    while len(ahead) >= (3 if index < len(sizes) - 1 else 1):
                        await _copy_rows(raw, await ahead.popleft())
    finally:
        await raw.close()


async def seed_units(db: Database, count: int, seed: int | None, batch: int = 2000) -> int:
    """Insert `count` units, each with its history entry, search words and `unit.created`
    event; through COPY on PostgreSQL (a million in minutes)."""
    sizes = [min(batch, count - start) for start in range(0, count, batch)]
    if db.dialect == "postgresql":
        await _seed_postgres(db, sizes, seed)
        return count
    for index, size in enumerate(sizes):
        async with db.transaction() as conn:
            await _insert_rows(conn, batch_rows(seed, index, size))
    return count
