"""Import file readers: csv, jsonl and xlsx, each streamed a row at a time.

A row becomes a unit body as a create or PUT takes it. In csv and xlsx an empty cell is an
absent field; text columns are taken as they are; numbers and nested values (lists, objects)
are read as JSON, numbers exactly (never through floats), so a file the service exported
imports back unchanged. A value that does not read is passed on as its text, for validation
to name (`price: must be a JSON number`).
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from units_api.exports.formats import COLUMN_KINDS, ColumnKind
from units_api.http.json import parse_exact
from units_api.jobs.work import JobFailed

FORMATS = ("csv", "jsonl", "xlsx")
EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".xlsx": "xlsx"}
XLSX_MAGIC = b"PK\x03\x04"
# csv's own limit on a field (128 KiB) is below a nested field's possible size.
csv.field_size_limit(64 * 1024 * 1024)


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
    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = max(1, os.path.getsize(path))

    def fraction(self) -> float:
        return 0.0

    def rows(self) -> Iterator[Row]:
        raise NotImplementedError


class JsonlReader(_Reader):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._file: IO[bytes] | None = None

    def fraction(self) -> float:
        return _position(self._file, self.size)

    def rows(self) -> Iterator[Row]:
        number = 0
        with open(self.path, "rb") as self._file:
            for line in self._file:
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
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._binary: IO[bytes] | None = None

    def fraction(self) -> float:
        return _position(self._binary, self.size)

    def rows(self) -> Iterator[Row]:
        with open(self.path, "rb") as self._binary:
            text = io.TextIOWrapper(self._binary, encoding="utf-8-sig", newline="")
            reader = csv.reader(text)
            try:
                header = next(reader, None)
                if header is None:
                    return
                columns = _columns(header)
                for number, cells in enumerate(reader, start=1):
                    yield self._row(number, columns, cells)
            except UnicodeDecodeError as exc:
                raise JobFailed(f"The file is not UTF-8 text: {exc}") from None
            except csv.Error as exc:
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
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


class XlsxReader(_Reader):
    """The first sheet, read-only: openpyxl streams its rows rather than loading the
    sheet."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._done = 0
        self._total: int | None = None

    def fraction(self) -> float:
        return 0.0 if not self._total else min(1.0, self._done / self._total)

    def rows(self) -> Iterator[Row]:
        import openpyxl
        from openpyxl.utils.exceptions import InvalidFileException

        with open(self.path, "rb") as file:
            if file.read(4) != XLSX_MAGIC:
                raise JobFailed("The file is not an xlsx workbook.")
        try:
            book = openpyxl.load_workbook(self.path, read_only=True, data_only=True)
        except (InvalidFileException, KeyError, OSError, ValueError) as exc:
            raise JobFailed(f"The file is not a readable xlsx workbook: {exc}") from None
        try:
            sheet = book.worksheets[0]
            self._total = sheet.max_row
            values = sheet.iter_rows(values_only=True)
            header = next(values, None)
            if header is None:
                return
            while header and header[-1] is None:
                header = header[:-1]
            columns = _columns(list(header))
            for number, cells in enumerate(values, start=1):
                self._done = number
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
        finally:
            book.close()


READERS: dict[str, type[_Reader]] = {"csv": CsvReader, "jsonl": JsonlReader, "xlsx": XlsxReader}


def open_reader(fmt: str, path: Path) -> _Reader:
    return READERS[fmt](path)
