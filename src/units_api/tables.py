"""Every table, imported once so the metadata is complete (Alembic, tests)."""

from units_api.auth.tables import api_keys
from units_api.channels.tables import channels
from units_api.console.tables import console_sessions
from units_api.db import metadata
from units_api.events.tables import event_positions, events, feed_positions
from units_api.http.tables import idempotency_keys
from units_api.jobs.tables import jobs
from units_api.names.tables import display_names
from units_api.sitemaps.tables import indexnow_state
from units_api.units.tables import remembered_results, unit_history, units
from units_api.webhooks.tables import webhook_deliveries, webhook_delivery_attempts, webhooks

__all__ = [
    "api_keys",
    "channels",
    "console_sessions",
    "display_names",
    "event_positions",
    "events",
    "feed_positions",
    "idempotency_keys",
    "indexnow_state",
    "jobs",
    "metadata",
    "remembered_results",
    "unit_history",
    "units",
    "webhook_deliveries",
    "webhook_delivery_attempts",
    "webhooks",
]
