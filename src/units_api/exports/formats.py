"""Export file formats: an export's columns (`units/columns.py`), and one writer per format.

Every writer takes stored documents (the JSON text the API returns) in batches and writes
them in constant memory. Numbers and nested values are taken as the exact text they are
stored as (`split_document`), never through floats.

- jsonl: one document a line, as stored (projected by `fields` when asked).
- csv: UTF-8 with a BOM, a header of field names, nested values as compact JSON text.
- xlsx: one sheet; text is always text (never a formula or a link); a number that a
  spreadsheet cell holds exactly is a number, any other is its exact text; the server's
  times are date cells; the header row is frozen, with filter buttons.
- csv and xlsx add the read-only STATUS_COLUMNS after the record's fields.
- parquet: typed columns: money as decimal128(38, 20), times as UTC timestamps, nested values
  as JSON columns.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Literal, Protocol

import orjson

from units_api.process import release_freed_memory
from units_api.units.columns import COLUMN_KINDS, STATUS_COLUMNS, ColumnKind
from units_api.units.fields import project
from units_api.units.schemas import DOCUMENT_ORDER

Format = Literal["csv", "jsonl", "xlsx", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "jsonl", "xlsx", "parquet")
COMPRESSIBLE = ("csv", "jsonl")  # xlsx and parquet are compressed already
MEDIA_TYPES = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "parquet": "application/vnd.apache.parquet",
}
GZIP_MEDIA_TYPE = "application/gzip"
XLSX_MAX_ROWS = 1_048_576 - 1  # a sheet's rows, less the header
XLSX_MAX_CELL = 32_767  # characters a cell holds
# The server's times, written to xlsx as date cells (a client's `readingDate`, inside
# `readings`, stays text).
XLSX_DATE_COLUMNS = frozenset({"createdAt", "updatedAt"})
XLSX_DATE_FORMAT = "yyyy-mm-dd hh:mm:ss.000"  # UTC, to the millisecond stored
# Column widths in characters: wide enough for the header and its filter button, and for a
# kind's usual value, but at most XLSX_MAX_WIDTH.
_XLSX_WIDTHS: dict[str, int] = {"uuid": 37, "time": 24, "json": 30, "text": 18}
XLSX_MAX_WIDTH = 40
_GZIP_LEVEL = 1  # fast; text shrinks about 6x already


class ExportError(Exception):
    """The units cannot be written in this format; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: ColumnKind


# Parquet's column type of exact numbers (money): decimal128(precision, scale).
PARQUET_DECIMAL = (38, 20)
_STATUS_OPENING = '{"status":"'


def _status(raw: str) -> str | None:
    """The `status` of a stored `publishing` or `availability` object's exact JSON text."""
    if raw.startswith(_STATUS_OPENING):
        start = len(_STATUS_OPENING)
        end = raw.find('"', start)
        if end > 0 and raw[end - 1] != "\\":
            return raw[start:end]
    value = json.loads(raw)
    return value.get("status") if isinstance(value, dict) else None


def columns_for(fields: Sequence[str] | None) -> list[Column]:
    """The columns of an export: every field in document order, or `id` and `fields`."""
    names = DOCUMENT_ORDER if fields is None else tuple(dict.fromkeys(["id", *fields]))
    return [Column(name, COLUMN_KINDS[name]) for name in names]


_SCAN = json.JSONDecoder(parse_float=Decimal).scan_once  # type: ignore[attr-defined]


def split_document(doc: str) -> dict[str, str]:
    """Each top-level field of a compact JSON document: the exact JSON text it is stored as
    (numbers as written, never through floats), by parsing it."""
    fields: dict[str, str] = {}
    index = 1
    end = len(doc) - 1
    while index < end:
        key, index = _SCAN(doc, index)
        _, after = _SCAN(doc, index + 1)
        fields[key] = doc[index + 1 : after]
        index = after + 1
    return fields


