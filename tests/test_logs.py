"""What a log line may say: secrets masked wherever they appear, one JSON object per line."""

from __future__ import annotations

import logging
import sys

import orjson
import pytest

from units_api.logs import JsonFormatter, redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p=uak_AbC-d_E1&limit=5", "p=uak_***&limit=5"),
        ("secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw%2B%2F==", "secret whsec_***"),
        (
            "could not connect to postgresql://units:s3cr%40t@db.internal:5432/units",
            "could not connect to postgresql://units:***@db.internal:5432/units",
        ),
        ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
        ("http://127.0.0.1:8000/api/v2/units?p=city==Cairo", None),
    ],
)
def test_secrets_are_masked(text: str, expected: str | None) -> None:
    assert redact(text) == (expected or text)


def test_a_record_is_one_json_line_without_its_secrets() -> None:
    try:
        raise ConnectionError("refused by postgresql://units:topsecret@db:5432/units")
    except ConnectionError:
        record = logging.LogRecord(
            "units_api.test", logging.ERROR, __file__, 1, "failed for %s", ("uak_abc",), None
        )
        record.exc_info = sys.exc_info()
    record.jobId = "0190a2f0-0000-7000-8000-000000000000"
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = orjson.loads(line)
    assert parsed["message"] == "failed for uak_***"
    assert parsed["jobId"] == "0190a2f0-0000-7000-8000-000000000000"
    assert "topsecret" not in line and "units:***@db" in parsed["exception"]
