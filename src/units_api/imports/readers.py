"""Import file readers: csv, jsonl and xlsx, each streamed a row at a time.

A row becomes a unit body as a create or PUT takes it. In csv and xlsx an empty cell is an
absent field; text columns are taken as they are; numbers and nested values (lists, objects)
are read as JSON, numbers exactly (never through floats), so a file the service exported
imports back unchanged. A value that does not read is passed on as its text, for validation
to name (`price: must be a JSON number`). A spreadsheet's date cell reads as the API writes
times (RFC 3339, UTC, to the millisecond, with `Z`): its time carries no zone, and an export
writes UTC, so an exported `createdAt` reads back as it was.

A csv or jsonl file that is gzip (by its magic bytes) is read as the file it holds. Memory is
bounded whatever the file: what it expands to is counted against the import's expanded cap,
and cells, lines and rows have caps of their own (`MAX_CELL_CHARS`, `MAX_LINE_CHARS`); a file
past one, or that does not read (not UTF-8, a cut gzip stream, a broken xlsx), fails the job
with `JobFailed`, never retried.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from units_api.clock import format_time
from units_api.http.json import parse_exact
from units_api.imports.xlsx import MAX_CELL_CHARS, MAX_LINE_CHARS, open_sheet
from units_api.jobs.work import JobFailed
from units_api.units.columns import COLUMN_KINDS, ColumnKind

FORMATS = ("csv", "jsonl", "xlsx")
EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".xlsx": "xlsx"}
# csv and jsonl may come gzip-compressed (an export with `compression: gzip`).
GZIP_EXTENSIONS = {f"{extension}.gz": fmt for extension, fmt in EXTENSIONS.items() if fmt != "xlsx"}
XLSX_MAGIC = b"PK\x03\x04"
GZIP_MAGIC = b"\x1f\x8b"
# What an upload may expand to (gzip, or an xlsx's parts) by default
# (UNITS_API_MAX_IMPORT_EXPANDED_BYTES).
DEFAULT_MAX_EXPANDED = 2 * 1024**3
csv.field_size_limit(MAX_CELL_CHARS)


def format_of(filename: str) -> str | None:
    """The format a file's name says (`units.csv`, `units.jsonl.gz`), or None."""
    name = filename.lower()
    for extension, fmt in (*GZIP_EXTENSIONS.items(), *EXTENSIONS.items()):
        if name.endswith(extension):
            return fmt
    return None


class _Expanded(io.RawIOBase):
    """A decompressing stream's bytes, counted: past `cap` the file fails its job."""

    def __init__(self, source: Any, cap: int, what: str) -> None:
        self.source = source
        self.cap = cap
        self.what = what
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self.source.read(len(buffer))
        except (OSError, EOFError, zlib.error) as exc:
            raise JobFailed(f"The file is not readable {self.what}: {exc}") from None
        self.count += len(data)
        if self.count > self.cap:
            raise JobFailed(
                f"The file expands to more than {self.cap:,} bytes "
                "(UNITS_API_MAX_IMPORT_EXPANDED_BYTES)."
            )
        buffer[: len(data)] = data
        return len(data)


_UNREAD = object()  # a value that did not read; its error is on the row already


@dataclass(slots=True)
class Row:
    """A data row (numbered from 1, the header not counted): its body, or why it does not
    read as one (field, message)."""

    number: int
    body: dict[str, Any] | None
    errors: list[tuple[str, str]] = field(default_factory=list)


def _columns(header: list[Any]) -> list[tuple[str, ColumnKind]]:
    names = [str(name).strip() if name is not None else "" for name in header]
    unknown = [name for name in names if name not in COLUMN_KINDS]
    if unknown:
        raise JobFailed(
            f"The header names {', '.join(repr(n) for n in unknown)}, which "
            f"{'is not a unit field' if len(unknown) == 1 else 'are not unit fields'}; "
            f"columns may be any of {', '.join(COLUMN_KINDS)}."
        )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise JobFailed(f"The header names {', '.join(repeated)} more than once.")
    return [(name, COLUMN_KINDS[name]) for name in names]