# A stored document lists its fields in DOCUMENT_ORDER, so the text of a field runs to the
# next field's `,"name":`. That sequence cannot occur inside a string (a quote in a string is
# escaped), nor inside a nested value, whose keys are never the name of the field that follows
# it (tests/exports/test_formats.py checks this on the schema).
_NEXT = [
    (name, f',"{following}":' if following else None)
    for name, following in zip(DOCUMENT_ORDER, (*DOCUMENT_ORDER[1:], None), strict=True)
]
_OPENING = '{"id":'


def field_texts(doc: str) -> dict[str, str]:
    """Each top-level field of a stored document as its exact JSON text; a document not
    laid out in DOCUMENT_ORDER is parsed instead."""
    if not doc.startswith(_OPENING):
        return split_document(doc)
    fields: dict[str, str] = {}
    start = len(_OPENING)
    for name, marker in _NEXT:
        if marker is None:
            end = len(doc) - 1
        else:
            end = doc.find(marker, start)
            if end < 0:
                return split_document(doc)
        fields[name] = doc[start:end]
        start = end + (len(marker) if marker else 0)
    return fields


def _text(raw: str) -> str:
    """A JSON string's value."""
    return raw[1:-1] if "\\" not in raw else str(json.loads(raw))


def _arrow() -> Any:
    """pyarrow, allocating through malloc: its default allocator keeps freed memory for
    reuse, which a long export in constant memory does not need (measured: 20 MB less)."""
    import pyarrow as pa

    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
    return pa


class Writer(Protocol):
    def write(self, docs: Sequence[bytes]) -> None:
        """Write stored documents (UTF-8 JSON)."""

    def close(self) -> None: ...


def _binary(path: Path, compression: str) -> IO[bytes]:
    if compression == "gzip":
        return gzip.GzipFile(path, "wb", compresslevel=_GZIP_LEVEL)  # type: ignore[return-value]
    return open(path, "wb", buffering=1024 * 1024)


class JsonlWriter:
    def __init__(self, path: Path, columns: list[Column], compression: str) -> None:
        self._file = _binary(path, compression)
        self._names = None if len(columns) == len(DOCUMENT_ORDER) else [c.name for c in columns]

    def write(self, docs: Sequence[bytes]) -> None:
        names = self._names
        if names is None:
            self._file.write(b"\n".join(docs) + b"\n")
        else:
            lines = (orjson.dumps(project(doc.decode(), names, {})) for doc in docs)
            self._file.write(b"\n".join(lines) + b"\n")

    def close(self) -> None:
        self._file.close()


def _cell(raw: str) -> str | None:
    """A field as CSV text: null as it is (an empty cell), text as it is, anything else as
    its JSON."""
    if raw == "null":
        return None
    return _text(raw) if raw[0] == '"' else raw


class CsvWriter:
    """Through pyarrow's CSV writer (C++): every text is quoted, a null is an empty cell.
    The STATUS_COLUMNS come after the record's fields."""

    def __init__(self, path: Path, columns: list[Column], compression: str) -> None:
        import pyarrow.csv as pa_csv

        pa = self._pa = _arrow()
        self._binary = _binary(path, compression)
        self._binary.write("\ufeff".encode())
        self._names = [column.name for column in columns]
        self._schema = pa.schema(
            [pa.field(name, pa.string()) for name in [*self._names, *STATUS_COLUMNS]]
        )
        options = pa_csv.WriteOptions(include_header=True, quoting_style="needed", eol="\r\n")
        self._csv = pa_csv.CSVWriter(
            pa.PythonFile(self._binary, mode="w"), self._schema, write_options=options
        )

    def write(self, docs: Sequence[bytes]) -> None:
        pa = self._pa
        split = [field_texts(doc.decode()) for doc in docs]
        arrays = [
            pa.array([_cell(fields[name]) for fields in split], pa.string()) for name in self._names
        ]
        arrays += [
            pa.array([_status(fields[source]) for fields in split], pa.string())
            for source in STATUS_COLUMNS.values()
        ]
        self._csv.write_table(pa.Table.from_arrays(arrays, schema=self._schema))

    def close(self) -> None:
        self._csv.close()
        self._binary.close()


