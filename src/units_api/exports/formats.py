"""Export file formats: the columns of a unit, and one writer per format.

Every writer takes stored documents (the JSON text the API returns) in batches and writes
them in constant memory. Numbers and nested values are taken as the exact text they are
stored as (`split_document`), never through floats.

- jsonl: one document a line, as stored (projected by `fields` when asked).
- csv: UTF-8 with a BOM, a header of field names, nested values as compact JSON text.
- xlsx: one sheet; text is always text (never a formula or a link); a number that a
  spreadsheet cell holds exactly is a number, any other is its exact text.
- parquet: typed columns: money as decimal128(38, 20), times as UTC timestamps, nested values
  as JSON columns.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from units_api.filters.fields import Kind
from units_api.units.filtering import UNIT_CATALOGUE
from units_api.units.schemas import EDITABLE_FIELDS

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
# A document's fields in the order the API writes them.
DOCUMENT_ORDER = (
    "id",
    *EDITABLE_FIELDS,
    "createdAt",
    "updatedAt",
    "version",
    "publishing",
    "availability",
)
XLSX_MAX_ROWS = 1_048_576 - 1  # a sheet's rows, less the header
XLSX_MAX_CELL = 32_767  # characters a cell holds
_GZIP_LEVEL = 1  # fast; text shrinks about 6x already


class ExportError(Exception):
    """The units cannot be written in this format; the message says why and what to do."""


ColumnKind = Kind | Literal["json"]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: ColumnKind


def _kind(name: str) -> ColumnKind:
    field = UNIT_CATALOGUE.fields.get(name)
    if field is not None and field.path == (name,) and field.array is None:
        return field.kind
    return "json"


COLUMN_KINDS: dict[str, ColumnKind] = {name: _kind(name) for name in DOCUMENT_ORDER}


def columns_for(fields: Sequence[str] | None) -> list[Column]:
    """The columns of an export: every field in document order, or `id` and `fields`."""
    names = DOCUMENT_ORDER if fields is None else tuple(dict.fromkeys(["id", *fields]))
    return [Column(name, COLUMN_KINDS[name]) for name in names]


_SCAN = json.JSONDecoder(parse_float=Decimal).scan_once  # type: ignore[attr-defined]


def split_document(doc: str) -> dict[str, tuple[Any, str]]:
    """Each top-level field of a stored (compact) document: its value, numbers exact, and the
    exact JSON text it is stored as."""
    fields: dict[str, tuple[Any, str]] = {}
    index = 1
    end = len(doc) - 1
    while index < end:
        key, index = _SCAN(doc, index)
        value, after = _SCAN(doc, index + 1)
        fields[key] = (value, doc[index + 1 : after])
        index = after + 1
    return fields


class Writer(Protocol):
    def write(self, docs: Sequence[str]) -> None: ...

    def close(self) -> None: ...


def _binary(path: Path, compression: str) -> IO[bytes]:
    if compression == "gzip":
        return gzip.GzipFile(path, "wb", compresslevel=_GZIP_LEVEL)  # type: ignore[return-value]
    return open(path, "wb", buffering=1024 * 1024)


class JsonlWriter:
    def __init__(self, path: Path, columns: list[Column], compression: str) -> None:
        self._file = _binary(path, compression)
        self._names = None if len(columns) == len(DOCUMENT_ORDER) else [c.name for c in columns]

    def write(self, docs: Sequence[str]) -> None:
        lines = docs if self._names is None else [self._project(doc) for doc in docs]
        self._file.write(("\n".join(lines) + "\n").encode())

    def _project(self, doc: str) -> str:
        fields = split_document(doc)
        return (
            "{"
            + ",".join(
                f'"{name}":{fields[name][1]}' for name in self._names or () if name in fields
            )
            + "}"
        )

    def close(self) -> None:
        self._file.close()


def _cell_text(value: Any, raw: str) -> str:
    """A field as CSV text: nothing for null, text as it is, anything else as its JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return raw


