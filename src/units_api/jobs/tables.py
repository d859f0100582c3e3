"""Durable jobs (exports, imports): one row each, claimed by a worker under a lease."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, Integer, String, Table, Text, Uuid

from units_api.db import UTCDateTime, metadata

jobs = Table(
    "jobs",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("kind", String(20), nullable=False),  # export, import
    Column("status", String(16), nullable=False),  # queued, running, succeeded, failed, expired
    Column("params", Text, nullable=False),  # JSON
    Column("owner_key_id", Uuid),
    Column("progress", Float, nullable=False),
    Column("row_count", BigInteger),
    Column("bytes", BigInteger),
    Column("error", Text),
    Column("result", Text),  # JSON: what the job made (a file, counts, row errors)
    Column("checkpoint", Text),  # JSON: how far a resumable job has committed
    Column("attempts", Integer, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("run_after", UTCDateTime, nullable=False),
    Column("lease_owner", String(80)),
    Column("lease_until", UTCDateTime),
    Column("created_at", UTCDateTime, nullable=False),
    Column("started_at", UTCDateTime),
    Column("finished_at", UTCDateTime),
    Column("expires_at", UTCDateTime),
    Index("ix_jobs_status_run_after", "status", "run_after"),
    Index("ix_jobs_kind_id", "kind", "id"),
)