def _exact_float(raw: str) -> float | None:
    """The number as a float when a spreadsheet cell holds it exactly (its text comes back the
    same), else None."""
    number = float(raw)
    if raw.lstrip("-").isdigit():
        return number if abs(int(raw)) < 2**53 else None
    return number if repr(number) == raw else None


class XlsxWriter:
    def __init__(self, path: Path, columns: list[Column], compression: str) -> None:
        import xlsxwriter

        self._book = xlsxwriter.Workbook(
            str(path),
            {
                "constant_memory": True,
                "strings_to_formulas": False,
                "strings_to_urls": False,
                "strings_to_numbers": False,
            },
        )
        # A million units make a sheet of more than 4 GB before compression. The zip module
        # adds ZIP64 records only to a member that needs them, so smaller files are unchanged.
        self._book.use_zip64()
        self._sheet = self._book.add_worksheet("units")
        self._columns = columns
        # How each column's cells are written: its index, field and way, decided once.
        self._plan = [
            (index, column.name, _xlsx_way(column)) for index, column in enumerate(columns)
        ]
        self._dates = self._book.add_format({"num_format": XLSX_DATE_FORMAT})
        self._row = 0
        names = [*(column.name for column in columns), *STATUS_COLUMNS]
        for index, name in enumerate(names):
            self._sheet.write_string(0, index, name)
            self._sheet.set_column(index, index, _xlsx_width(name, COLUMN_KINDS[name]))
        self._sheet.freeze_panes(1, 0)

    def write(self, docs: Sequence[bytes]) -> None:
        sheet = self._sheet
        for doc in docs:
            self._row += 1
            if self._row > XLSX_MAX_ROWS:
                raise ExportError(
                    f"An xlsx sheet holds at most {XLSX_MAX_ROWS:,} units; narrow the export "
                    "with a filter, or export as csv, jsonl or parquet."
                )
            fields = field_texts(doc.decode())
            for index, name, way in self._plan:
                raw = fields[name]
                if raw == "null":
                    continue
                if way is _NUMBER:
                    number = _exact_float(raw)
                    if number is not None:
                        sheet.write_number(self._row, index, number)
                        continue
                elif way is _DATE:
                    sheet.write_number(self._row, index, _serial(raw), self._dates)
                    continue
                text = _text(raw) if raw[0] == '"' else raw
                if len(text) > XLSX_MAX_CELL:
                    raise ExportError(
                        f"Unit {_text(fields['id'])}: its {name} is longer than the "
                        f"{XLSX_MAX_CELL:,} characters a spreadsheet cell holds; export as csv, "
                        "jsonl or parquet."
                    )
                sheet.write_string(self._row, index, text)
            for offset, source in enumerate(STATUS_COLUMNS.values(), start=len(self._columns)):
                status = _status(fields[source])
                if status is not None:
                    sheet.write_string(self._row, offset, status)

    def close(self) -> None:
        self._sheet.autofilter(0, 0, self._row, len(self._columns) + len(STATUS_COLUMNS) - 1)
        self._book.close()


_NUMBER, _DATE, _TEXT = "number", "date", "text"
_EXCEL_EPOCH = datetime(1899, 12, 30, tzinfo=UTC)  # day 0 (days from 1900-03-01 on)
_DAY = timedelta(days=1)


def _xlsx_way(column: Column) -> str:
    if column.kind in ("number", "integer"):
        return _NUMBER
    return _DATE if column.name in XLSX_DATE_COLUMNS else _TEXT


def _serial(raw: str) -> float:
    """A stored time's JSON text as a spreadsheet's date serial (days since its epoch); read
    back to the millisecond, it is the same time."""
    return (datetime.fromisoformat(raw[1:-1]) - _EXCEL_EPOCH) / _DAY


def _xlsx_width(name: str, kind: ColumnKind) -> int:
    return min(max(len(name) + 3, _XLSX_WIDTHS.get(kind, 12)), XLSX_MAX_WIDTH)


# Text columns with few distinct values, written with a dictionary in parquet.
DICTIONARY_COLUMNS = frozenset({"type", "location", "city", "priceBase", "subProjectId"})


