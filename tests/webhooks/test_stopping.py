"""A process that stops gives back the deliveries it was sending (CONTRACT 16, stopping):
due at once for another process, the stopped attempt not counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from tests.conftest import start_api
from tests.test_cli import free_port
from tests.webhooks.test_webhooks import HOOKS
from units_api.config import Settings


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A receiver that reads the request and never answers."""
    await reader.read(65536)
    await asyncio.sleep(3600)


async def hanging_receiver() -> AsyncIterator[str]:
    port = free_port()
    server = await asyncio.start_server(_silent, "127.0.0.1", port)
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        server.close()


async def deliveries(api: Any, hook_id: str) -> list[dict[str, Any]]:
    response = await api.request("GET", f"{HOOKS}/{hook_id}/deliveries")
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return found


async def test_a_stopping_process_gives_back_the_deliveries_it_was_sending(
    database_url: str, files_dir: str
) -> None:
    settings = Settings(
        database_url=database_url,
        files_dir=files_dir,
        access_log=False,
        db_pool_size=5,
        webhook_allow_private=True,
        webhook_poll_seconds=0.1,
        webhook_timeout_seconds=60,
    )
    async for url in hanging_receiver():
        async for api in start_api(settings):
            body = {"url": url, "eventTypes": ["unit.created"]}
            created = await api.request("POST", HOOKS, json=body)
            assert created.status_code == 201, created.text
            hook_id = created.json()["id"]
            await api.create_unit()
            for _ in range(100):  # until its first attempt is under way
                sending = await deliveries(api, hook_id)
                if sending and sending[0]["attempts"] == 1:
                    break
                await asyncio.sleep(0.1)
            assert sending[0]["attempts"] == 1 and sending[0]["status"] == "pending"
            stopped_at = datetime.now(UTC)
        async for again in start_api(settings.model_copy(update={"run_jobs": False})):
            given_back = (await deliveries(again, hook_id))[0]
            await again.request("DELETE", f"{HOOKS}/{hook_id}")
    assert given_back["status"] == "pending" and given_back["attempts"] == 0
    due = datetime.fromisoformat(given_back["nextAttemptAt"])
    assert due <= datetime.now(UTC) and due >= stopped_at.replace(microsecond=0)
