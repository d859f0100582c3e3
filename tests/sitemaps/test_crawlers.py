"""The sitemaps read as a crawler reads them: `ultimate-sitemap-parser` starts from robots.txt
on a real server (over HTTP) and finds exactly the pages of the units live on the website, in
both languages, with their alternates; on both databases (each a database of its own, so
the answer is exact)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from usp.objects.sitemap import IndexRobotsTxtSitemap
from usp.tree import sitemap_tree_for_homepage

from tests.conftest import READY_UNIT, served_sqlite, unit_body
from tests.processes import deployment

Server = tuple[str, dict[str, str]]


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """A real server on a database of its own: its base URL and an admin key's headers."""
    if request.param == "sqlite":
        with served_sqlite(tmp_path / "units.db") as (base, key):
            yield base, {"Authorization": f"Bearer {key}"}
        return
    with deployment(tmp_path, "units_crawl", {}) as (_, base, headers):
        yield base, headers


def make_units(base: str, headers: dict[str, str]) -> tuple[list[str], list[str]]:
    """Units live on the website (one sold, one also on a label channel, one with a name
    that needs escaping), and units that are not, each for another reason."""
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:

        def create(**fields: Any) -> str:
            created = client.post("/api/v2/units/", json=unit_body(**{**READY_UNIT, **fields}))
            assert created.status_code == 201, created.text
            return str(created.json()["id"])

        def act(unit_id: str, path: str, **body: Any) -> None:
            done = client.put(f"/api/v2/units/{path}/{unit_id}", json=body)
            assert done.status_code == 200, done.text

        label = f"shop-{uuid.uuid4().hex[:6]}"
        assert client.put(f"/api/v2/channels/{label}", json={"kind": "label"}).is_success
        live = [create(), create(name='Villa <A&B> "1"'), create(), create()]
        for unit_id in live:
            act(unit_id, "publishing-actions", action="publish", channels=["website"])
        act(live[2], "availability-actions", action="sell")
        act(live[3], "publishing-actions", action="publish", channels=["website", label])
        draft, unpublished, blocked, unready, labelled = (create() for _ in range(5))
        for unit_id in (unpublished, blocked, unready):
            act(unit_id, "publishing-actions", action="publish", channels=["website"])
        act(unpublished, "publishing-actions", action="unpublish")
        act(blocked, "availability-actions", action="block")
        assert client.patch(f"/api/v2/units/{unready}", json={"unitImageUrl": None}).is_success
        act(labelled, "publishing-actions", action="publish", channels=[label])
    return live, [draft, unpublished, blocked, unready, labelled]


def test_a_crawler_finds_exactly_the_live_pages_in_both_languages(server: Server) -> None:
    base, headers = server
    live, _ = make_units(base, headers)
    tree = sitemap_tree_for_homepage(base + "/", use_known_paths=False)
    [robots] = tree.sub_sitemaps
    assert isinstance(robots, IndexRobotsTxtSitemap)
    assert [index.url for index in robots.sub_sitemaps] == [f"{base}/sitemap.xml"]
    found = list(tree.all_pages())
    english = {f"{base}/listings/{unit}" for unit in live}
    arabic = {f"{base}/ar/listings/{unit}" for unit in live}
    assert sorted(page.url for page in found) == sorted(english | arabic)
    for page in found:
        unit = page.url.rsplit("/", 1)[1]
        assert page.alternates == [
            ("en", f"{base}/listings/{unit}"),
            ("ar", f"{base}/ar/listings/{unit}"),
            ("x-default", f"{base}/listings/{unit}"),
        ]
        assert page.last_modified is not None