class ParquetWriter:
    """Row groups gathered as Arrow tables. The writer keeps every row group's metadata until
    the footer is written (measured: about 36 bytes a unit at 1,000 units a group), so a
    group holds `rows / MAX_GROUPS` units, between MIN_GROUP and MAX_GROUP: memory stays
    about the same up to MAX_GROUPS * MAX_GROUP units, and a small export still has groups a
    reader can skip."""

    MIN_GROUP = 1000
    MAX_GROUP = 10_000
    MAX_GROUPS = 400

    def __init__(self, path: Path, columns: list[Column], compression: str, rows: int = 0) -> None:
        import pyarrow.parquet as pq

        self._group = min(max(rows // self.MAX_GROUPS, self.MIN_GROUP), self.MAX_GROUP)

        pa = self._pa = _arrow()
        kinds = {
            "text": pa.string(),
            "uuid": pa.string(),
            "number": pa.decimal128(*PARQUET_DECIMAL),
            "integer": pa.int64(),
            "boolean": pa.bool_(),
            "time": pa.timestamp("us", tz="UTC"),
            "json": pa.json_(),
        }
        self._columns = columns
        self._schema = pa.schema([pa.field(c.name, kinds[c.kind]) for c in columns])
        # Statistics of nested (JSON) columns would put whole documents in the footer.
        scalars = [c.name for c in columns if c.kind != "json"]
        # Dictionaries only where values repeat: for free text and documents they cost
        # memory and time and the file is no smaller (measured: 15 MB less, 10 % faster).
        repeated = [c.name for c in columns if c.name in DICTIONARY_COLUMNS]
        self._writer = pq.ParquetWriter(
            str(path),
            self._schema,
            compression="zstd",
            write_statistics=scalars,
            use_dictionary=repeated,
        )
        self._pending: list[Any] = []  # tables of the row group being gathered
        self._rows = 0

    def write(self, docs: Sequence[bytes]) -> None:
        pa = self._pa
        split = [field_texts(doc.decode()) for doc in docs]
        arrays = []
        for column, field in zip(self._columns, self._schema, strict=True):
            raws = [fields[column.name] for fields in split]
            if column.kind in ("text", "uuid", "time"):
                texts = pa.array([None if r == "null" else _text(r) for r in raws], pa.string())
                arrays.append(texts if column.kind != "time" else texts.cast(field.type))
            elif column.kind == "json":
                storage = pa.array([None if r == "null" else r for r in raws], pa.string())
                arrays.append(pa.ExtensionArray.from_storage(field.type, storage))
            else:  # numbers and booleans, from their exact JSON text
                texts = pa.array([None if r == "null" else r for r in raws], pa.string())
                arrays.append(texts.cast(field.type))
        self._pending.append(pa.Table.from_arrays(arrays, schema=self._schema))
        self._rows += len(docs)
        if self._rows >= self._group:
            self._flush()

    def _flush(self) -> None:
        """One row group of the gathered rows (the tables are joined without a copy); then the
        memory they held goes back to the system."""
        if self._pending:
            group = self._pa.concat_tables(self._pending)
            self._pending, self._rows = [], 0
            self._writer.write_table(group, row_group_size=len(group))
            del group
            release_freed_memory()

    def close(self) -> None:
        self._flush()
        self._writer.close()


WRITERS: dict[str, type[JsonlWriter | CsvWriter | XlsxWriter | ParquetWriter]] = {
    "jsonl": JsonlWriter,
    "csv": CsvWriter,
    "xlsx": XlsxWriter,
    "parquet": ParquetWriter,
}


def open_writer(
    fmt: str, path: Path, columns: list[Column], compression: str, rows: int = 0
) -> Writer:
    """A writer of `fmt` to `path`; `rows` (how many units are coming, if known) sizes
    parquet's row groups."""
    if fmt == "parquet":
        return ParquetWriter(path, columns, compression, rows)
    return WRITERS[fmt](path, columns, compression)


def file_extension(fmt: str, compression: str) -> str:
    return f"{fmt}.gz" if compression == "gzip" else fmt
