"""The display names every database has without storing them: the common types of unit, the
cities of the sample data (`sample_data.py`) and the countries it uses, and the usual views.
A stored entry of the same field and value overrides one; deleting it brings this one back.
Values are written as they are matched: trimmed and case-folded (`service.normalize`)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

from units_api.names.values import Name

_TYPES = {
    "apartment": Name("Apartment", "شقة"),
    "villa": Name("Villa", "فيلا"),
    "duplex": Name("Duplex", "دوبلكس"),
    "penthouse": Name("Penthouse", "بنتهاوس"),
    "studio": Name("Studio", "استوديو"),
    "townhouse": Name("Townhouse", "تاون هاوس"),
    "twin house": Name("Twin house", "توين هاوس"),
    "chalet": Name("Chalet", "شاليه"),
    "cabin": Name("Cabin", "كابينة"),
    "loft": Name("Loft", "لوفت"),
    "roof": Name("Roof", "روف"),
    "serviced apartment": Name("Serviced apartment", "شقة فندقية"),
    "hotel apartment": Name("Hotel apartment", "شقة فندقية"),
    "office": Name("Office", "مكتب"),
    "administrative": Name("Administrative unit", "وحدة إدارية"),
    "shop": Name("Shop", "محل"),
    "retail": Name("Retail", "محل تجاري"),
    "clinic": Name("Clinic", "عيادة"),
    "pharmacy": Name("Pharmacy", "صيدلية"),
    "restaurant": Name("Restaurant", "مطعم"),
    "land": Name("Land", "أرض"),
    "building": Name("Building", "مبنى"),
    "warehouse": Name("Warehouse", "مستودع"),
    "factory": Name("Factory", "مصنع"),
    "garage": Name("Garage", "جراج"),
}
_CITIES = {
    "cairo": Name("Cairo", "القاهرة"),
    "new cairo": Name("New Cairo", "القاهرة الجديدة"),
    "giza": Name("Giza", "الجيزة"),
    "sheikh zayed": Name("Sheikh Zayed", "الشيخ زايد"),
    "6th of october": Name("6th of October", "السادس من أكتوبر"),
    "new capital": Name("New Capital", "العاصمة الإدارية الجديدة"),
    "alexandria": Name("Alexandria", "الإسكندرية"),
    "north coast": Name("North Coast", "الساحل الشمالي"),
    "ain sokhna": Name("Ain Sokhna", "العين السخنة"),
    "hurghada": Name("Hurghada", "الغردقة"),
    "riyadh": Name("Riyadh", "الرياض"),
    "jeddah": Name("Jeddah", "جدة"),
    "dammam": Name("Dammam", "الدمام"),
    "dubai": Name("Dubai", "دبي"),
    "abu dhabi": Name("Abu Dhabi", "أبوظبي"),
    "sharjah": Name("Sharjah", "الشارقة"),
}
_COUNTRIES = {
    "eg": Name("Egypt", "مصر"),
    "sa": Name("Saudi Arabia", "السعودية"),
    "ae": Name("United Arab Emirates", "الإمارات العربية المتحدة"),
}
_VIEWS = {
    "garden": Name("Garden", "حديقة"),
    "pool": Name("Pool", "حمام سباحة"),
    "sea": Name("Sea", "البحر"),
    "street": Name("Street", "الشارع"),
    "park": Name("Park", "حديقة عامة"),
    "lagoon": Name("Lagoon", "بحيرة صناعية"),
    "city": Name("City", "المدينة"),
}

BUILT_IN: Final = MappingProxyType(
    {"type": _TYPES, "city": _CITIES, "country": _COUNTRIES, "view": _VIEWS}
)
