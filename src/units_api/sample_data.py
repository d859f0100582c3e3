"""Realistic bilingual units for demos, tests and benchmarks, reproducible from a seed."""

from __future__ import annotations

import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

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
