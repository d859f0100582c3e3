"""JSON log lines on stderr; each line carries the request id when there is one.

Every process configures its own logging: `serve` hands `uvicorn_config` to uvicorn, which
applies it in each worker process it starts (they do not inherit the parent's), `worker` and
a job's child process call `configure_logging`. A line never carries a secret: API keys,
webhook secrets and the passwords of URLs are masked in whatever it says, and an exception
it carries is bounded (`format_exception`), so one line stays small whatever was raised.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import logging.config
import os
import re
import select
import stat
import sys
import time
import traceback
from contextlib import suppress
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import msgspec
import orjson

from units_api.errors import bound_error

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}
# An API key or a webhook secret (by their prefixes), or the password of a URL.
_SECRET = re.compile(r"(uak_|whsec_)[A-Za-z0-9_+/=%-]+|(://[^/@:\s\"]*:)[^/@\s\"]+@")
MASK = "***"
# What a logged exception keeps: the last frames of each traceback (where it was raised), and
# the newest exceptions of its chain (causes and contexts) and of a group's members.
TRACEBACK_FRAMES = 10
CHAINED_EXCEPTIONS = 3
GROUP_MEMBERS = 3
_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def _mask(match: re.Match[str]) -> str:
    if match.group(1):
        return match.group(1) + MASK
    return f"{match.group(2)}{MASK}@"


def redact(text: str) -> str:
    """`text` with API keys, webhook secrets and URL passwords masked."""
    if "uak_" in text or "whsec_" in text or "://" in text:  # cheaper than the search
        return _SECRET.sub(_mask, text)
    return text


def format_exception(error: BaseException) -> str:
    """`error` as Python prints it, bounded: the last TRACEBACK_FRAMES frames of each
    traceback, the newest CHAINED_EXCEPTIONS exceptions of its chain, GROUP_MEMBERS members of
    a group, each message cut by `bound_error`."""
    chain: list[str] = []  # newest first
    seen: set[int] = set()
    current: BaseException | None = error
    link = ""
    while current is not None and id(current) not in seen and len(chain) < CHAINED_EXCEPTIONS:
        seen.add(id(current))
        chain.append(_one_exception(current) + link)
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    return "".join(reversed(chain)).rstrip("\n")


def _one_exception(error: BaseException, members: bool = True) -> str:
    frames = traceback.format_tb(error.__traceback__, limit=-TRACEBACK_FRAMES)
    head = "Traceback (most recent call last):\n" if frames else ""
    message = "".join(traceback.format_exception_only(type(error), error)).rstrip("\n")
    text = head + "".join(frames) + f"{bound_error(message)}\n"
    if members and isinstance(error, BaseExceptionGroup):
        for number, member in enumerate(error.exceptions[:GROUP_MEMBERS], start=1):
            text += f"+-- {number} --\n" + _one_exception(member, members=False)
    return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = request_id_var.get()
        if request_id:
            line["requestId"] = request_id
        line.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info and record.exc_info[1] is not None:
            line["exception"] = format_exception(record.exc_info[1])
        return redact(orjson.dumps(line, default=str).decode())


# A time's end after its second: ".042+00:00", by millisecond.
_MILLISECONDS = tuple(f".{n:03d}+00:00" for n in range(1000))
FLUSH_SECONDS = 0.01  # how long an access log line may wait to be written with others
MAX_WAITING = 1024  # lines that wait at most, whatever the timer: they go at once beyond


class _Line(msgspec.Struct, rename="camel", gc=False):
    """An access log line: its fields in their order, encoded by `msgspec` when written. Every
    field is given; `requestId` is left out when it is `UNSET` (outside a request, as
    `JsonFormatter` leaves it out)."""

    time: str = ""
    level: str = "INFO"
    logger: str = ""
    message: str = "request"
    request_id: str | msgspec.UnsetType = msgspec.UNSET
    path: str = ""
    query: str = ""
    method: str = ""
    status: int = 0
    duration_ms: float = 0.0
    client: str | None = None
    key_id: str | None = None


_encoder = msgspec.json.Encoder()


class AccessLog:
    """The access log: one line per request, as `JsonFormatter` writes a record of the
    `units_api.access` logger, without the logging machinery (a record, a handler's lock, a
    formatter and a text stream's flush cost a cached read about a tenth of its throughput).

    A request leaves its line's fields (a struct); the lines that waited are encoded together,
    in one call, when they are written: with a dict and a JSON encoding per request, the log
    cost a request 5 us instead of 3 (`bench/middleware.py`; bench/README.md, "What seeing
    inside costs").

    Lines are written whole on stderr's file descriptor, those of up to FLUSH_SECONDS
    together: the lines of a server's processes, sharing it, never cut into each other (a
    pipe writes up to `PIPE_BUF` bytes whole; a file, appended to through one shared offset,
    any write whole). They are written on the event loop's own thread, as nginx writes its
    buffered access log: a thread of their own cost far more than the writes. Each hand-over
    woke the thread, which then waited for the GIL while the loop took and released it at
    every callback, waking it again each time: 59 us of a create's CPU and 8 us of a cached
    read's, against a write of a few dozen lines every 10 ms (bench/README.md, "Single writes
    gathered on PostgreSQL")."""

    NAME = "units_api.access"

    def __init__(self) -> None:
        self.logger = logging.getLogger(self.NAME)
        self._second: int | None = None
        self._prefix = ""
        self._millisecond: int | None = None
        self._stamp = ""
        self._pending: list[_Line] = []
        self._scheduled = False
        self._limit = 0  # bytes of lines written at once (`_most`), read at the first write
        atexit.register(self.close)

    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)

    def _time(self, now: float) -> str:
        """`now` as a line shows it, made once a millisecond (the lines of one share it)."""
        millisecond = int(now * 1000)
        if millisecond == self._millisecond:
            return self._stamp
        second, place = divmod(millisecond, 1000)
        if second != self._second:
            self._second = second
            self._prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        self._millisecond = millisecond
        self._stamp = self._prefix + _MILLISECONDS[place]
        return self._stamp

    def write(
        self,
        path: str,
        query: str,
        method: str,
        status: int,
        duration_ms: float,
        client: str | None,
        key_id: str | None,
    ) -> None:
        """A request's line; `path` and `query` as sent (a secret in them is masked)."""
        if "uak_" in query or "whsec_" in query or "://" in query or "uak_" in path:
            path, query = redact(path), redact(query)
        now = self._time(time.time())
        line = _Line(
            now, "INFO", self.NAME, "request", request_id_var.get() or msgspec.UNSET, path,
            query, method, status, duration_ms, client, key_id,
        )  # fmt: skip
        self._queue(line)

    def _queue(self, line: _Line) -> None:
        """Lines wait up to FLUSH_SECONDS and go together (a write per line cost a cached
        read a tenth of its throughput; a write per turn of the event loop, a few percent).
        Outside an event loop, a line goes at once; at exit, what waits goes too."""
        pending = self._pending
        pending.append(line)
        if self._scheduled:
            if len(pending) >= MAX_WAITING:
                self.flush()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._scheduled = True
        loop.call_later(FLUSH_SECONDS, self.flush)

    def _most(self) -> int:
        """How many bytes of lines go in one write: a pipe's (or a terminal's, a socket's)
        PIPE_BUF, or 64 KiB for a regular file."""
        try:
            regular = stat.S_ISREG(os.fstat(sys.stderr.fileno()).st_mode)
        except (AttributeError, OSError, ValueError):
            regular = False
        self._limit = 65536 if regular else select.PIPE_BUF
        return self._limit

    def flush(self) -> None:
        """Write what waits: never more than `_most` bytes of whole lines at once (to a pipe,
        PIPE_BUF), so the lines of a server's processes never cut into each other; a longer
        line (a long query) alone."""
        self._scheduled = False
        if not self._pending:
            return
        lines, self._pending = self._pending, []
        data = _encode(lines)
        limit = self._limit or self._most()
        start = 0
        with memoryview(data) as view:
            while len(data) - start > limit:
                end = data.rfind(b"\n", start, start + limit) + 1
                if end <= start:  # one line longer than a write
                    end = data.index(b"\n", start) + 1
                _write_out(view[start:end])
                start = end
            _write_out(view[start:])

    def close(self) -> None:
        """At exit: every line waiting written."""
        self.flush()


