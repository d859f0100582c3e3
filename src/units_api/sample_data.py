"""Realistic bilingual units for demos, tests and benchmarks, reproducible from a seed."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
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
# Country by city (CITIES keeps its three columns: benchmarks read them).
COUNTRIES = {
    "Cairo": "EG",
    "New Cairo": "EG",
    "Sheikh Zayed": "EG",
    "6th of October": "EG",
    "Alexandria": "EG",
    "North Coast": "EG",
    "Riyadh": "SA",
    "Jeddah": "SA",
    "Dubai": "AE",
    "Abu Dhabi": "AE",
}
CURRENCIES = {"EG": "EGP", "SA": "SAR", "AE": "AED"}
# A square metre's sale price by city, in its currency: low, high.
PRICE_PER_M2 = {
    "Cairo": (30_000, 65_000),
    "New Cairo": (40_000, 80_000),
    "Sheikh Zayed": (35_000, 70_000),
    "6th of October": (25_000, 50_000),
    "Alexandria": (20_000, 45_000),
    "North Coast": (50_000, 100_000),
    "Riyadh": (4_500, 9_000),
    "Jeddah": (4_000, 8_000),
    "Dubai": (13_000, 28_000),
    "Abu Dhabi": (11_000, 22_000),
}
# A finishing package's price per square metre, by country.
FINISHING_PER_M2 = {"EG": 4500, "SA": 900, "AE": 1100}
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
# The Arabic nouns of TYPES that are feminine (an adjective agrees with its noun).
FEMININE = frozenset({"apartment", "villa"})
COMMERCIAL = frozenset({"office", "retail"})


@dataclass(frozen=True, slots=True)
class Layout:
    """What a type of unit is like: its surface (m2), bedrooms, floors, and how its price per
    square metre compares with the city's."""

    surface: tuple[int, int]
    bedrooms: tuple[int, int] | None  # None: not a dwelling
    floors: tuple[int, int]
    factor: float


LAYOUTS = {
    "apartment": Layout((80, 240), (1, 4), (1, 1), 1.0),
    "villa": Layout((280, 650), (4, 7), (2, 3), 1.05),
    "townhouse": Layout((180, 300), (3, 4), (2, 3), 1.0),
    "twin house": Layout((220, 360), (3, 5), (2, 3), 1.0),
    "duplex": Layout((180, 340), (3, 5), (2, 2), 1.0),
    "penthouse": Layout((170, 380), (2, 4), (1, 2), 1.15),
    "studio": Layout((35, 70), (0, 0), (1, 1), 1.05),
    "office": Layout((45, 300), None, (1, 1), 1.1),
    "retail": Layout((30, 200), None, (1, 1), 1.4),
    "chalet": Layout((70, 180), (1, 3), (1, 1), 1.0),
}
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
# English, then Arabic for a masculine noun and for a feminine one.
ADJECTIVES = [
    ("Garden", "بحديقة", "بحديقة"),
    ("Sea View", "بإطلالة على البحر", "بإطلالة على البحر"),
    ("Corner", "ناصية", "ناصية"),
    ("Modern", "عصري", "عصرية"),
    ("Family", "عائلي", "عائلية"),
    ("Luxury", "فاخر", "فاخرة"),
    ("Cozy", "مريح", "مريحة"),
]
# What an office or a shop is called instead of a family or cozy one.
COMMERCIAL_ADJECTIVES = {"Family": ("Prime", "متميز"), "Cozy": ("Compact", "عملي")}
FEATURES = [
    ("pool", "Private swimming pool", "حمام سباحة خاص"),
    ("garden", "Landscaped garden", "حديقة منسقة"),
    ("parking", "Covered parking", "موقف سيارات مغطى"),
    ("security", "24/7 security", "أمن على مدار الساعة"),
    ("gym", "Residents' gym", "صالة رياضية للسكان"),
    ("smart-home", "Smart home system", "نظام منزل ذكي"),
    ("elevator", "Private elevator", "مصعد خاص"),
]
# What an office or a shop may have (no pool, garden or residents' gym).
BUSINESS_FEATURES = [
    f for f in FEATURES if f[0] in ("parking", "security", "elevator", "smart-home")
]
VIEWS = ["garden", "pool", "sea", "street", "park", "lagoon", "city"]
SERVICES = [("electricity", Decimal("1.45")), ("water", Decimal("4.10")), ("gas", Decimal("2.25"))]


FLOOR_NAMES = [("Ground floor", "الدور الأرضي"), ("First floor", "الدور الأول"), ("Roof", "الروف")]


