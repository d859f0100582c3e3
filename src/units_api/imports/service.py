"""Imports (being built)."""

from __future__ import annotations

from typing import Any

from units_api.jobs.work import JobContext, JobFailed


async def run_import_job(context: JobContext) -> dict[str, Any]:
    raise JobFailed("imports are not available yet")
