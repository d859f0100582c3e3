"""The retry rule after one attempt (webhooks/service.after_attempt), as the worker uses it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from units_api.webhooks.repository import FAILED, PENDING, SUCCEEDED
from units_api.webhooks.sender import Attempt
from units_api.webhooks.service import (
    JITTER,
    MAX_ATTEMPTS,
    RETRY_DELAYS,
    Timing,
    after_attempt,
)

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
TIMING = Timing(timeout=5)


def attempt(code: int | None, retry_after: float | None = None) -> Attempt:
    return Attempt(code, 10, None if code and code < 300 else "failed", None, retry_after)


def test_a_success_ends_the_delivery() -> None:
    assert after_attempt(1, attempt(204), True, TIMING, NOW) == (SUCCEEDED, None)


def test_a_failure_is_retried_on_the_schedule_until_no_attempt_is_left() -> None:
    for attempts, delay in enumerate(RETRY_DELAYS, start=1):
        status, next_at = after_attempt(attempts, attempt(500), True, TIMING, NOW)
        assert status == PENDING and next_at is not None
        waited = (next_at - NOW).total_seconds()
        assert delay * (1 - JITTER) <= waited <= delay * (1 + JITTER)
    assert after_attempt(MAX_ATTEMPTS, attempt(500), True, TIMING, NOW) == (FAILED, None)


def test_gone_endpoints_and_events_fail_at_once_and_retry_after_is_honoured() -> None:
    assert after_attempt(1, attempt(410), True, TIMING, NOW) == (FAILED, None)
    assert after_attempt(1, attempt(None), False, TIMING, NOW) == (FAILED, None)
    status, next_at = after_attempt(1, attempt(503, retry_after=3600), True, TIMING, NOW)
    assert status == PENDING and next_at == NOW + timedelta(seconds=3600)