class CsvWriter:
    def __init__(self, path: Path, columns: list[Column], compression: str) -> None:
        self._binary = _binary(path, compression)
        self._binary.write("\ufeff".encode())
        self._text = io.TextIOWrapper(self._binary, encoding="utf-8", newline="")
        self._csv = csv.writer(self._text, lineterminator="\r\n")
        self._columns = columns
        self._csv.writerow([column.name for column in columns])

    def write(self, docs: Sequence[str]) -> None:
        columns = self._columns
        rows = []
        for doc in docs:
            fields = split_document(doc)
            row = []
            for column in columns:
                value, raw = fields.get(column.name, (None, "null"))
                row.append(_cell_text(value, raw))
            rows.append(row)
        self._csv.writerows(rows)

    def close(self) -> None:
        self._text.close()


def _exact_float(value: Decimal | int) -> float | None:
    """The number as a float when a spreadsheet cell holds it exactly (its text comes back the
    same), else None."""
    number = float(value)
    if isinstance(value, int):
        return number if abs(value) < 2**53 else None
    return number if str(Decimal(repr(number))) == str(value) else None


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
        self._sheet = self._book.add_worksheet("units")
        self._columns = columns
        self._row = 0
        for index, column in enumerate(columns):
            self._sheet.write_string(0, index, column.name)

    def write(self, docs: Sequence[str]) -> None:
        sheet = self._sheet
        for doc in docs:
            self._row += 1
            if self._row > XLSX_MAX_ROWS:
                raise ExportError(
                    f"An xlsx sheet holds at most {XLSX_MAX_ROWS:,} units; narrow the export "
                    "with a filter, or export as csv, jsonl or parquet."
                )
            fields = split_document(doc)
            for index, column in enumerate(self._columns):
                value, raw = fields.get(column.name, (None, "null"))
                if value is None:
                    continue
                if isinstance(value, int | Decimal) and not isinstance(value, bool):
                    number = _exact_float(value)
                    if number is not None:
                        sheet.write_number(self._row, index, number)
                        continue
                text = value if isinstance(value, str) else raw
                if len(text) > XLSX_MAX_CELL:
                    raise ExportError(
                        f"Unit {fields['id'][0]}: its {column.name} is longer than the "
                        f"{XLSX_MAX_CELL:,} characters a spreadsheet cell holds; export as csv, "
                        "jsonl or parquet."
                    )
                sheet.write_string(self._row, index, text)

    def close(self) -> None:
        self._book.close()


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


class ParquetWriter:
    ROW_GROUP = 5000

    def __init__(self, path: Path, columns: list[Column], compression: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        kinds = {
            "text": pa.string(),
            "uuid": pa.string(),
            "number": pa.decimal128(38, 20),
            "integer": pa.int64(),
            "boolean": pa.bool_(),
            "time": pa.timestamp("us", tz="UTC"),
            "json": pa.json_(),
        }
        self._columns = columns
        self._schema = pa.schema([pa.field(c.name, kinds[c.kind]) for c in columns])
        self._writer = pq.ParquetWriter(str(path), self._schema, compression="zstd")

    def write(self, docs: Sequence[str]) -> None:
        pa = self._pa
        split = [split_document(doc) for doc in docs]
        arrays = []
        for column, field in zip(self._columns, self._schema, strict=True):
            pairs = [fields.get(column.name, (None, "null")) for fields in split]
            if column.kind == "json":
                texts = [None if value is None else raw for value, raw in pairs]
                storage = pa.array(texts, type=pa.string())
                arrays.append(pa.ExtensionArray.from_storage(field.type, storage))
            elif column.kind == "time":
                arrays.append(pa.array([_time(value) for value, _ in pairs], type=field.type))
            else:
                arrays.append(pa.array([value for value, _ in pairs], type=field.type))
        self._writer.write_table(
            pa.Table.from_arrays(arrays, schema=self._schema), row_group_size=self.ROW_GROUP
        )

    def close(self) -> None:
        self._writer.close()


WRITERS: dict[str, type[JsonlWriter | CsvWriter | XlsxWriter | ParquetWriter]] = {
    "jsonl": JsonlWriter,
    "csv": CsvWriter,
    "xlsx": XlsxWriter,
    "parquet": ParquetWriter,
}


def open_writer(fmt: str, path: Path, columns: list[Column], compression: str) -> Writer:
    return WRITERS[fmt](path, columns, compression)


def file_extension(fmt: str, compression: str) -> str:
    return f"{fmt}.gz" if compression == "gzip" else fmt
