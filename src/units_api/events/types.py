"""The event types the feed and webhooks carry."""

from __future__ import annotations

from units_api.job_kinds import JOB_KINDS

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
# A job's end, for every kind of job.
JOB_EVENT_TYPES = tuple(
    f"{kind}.{end}" for kind in JOB_KINDS.names() for end in ("succeeded", "failed")
)
# A channel created, changed (its kind, settings or feed token) or deleted.
CHANNEL_EVENT_TYPES = ("channel.created", "channel.updated", "channel.deleted")
# Events without a unit: `unitId` and `version` null, `data` the job or channel; only in the
# feed of a follower without a policy or filter.
NON_UNIT_EVENT_TYPES = JOB_EVENT_TYPES + CHANNEL_EVENT_TYPES
EVENT_TYPES = UNIT_EVENT_TYPES + NON_UNIT_EVENT_TYPES
# Sent only by a webhook's test; never in the feed.
TEST_EVENT_TYPE = "webhook.test"