def _bedrooms_text(count: int) -> tuple[str, str]:
    """'N bedrooms' in English and in Arabic (as an object: one, two, three to ten)."""
    english = f"{count} bedroom{'s' if count != 1 else ''}"
    if count == 1:
        return english, "غرفة نوم واحدة"
    if count == 2:
        return english, "غرفتي نوم"
    return english, f"{count} غرف نوم"


def _spread(total: int, parts: int, first: int) -> list[int]:
    """`total` over `parts` floors, the ground floor (`first`) taking at most `first`."""
    ground = min(first, total) if parts > 1 else total
    rest, extra = divmod(total - ground, parts - 1) if parts > 1 else (0, 0)
    return [ground] + [rest + (1 if index < extra else 0) for index in range(parts - 1)]


def _floor_text(index: int, kind: str, bedrooms: int | None) -> tuple[str, str]:
    """A floor's description, with as many bedrooms as the floor has (living on the ground)."""
    name, name_ar = FLOOR_NAMES[index]
    ground = index == 0
    if kind == "office":
        return (
            f"{name}: open-plan office with a meeting room.",
            f"{name_ar}: مكتب مفتوح مع غرفة اجتماعات.",
        )
    if kind == "retail":
        return f"{name}: shop floor with a storage room.", f"{name_ar}: صالة عرض مع مخزن."
    if kind == "studio":
        return (
            f"{name}: open-plan studio with a kitchenette.",
            f"{name_ar}: ستوديو مفتوح مع مطبخ صغير.",
        )
    if not bedrooms:
        if not ground:
            return f"{name} with a terrace.", f"{name_ar} يضم تراسًا."
        return (
            f"{name} with living area, kitchen and guest bathroom.",
            f"{name_ar} يضم صالة معيشة ومطبخًا وحمام ضيوف.",
        )
    english, arabic = _bedrooms_text(bedrooms)
    if not ground:
        return f"{name} with {english}.", f"{name_ar} يضم {arabic}."
    return f"{name} with living area and {english}.", f"{name_ar} يضم صالة معيشة و{arabic}."


def _floors(
    rng: random.Random, kind: str, surface: int, price: int, rooms: tuple[int | None, int]
) -> list[dict[str, Any]]:
    """The floor plans: the unit's bedrooms and bathrooms spread over its floors, each floor's
    description saying how many bedrooms it has."""
    bedrooms, bathrooms = rooms
    low, high = LAYOUTS[kind].floors
    count = rng.randint(low, high)
    beds: Sequence[int | None] = [None] * count
    if bedrooms is not None:
        beds = _spread(bedrooms, count, 1 + (bedrooms >= 6))
    baths = _spread(bathrooms, count, 1)
    floors = []
    for index in range(count):
        name, name_ar = FLOOR_NAMES[index]
        desc, desc_ar = _floor_text(index, kind, beds[index])
        floors.append(
            {
                "floorsNumber": index,
                "floorName": name,
                "floorNameAr": name_ar,
                "floorDesc": desc,
                "floorDescAr": desc_ar,
                "rooms": (beds[index] or 0) + (1 if index == 0 else 0),
                "baths": baths[index],
                "view": rng.choice(VIEWS),
                "area": surface // count,
                "uom": "m2",
                "price": price // count,
                "extras": rng.choice(["Balcony", "Terrace", "Maid's room", "Storage"]),
                "floorImage": f"https://cdn.example.com/floors/{rng.randrange(10**6)}.jpg",
            }
        )
    return floors


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


def _describe(kind: str, adjective: tuple[str, str, str]) -> tuple[str, str]:
    """The adjective in English and in Arabic, agreeing with the type's noun."""
    english, masculine, feminine = adjective
    if kind in COMMERCIAL and english in COMMERCIAL_ADJECTIVES:
        return COMMERCIAL_ADJECTIVES[english]
    return english, feminine if kind in FEMININE else masculine


# Adjectives that say what a unit has, written next to its noun ("a 3-bedroom garden villa").
NOUN_ADJUNCTS = frozenset({"Garden", "Sea View", "Corner"})


def _described(kind: str, adjective: str, bedrooms: int | None) -> tuple[str, str]:
    """The unit as the descriptions name it: in English its adjective, bedrooms and noun in
    their natural order; in Arabic what follows its noun and adjective."""
    noun = "retail unit" if kind == "retail" else kind
    if not bedrooms:
        return f"{adjective.lower()} {noun}", ""
    size = f"{bedrooms}-bedroom"
    if adjective in NOUN_ADJUNCTS:
        return f"{size} {adjective.lower()} {noun}", f" من {_bedrooms_text(bedrooms)[1]}"
    return f"{adjective.lower()} {size} {noun}", f" من {_bedrooms_text(bedrooms)[1]}"