def _from_text(name: str, kind: ColumnKind, text: str, row: Row) -> Any:
    if kind in ("text", "uuid", "time"):
        return text
    try:
        return parse_exact(text)
    except (ValueError, RecursionError):
        if kind == "json":
            row.errors.append((name, "is not valid JSON"))
            return _UNREAD
        return text  # validation names what a number should be


def _position(file: IO[bytes] | None, size: int) -> float:
    """How far into the file reading is: none before it opens, all once it is closed."""
    if file is None:
        return 0.0
    return 1.0 if file.closed else min(1.0, file.tell() / size)


class _Reader:
    def __init__(self, path: Path, max_expanded: int = DEFAULT_MAX_EXPANDED) -> None:
        self.path = path
        self.size = max(1, os.path.getsize(path))
        self.max_expanded = max_expanded

    def fraction(self) -> float:
        return 0.0

    def rows(self) -> Iterator[Row]:
        raise NotImplementedError

    @contextlib.contextmanager
    def _open(self, file: IO[bytes]) -> Iterator[IO[bytes]]:
        """The file's bytes: as they are, or what they hold if they are gzip (by its magic
        bytes), decompressed as read and counted against the expanded cap."""
        head = file.read(2)
        file.seek(0)
        if head != GZIP_MAGIC:
            yield file
            return
        with gzip.GzipFile(fileobj=file, mode="rb") as unzipped:
            yield io.BufferedReader(_Expanded(unzipped, self.max_expanded, "gzip"))


class _Lines:
    """The lines `read(limit)` gives, failing the job at one longer than `limit`, or at a
    row (of csv: lines up to the reader's next row, `row_read` marks one) longer than it."""

    def __init__(self, read: Any, limit: int) -> None:
        self.read = read
        self.limit = limit
        self.in_row = 0

    def row_read(self) -> None:
        self.in_row = 0

    def __iter__(self) -> Iterator[Any]:
        limit = self.limit
        while line := self.read(limit):
            if len(line) >= limit and line[-1:] not in ("\n", b"\n"):
                raise JobFailed(f"The file has a line longer than {limit:,} characters.")
            self.in_row += len(line)
            if self.in_row > limit:
                raise JobFailed(f"The file has a row longer than {limit:,} characters.")
            yield line
            if isinstance(line, bytes):
                self.in_row = 0  # jsonl: a line is a row


class JsonlReader(_Reader):
    def __init__(self, path: Path, max_expanded: int = DEFAULT_MAX_EXPANDED) -> None:
        super().__init__(path, max_expanded)
        self._file: IO[bytes] | None = None

    def fraction(self) -> float:
        return _position(self._file, self.size)

    def rows(self) -> Iterator[Row]:
        number = 0
        with open(self.path, "rb") as self._file, self._open(self._file) as source:
            for line in _Lines(source.readline, MAX_LINE_CHARS):
                if not line.strip():
                    continue
                number += 1
                try:
                    body = parse_exact(line.decode("utf-8-sig" if number == 1 else "utf-8"))
                except (ValueError, UnicodeDecodeError) as exc:
                    yield Row(number, None, [("", f"is not valid JSON: {exc}")])
                    continue
                except RecursionError:
                    yield Row(number, None, [("", "is nested too deeply")])
                    continue
                if not isinstance(body, dict):
                    yield Row(number, None, [("", "must be a JSON object")])
                    continue
                yield Row(number, body)


