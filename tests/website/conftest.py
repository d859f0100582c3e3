"""The website in a real browser and in Lighthouse, against `units-api serve` on a loopback
port with units of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import READY_UNIT, served_sqlite
from tests.console.conftest import browser, chromium_path

__all__ = ["Site", "browser", "chromium_path", "site"]


@dataclass
class Site:
    base: str
    http: httpx.Client
    unit_id: str
    arabic_city: str


def showcase() -> dict[str, Any]:
    """A unit as a developer lists it: every public part a page shows."""
    return {
        **READY_UNIT,
        "name": "Garden Villa",
        "unitNameAr": "فيلا الحديقة",
        "type": "villa",
        "city": "New Cairo",
        "location": "Fifth Settlement",
        "country": "EG",
        "currency": "EGP",
        "price": 4850000,
        "bedrooms": 4,
        "bathrooms": 3,
        "surface": 310,
        "unitDesc": "A corner villa with a private garden, a pool and a view of the park.",
        "unitDescAr": "فيلا على ناصية بحديقة خاصة ومسبح وإطلالة على الحديقة العامة.",
        "unitLocation": {"type": "Point", "coordinates": [31.47, 30.03]},
        "gallery": ["https://cdn.example.com/g/1.jpg", "https://cdn.example.com/g/2.jpg"],
        "specs": [{"featureType": "garden", "featureDesc": "Private garden", "active": True}],
        "paymentPlans": [
            {
                "planName": "Ten years",
                "planNameAr": "عشر سنوات",
                "downPayment": 485000,
                "installmentsValue": 36375,
                "active": True,
            }
        ],
        "floorsPlan": [
            {
                "floorName": "Ground floor",
                "floorNameAr": "الدور الأرضي",
                "rooms": 3,
                "floorImage": "https://cdn.example.com/f/0.png",
            }
        ],
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("website")
    env = {
        "UNITS_API_FILES_DIR": str(folder / "files"),
        "UNITS_API_PUBLIC_RATE_LIMIT": "10000/minute",
    }
    with served_sqlite(Path(folder) / "units.db", env) as (base, key):
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            created = http.post("/api/v2/units/", json=showcase())
            assert created.status_code == 201, created.text
            unit_id = created.json()["id"]
            for body in (
                showcase(),
                {
                    **showcase(),
                    "name": "Park Apartment",
                    "unitNameAr": "شقة المتنزه",
                    "type": "apartment",
                },
            ):
                other = http.post("/api/v2/units/", json=body).json()["id"]
                published = http.put(
                    f"/api/v2/units/publishing-actions/{other}",
                    json={"action": "publish", "channels": ["website"]},
                )
                assert published.status_code == 200, published.text
            published = http.put(
                f"/api/v2/units/publishing-actions/{unit_id}",
                json={"action": "publish", "channels": ["website"]},
            )
            assert published.status_code == 200, published.text
            yield Site(base, http, unit_id, "القاهرة الجديدة")


def lighthouse_path() -> str | None:
    """Lighthouse from the npm registry (`npm i -E lighthouse@12.2.3 --prefix
    .venv/lighthouse`, as .ci/run does), or UNITS_API_TEST_LIGHTHOUSE."""
    given = os.environ.get("UNITS_API_TEST_LIGHTHOUSE")
    root = Path(__file__).resolve().parents[2]
    for candidate in (given, root / ".venv/lighthouse/node_modules/.bin/lighthouse"):
        if candidate and Path(candidate).exists():
            return str(candidate)
    return None