def _rooms(rng: random.Random, kind: str) -> tuple[int | None, int]:
    """Bedrooms (None for an office or a shop) and bathrooms to go with them."""
    layout = LAYOUTS[kind]
    if layout.bedrooms is None:
        return None, rng.randint(1, 2)
    bedrooms = rng.randint(*layout.bedrooms)
    if bedrooms <= 1:
        return bedrooms, 1
    return bedrooms, rng.randint(bedrooms - 1, bedrooms) + (bedrooms >= 4)


def _surface(rng: random.Random, kind: str, bedrooms: int | None) -> int:
    """A surface that grows with the bedrooms, within the type's range."""
    layout = LAYOUTS[kind]
    low, high = layout.surface
    if layout.bedrooms is None or layout.bedrooms[0] == layout.bedrooms[1]:
        return rng.randint(low, high)
    fewest, most = layout.bedrooms
    share = ((bedrooms or 0) - fewest + rng.random()) / (most - fewest + 1)
    return low + int((high - low) * share)


def _price(rng: random.Random, kind: str, city: str, surface: int, rent: bool) -> int:
    """A sale price from the city's price per square metre, or a month's rent (about 5 to 7
    percent of it a year), rounded as listings round them."""
    low, high = PRICE_PER_M2[city]
    sale = surface * rng.uniform(low, high) * LAYOUTS[kind].factor
    if rent:
        return max(500, round(sale * rng.uniform(0.05, 0.07) / 12 / 500) * 500)
    return round(sale / 10_000) * 10_000


def _completion(rng: random.Random, rent: bool) -> tuple[str, str | None]:
    """Ready, or off-plan with a handover date to come (a rented unit is always ready)."""
    if rent or rng.random() < 0.65:
        return "ready", None
    year = rng.randint(2027, 2030)
    return "offPlan", f"{year}-{rng.choice(['03', '06', '09', '12'])}-{rng.choice(['01', '15'])}"


def fake_unit(rng: random.Random) -> dict[str, Any]:
    city, city_ar, (lon, lat) = rng.choice(CITIES)
    kind, kind_ar = rng.choice(TYPES)
    adjective, adjective_ar = _describe(kind, rng.choice(ADJECTIVES))
    project = rng.choice(PROJECTS)
    code = f"{rng.choice('ABCDEFGH')}-{rng.randint(1, 400)}"
    country = COUNTRIES[city]
    rent = rng.random() < 0.15
    bedrooms, bathrooms = _rooms(rng, kind)
    surface = _surface(rng, kind, bedrooms)
    price = _price(rng, kind, city, surface, rent)
    completion, handover = _completion(rng, rent)
    features = rng.sample(BUSINESS_FEATURES if kind in COMMERCIAL else FEATURES, 3)
    described, described_ar = _described(kind, adjective, bedrooms)
    return {
        "name": f"{adjective} {kind.title()} {code}",
        "type": kind,
        "location": f"{project.replace('-', ' ').title()}, {city}",
        "price": price,
        "surface": surface,
        "guaranty": rng.choice([0, 1, 2, 5]),
        "city": city,
        "subProjectId": f"{project}-phase-{rng.randint(1, 4)}",
        "priceBase": "monthly" if rent else "total",
        "unitImageUrl": f"https://cdn.example.com/units/{rng.randrange(10**7)}.jpg",
        "unitNameAr": f"{kind_ar} {adjective_ar} {code}",
        "unitLocation": {
            "type": "Point",
            "coordinates": [
                round(Decimal(lon + rng.uniform(-0.05, 0.05)), 6),
                round(Decimal(lat + rng.uniform(-0.05, 0.05)), 6),
            ],
        },
        "expense": (
            {"name": "security deposit", "value": price}
            if rent
            else {"name": "maintenance", "value": price * 8 // 100}
        ),
        "startingPrice": price,
        "maxPrice": price + price // 10,
        "unitDesc": f"A {described} of {surface} m2 in {city}, "
        f"with {', '.join(f[1].lower() for f in features)}.",
        "unitDescAr": f"{kind_ar} {adjective_ar}{described_ar} بمساحة {surface} متر مربع "
        f"في {city_ar}، "
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
                "price": surface * FINISHING_PER_M2[country],
                "active": rng.random() > 0.3,
            }
        ],
        "paymentPlans": [] if rent else _plans(rng, price),
        "floorsPlan": _floors(rng, kind, surface, price, (bedrooms, bathrooms)),
        "readings": _readings(rng),
        "currency": CURRENCIES[country],
        "country": country,
        "offeringType": "rent" if rent else "sale",
        "bedrooms": bedrooms,
        "bathrooms": bathrooms,
        "completionStatus": completion,
        "handoverDate": handover,
    }


def fake_units(count: int, seed: int | None) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for _ in range(count):
        yield fake_unit(rng)