class CsvReader(_Reader):
    def __init__(self, path: Path, max_expanded: int = DEFAULT_MAX_EXPANDED) -> None:
        super().__init__(path, max_expanded)
        self._binary: IO[bytes] | None = None

    def fraction(self) -> float:
        return _position(self._binary, self.size)

    def rows(self) -> Iterator[Row]:
        with open(self.path, "rb") as self._binary, self._open(self._binary) as source:
            text = io.TextIOWrapper(source, encoding="utf-8-sig", newline="")
            lines = _Lines(text.readline, MAX_LINE_CHARS)
            reader = csv.reader(lines)
            try:
                header = next(reader, None)
                if header is None:
                    return
                lines.row_read()
                columns = _columns(header)
                for number, cells in enumerate(reader, start=1):
                    lines.row_read()
                    yield self._row(number, columns, cells)
            except UnicodeDecodeError as exc:
                raise JobFailed(f"The file is not UTF-8 text: {exc}") from None
            except csv.Error as exc:
                if "field larger than field limit" in str(exc):
                    raise JobFailed(
                        f"The file has a cell longer than {MAX_CELL_CHARS:,} characters."
                    ) from None
                raise JobFailed(f"The file is not valid CSV: {exc}") from None

    @staticmethod
    def _row(number: int, columns: list[tuple[str, ColumnKind]], cells: list[str]) -> Row:
        row = Row(number, {})
        if len(cells) > len(columns):
            row.errors.append(("", f"has {len(cells)} cells for {len(columns)} columns"))
        body: dict[str, Any] = {}
        for (name, kind), text in zip(columns, cells, strict=False):
            if text != "":
                value = _from_text(name, kind, text, row)
                if value is not _UNREAD:
                    body[name] = value
        row.body = body
        return row


# A spreadsheet keeps characters XML cannot hold (control characters) as `_xHHHH_`, and a
# text that looks like one with its `_` so written (`_x005F_`); openpyxl leaves them as read.
_XML_ESCAPE = re.compile(r"_x([0-9A-Fa-f]{4})_")


def _unescape_cell(text: str) -> str:
    if "_x" not in text:
        return text
    return _XML_ESCAPE.sub(lambda match: chr(int(match.group(1), 16)), text)


def _from_cell(name: str, kind: ColumnKind, value: Any, row: Row) -> Any:
    """A spreadsheet cell's value as a body takes it."""
    if isinstance(value, str):
        return _from_text(name, kind, _unescape_cell(value), row)
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        number = Decimal(repr(value))
        if kind in ("text", "uuid", "time"):
            return str(int(number)) if number == number.to_integral_value() else str(number)
        return int(number) if value.is_integer() and kind == "integer" else number
    if isinstance(value, int):
        return str(value) if kind in ("text", "uuid", "time") else value
    if isinstance(value, datetime):
        return format_time(value if value.tzinfo else value.replace(tzinfo=UTC))
    if isinstance(value, date):
        return value.isoformat()
    return value


class XlsxReader(_Reader):
    """The first sheet, streamed: the sheet's XML is read from the zip a piece at a time by
    expat, never as a whole (see `imports/xlsx.py`), so memory stays bounded whatever the
    sheet holds."""

    def __init__(self, path: Path, max_expanded: int = DEFAULT_MAX_EXPANDED) -> None:
        super().__init__(path, max_expanded)
        self._sheet: Any = None

    def fraction(self) -> float:
        return 0.0 if self._sheet is None else self._sheet.fraction()

    def rows(self) -> Iterator[Row]:
        with open(self.path, "rb") as file:
            if file.read(4) != XLSX_MAGIC:
                raise JobFailed("The file is not an xlsx workbook.")
        with open_sheet(self.path, self.max_expanded) as self._sheet:
            values = self._sheet.rows()
            first = next(values, None)
            if first is None:
                return
            start, header = first
            while header and header[-1] is None:
                header = header[:-1]
            columns = _columns(list(header))
            for index, cells in values:
                number = index - start
                if all(value is None for value in cells):
                    continue
                row = Row(number, {})
                extra = [v for v in cells[len(columns) :] if v is not None]
                if extra:
                    row.errors.append(("", f"has cells beyond the {len(columns)} columns"))
                body: dict[str, Any] = {}
                for (name, kind), value in zip(columns, cells, strict=False):
                    if value is not None and value != "":
                        read = _from_cell(name, kind, value, row)
                        if read is not _UNREAD:
                            body[name] = read
                row.body = body
                yield row


READERS: dict[str, type[_Reader]] = {"csv": CsvReader, "jsonl": JsonlReader, "xlsx": XlsxReader}


def open_reader(fmt: str, path: Path, max_expanded: int = DEFAULT_MAX_EXPANDED) -> _Reader:
    return READERS[fmt](path, max_expanded)
