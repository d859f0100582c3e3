"""What a log line may say: secrets masked wherever they appear, one JSON object per line."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import select
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from units_api.errors import MAX_ERROR_TEXT
from units_api.logs import (
    GROUP_MEMBERS,
    TRACEBACK_FRAMES,
    AccessLog,
    JsonFormatter,
    redact,
    request_id_var,
)


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


def _logged(error: BaseException) -> str:
    record = logging.LogRecord("units_api.test", logging.ERROR, __file__, 1, "failed", None, None)
    record.exc_info = (type(error), error, error.__traceback__)
    return str(orjson.loads(JsonFormatter().format(record))["exception"])


def _raise_in(depth: int, error: BaseException) -> None:
    if depth:
        _raise_in(depth - 1, error)
    raise error


def test_a_logged_exception_is_bounded_as_python_would_print_it() -> None:
    try:
        try:
            _raise_in(50, KeyError("k" * 50_000))
        except KeyError as exc:
            raise ValueError("v" * 50_000) from exc
    except ValueError as exc:
        chained = exc
    text = _logged(chained)
    assert text.index("KeyError: 'kkk") < text.index("direct cause") < text.index("ValueError: vv")
    assert text.count('\n  File "') <= 2 * TRACEBACK_FRAMES
    messages = [line for line in text.splitlines() if line.startswith(("KeyError", "ValueError"))]
    assert [len(message) for message in messages] == [MAX_ERROR_TEXT, MAX_ERROR_TEXT]

    members = [RuntimeError(f"member {n}") for n in range(GROUP_MEMBERS + 5)]
    try:
        raise ExceptionGroup("g" * 50_000, members) from None
    except ExceptionGroup as exc:
        grouped = exc
    text = _logged(grouped)
    assert "ExceptionGroup: ggg" in text and len(text) < 2 * MAX_ERROR_TEXT
    assert [n for n in range(len(members)) if f"member {n}\n" in text + "\n"] == list(
        range(GROUP_MEMBERS)
    )


@pytest.mark.parametrize(
    ("path", "query", "client", "key_id", "request_id", "duration_ms"),
    [
        ("/api/v2/units/0192", "", "127.0.0.1", "0192a6f0-key", "4f2a", 3.12),
        ("/api/v2/units", "filter=city==Cairo&limit=5", None, None, None, 0.0),
        ('/a"b\\c', 'q="x"\\y', "::1", "k", "id/+=:@", 12.5),
        ("/الوحدات/é", "p=\x01\x7f\ttab", "10.0.0.1", None, "r", 0.01),
        ("/api/v2/units", "key=uak_AbCdEf&u=redis://:pw@cache", None, "k", "r", 1e16),
        ("/x", "", None, None, "", 123456789.99),
    ],
)
def test_an_access_line_is_the_json_of_its_fields(
    capfd: pytest.CaptureFixture[str],
    path: str,
    query: str,
    client: str | None,
    key_id: str | None,
    request_id: str | None,
    duration_ms: float,
) -> None:
    """One line of JSON: the fields in their order, every text escaped as JSON needs (what
    it decodes to is what was given), secrets masked."""
    token = request_id_var.set(request_id)
    try:
        AccessLog().write(path, query, "GET", 404, duration_ms, client, key_id)
    finally:
        request_id_var.reset(token)
    written = capfd.readouterr().err
    line = orjson.loads(written)
    expected = {"time": line["time"], "level": "INFO", "logger": AccessLog.NAME}
    expected |= {"message": "request", **({"requestId": request_id} if request_id else {})}
    expected |= {"path": redact(path), "query": redact(query), "method": "GET", "status": 404}
    expected |= {"durationMs": duration_ms, "client": client, "keyId": key_id}
    assert written.endswith("\n") and written.count("\n") == 1
    assert list(line.items()) == list(expected.items())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])


def test_a_line_carries_its_millisecond_in_utc_across_every_edge() -> None:
    """The stamp is made once a millisecond and its second's part once a second: whatever
    order the times come in, each reads as the standard library writes that millisecond."""
    log = AccessLog()
    times = [1_700_000_000.0, 1_700_000_000.0004, 1_700_000_000.9995, 1_700_000_001.0]
    times += [1_699_999_999.001, 1_700_000_000.0004, 1_735_689_599.999, 1_735_689_600.0]
    times += [1_700_000_000.123 + n / 7919 for n in range(2000)]
    for now in times:
        expected = datetime.fromtimestamp(int(now * 1000) / 1000, UTC)
        assert log._time(now) == expected.isoformat(timespec="milliseconds")


@pytest.mark.parametrize("into", ["file", "pipe"])
def test_lines_written_from_an_event_loop_arrive_whole_and_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, into: str
) -> None:
    """In an event loop the lines are written in many writes (64 KiB at most to a file,
    PIPE_BUF to a pipe), by the timer and when the next line would pass that size; at exit,
    what waits is written too."""
    count = 3000
    reader: threading.Thread | None = None
    received = bytearray()
    if into == "file":
        out = os.open(tmp_path / "stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    else:
        read_end, out = os.pipe()

        def read() -> None:
            while chunk := os.read(read_end, 1 << 20):
                received.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
    stream = os.fdopen(out, "w")
    monkeypatch.setattr(sys, "stderr", stream)
    log = AccessLog()
    assert log._most() == (65536 if into == "file" else select.PIPE_BUF)

    def query(number: int) -> str:  # now and then a line longer than a pipe writes whole
        return "q=" + "x" * 6000 if number % 500 == 7 else ""

    async def serve() -> None:
        for number in range(count):
            log.write(f"/api/v2/units/{number}", query(number), "GET", 200, 1.5, "::1", None)
            if number % 100 == 0:
                await asyncio.sleep(0.011)  # some flushes by the timer, some by size

    asyncio.run(serve())
    log.close()
    stream.close()
    if reader is not None:
        reader.join(timeout=30)
        os.close(read_end)
    else:
        received.extend((tmp_path / "stderr").read_bytes())
    lines = [orjson.loads(line) for line in received.decode().splitlines()]
    assert [(line["path"], line["query"]) for line in lines] == [
        (f"/api/v2/units/{number}", query(number)) for number in range(count)
    ]


def test_a_text_that_is_not_utf8_is_written_with_its_bad_characters_replaced(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A lone surrogate cannot be encoded: its line is written with it replaced, the lines
    beside it as they are."""
    log = AccessLog()

    async def serve() -> None:
        log.write("/before", "", "GET", 200, 1.0, None, None)
        log.write("/bad\ud800", "q=\udfff", "GET", 404, 1.0, "\udc80", None)
        log.write("/after", "", "GET", 200, 1.0, None, None)

    asyncio.run(serve())
    log.close()
    lines = [orjson.loads(line) for line in capfd.readouterr().err.splitlines()]
    assert [(line["path"], line["query"], line["client"]) for line in lines] == [
        ("/before", "", None),
        ("/bad?", "q=?", "?"),
        ("/after", "", None),
    ]


def test_lines_that_cannot_be_written_are_dropped_without_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Written on the loop's thread, the log must not fail a request or a timer: on a full
    disk (/dev/full answers every write with ENOSPC) its lines are dropped."""
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stderr", full)
        log = AccessLog()

        async def serve() -> None:
            for number in range(200):
                log.write(f"/api/v2/units/{number}", "", "GET", 200, 1.5, "127.0.0.1", None)
            await asyncio.sleep(0.03)  # the timer's flush

        asyncio.run(serve())
        log.close()
        assert not log._pending
