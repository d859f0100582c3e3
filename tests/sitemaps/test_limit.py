"""What crawlers read counts against the public per-address limit, like the pages."""

from __future__ import annotations

from tests.conftest import start_api
from units_api.config import Settings


async def test_one_address_is_limited(database_url: str) -> None:
    settings = Settings(database_url=database_url, access_log=False, public_rate_limit="3/minute")
    async for api in start_api(settings):
        codes = [
            (await api.client.get(path)).status_code
            for path in ("/robots.txt", "/sitemap.xml", "/robots.txt", "/sitemap.xml")
        ]
        assert codes == [200, 200, 200, 429]
        refused = await api.client.get("/robots.txt")
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
