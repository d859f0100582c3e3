"""The event types the feed and webhooks carry."""

from __future__ import annotations

UNIT_EVENT_TYPES = (
    "unit.created",
    "unit.updated",
    "unit.deleted",
    "unit.published",
    "unit.unpublished",
    "unit.scheduled",
    "unit.archived",
    "unit.restored",
    "unit.reserved",
    "unit.released",
    "unit.sold",
    "unit.blocked",
    "unit.unblocked",
)
JOB_EVENT_TYPES = ("export.succeeded", "export.failed", "import.succeeded", "import.failed")
EVENT_TYPES = UNIT_EVENT_TYPES + JOB_EVENT_TYPES
# Sent only by a webhook's test; never in the feed.
TEST_EVENT_TYPE = "webhook.test"
