"""Ids: UUIDv7, increasing within a process even within one millisecond."""

from __future__ import annotations

from units_api.db import uuid7


def test_uuid7_ids_increase_and_are_version_7() -> None:
    ids = [uuid7() for _ in range(20_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert {value.version for value in ids} == {7}
    assert {value.variant for value in ids} == {"specified in RFC 4122"}