def _encode(lines: list[_Line]) -> bytes:
    """The lines' JSON, one per line. A text that is not UTF-8 (a lone surrogate, which no
    server's decoding gives) is written with its bad characters replaced, never raised."""
    try:
        return _encoder.encode_lines(lines)
    except (msgspec.EncodeError, UnicodeError):
        out = bytearray()
        for line in lines:
            try:
                out += _encoder.encode_lines((line,))
            except (msgspec.EncodeError, UnicodeError):
                out += _encoder.encode_lines((_repaired(line),))
        return bytes(out)


def _repaired(line: _Line) -> _Line:
    """`line` with every text made valid UTF-8 (a bad character becomes "?")."""
    fields: dict[str, Any] = {
        name: value.encode("utf-8", "replace").decode("utf-8") if isinstance(value, str) else value
        for name, value in msgspec.structs.asdict(line).items()
    }
    return _Line(**fields)


def _write_out(data: bytes | memoryview) -> None:
    """Lines that cannot be written (a full disk, a pipe no one reads any more) are dropped:
    they are written on the loop's thread, in a request's last step or a timer, and the log
    never fails or stops what it describes."""
    try:
        descriptor = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor
        with suppress(OSError, ValueError):
            sys.stderr.write(bytes(data).decode())
            sys.stderr.flush()
        return
    with suppress(OSError):
        os.write(descriptor, data)


access_log = AccessLog()


def json_formatter() -> JsonFormatter:
    """The formatter, and the process's logging made cheaper: a line carries none of the
    caller's file, thread or process, and not looking them up makes every record cheaper (the
    logging HOWTO's "Optimization")."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    return JsonFormatter()


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """The whole logging set-up of a process, for `logging.config.dictConfig`."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": json_formatter}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": level.upper(), "handlers": ["stderr"]},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            # The service writes its own access line (units_api.access).
            "uvicorn.access": {"handlers": [], "propagate": False, "level": "CRITICAL"},
            "alembic": {"level": "WARNING"},
        },
    }


def uvicorn_config(level: str = "INFO") -> dict[str, Any]:
    """For `uvicorn.run(log_config=...)`: applied in every process uvicorn starts."""
    config = logging_config(level)
    # uvicorn's own formatter names, which it may set colours on.
    config["formatters"] |= {"default": {"()": json_formatter}, "access": {"()": json_formatter}}
    return config


def configure_logging(level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(level))
    logging.getLogger("uvicorn.access").disabled = True
