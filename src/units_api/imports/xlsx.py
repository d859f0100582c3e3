"""Reading an xlsx workbook's first sheet as a stream, with bounded memory whatever the file.

The workbook is a zip of XML parts. Each part is decompressed a piece at a time, every byte
counted against the expanded cap, and fed to expat; the sheet's rows are handed on as they
end, so neither the sheet nor a cell is ever held whole beyond its caps:

- XML that declares a DTD or entities is refused before anything of it is used (no entity is
  ever expanded: no billion laughs, no external files);
- a cell holds at most `MAX_CELL_CHARS` characters, the shared strings table at most
  `MAX_SHARED_STRINGS_BYTES` (its text and a per-string overhead), and an XML token (a tag
  with its attributes, a comment) at most `MAX_TOKEN_BYTES`;
- what the parts expand to is at most the import's expanded cap.

Anything past them fails the job with a message that says which (`JobFailed`): a file's own
fault, never retried. Cells read as openpyxl reads them: numbers as int or float, booleans,
shared and inline strings, dates (a number styled as a date) as datetimes.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any
from xml.parsers import expat

from units_api.jobs.work import JobFailed

# The most characters a cell (csv, xlsx) may hold: a unit's body is at most
# UNITS_API_MAX_BODY_BYTES (1 MiB by default), so no field of one is longer.
MAX_CELL_CHARS = 1024 * 1024
# The most characters a line or a row of a file may hold (a csv row, a jsonl unit, an xlsx
# row's text).
MAX_LINE_CHARS = 4 * MAX_CELL_CHARS
# The shared strings table's budget: its characters (at most 4 bytes each as Python holds
# them) and a per-string overhead.
MAX_SHARED_STRINGS_BYTES = 64 * 1024 * 1024
_STRING_OVERHEAD = 64
# The longest XML token (a start tag with its attributes, a comment...) expat may buffer.
MAX_TOKEN_BYTES = 4 * 1024 * 1024
MAX_COLUMNS = 16_384  # a spreadsheet's columns, A to XFD
_PIECE = 64 * 1024

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_DATE_FORMATS = {14, 15, 16, 17, 18, 19, 20, 21, 22, 27, 30, 36, 45, 46, 47, 50, 57}
_QUOTED = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.')
_CELL_REF = re.compile(r"([A-Za-z]{1,3})")


class _Budget:
    """Decompressed bytes read from the workbook's parts, against the expanded cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.used = 0

    def take(self, count: int) -> None:
        self.used += count
        if self.used > self.cap:
            raise JobFailed(
                f"The workbook expands to more than {self.cap:,} bytes "
                "(UNITS_API_MAX_IMPORT_EXPANDED_BYTES)."
            )


def _local(name: str) -> str:
    return name.rsplit(":", 1)[-1]


class _Part:
    """One XML part of the workbook, parsed as a stream by expat with the given handlers."""

    def __init__(self, book: zipfile.ZipFile, name: str, budget: _Budget) -> None:
        self.book = book
        self.name = name
        self.budget = budget
        self.size = max(1, book.getinfo(name).file_size)
        self.done = 0
        self.parser = expat.ParserCreate()
        self.parser.buffer_text = True
        self.parser.buffer_size = _PIECE
        # Refused before anything is used: a DTD (internal or external), any entity.
        self.parser.StartDoctypeDeclHandler = self._refuse_dtd
        self.parser.EntityDeclHandler = self._refuse_dtd
        self.parser.UnparsedEntityDeclHandler = self._refuse_dtd
        self.parser.ExternalEntityRefHandler = self._refuse_dtd
        self._event_at = 0

    def _refuse_dtd(self, *_: Any) -> Any:
        raise JobFailed(
            f"The workbook's {self.name} declares a DTD or entities, which are not accepted."
        )

    def handle(
        self,
        start: Callable[[str, dict[str, str]], None] | None = None,
        end: Callable[[str], None] | None = None,
        text: Callable[[str], None] | None = None,
    ) -> None:
        def mark() -> None:
            self._event_at = self.parser.CurrentByteIndex

        if start is not None:

            def on_start(name: str, attributes: dict[str, str]) -> None:
                mark()
                start(_local(name), attributes)

            self.parser.StartElementHandler = on_start
        if end is not None:

            def on_end(name: str) -> None:
                mark()
                end(_local(name))

            self.parser.EndElementHandler = on_end

        def on_text(data: str) -> None:
            mark()
            if text is not None:
                text(data)

        self.parser.CharacterDataHandler = on_text
        self.parser.CommentHandler = lambda _: mark()

    def pieces(self) -> Iterator[None]:
        """Feed the part to the parser a piece at a time, pausing after each."""
        try:
            with self.book.open(self.name) as stream:
                while True:
                    data = stream.read(_PIECE)
                    self.budget.take(len(data))
                    self.done += len(data)
                    self.parser.Parse(data, not data)
                    if self.done - max(self._event_at, 0) > MAX_TOKEN_BYTES:
                        raise JobFailed(
                            f"The workbook's {self.name} has an XML token longer than "
                            f"{MAX_TOKEN_BYTES:,} bytes."
                        )
                    yield
                    if not data:
                        return
        except expat.ExpatError as exc:
            raise JobFailed(f"The workbook's {self.name} is not well-formed XML: {exc}") from None
        except (
            zipfile.BadZipFile,
            zlib.error,
            EOFError,
            OSError,
            NotImplementedError,
            RuntimeError,
        ) as exc:
            raise JobFailed(f"The workbook's {self.name} cannot be read: {exc}") from None

    def parse(self) -> None:
        for _ in self.pieces():
            pass


def _attribute(attributes: dict[str, str], name: str) -> str | None:
    for key, value in attributes.items():
        if _local(key) == name:
            return value
    return None


def _first_sheet(book: zipfile.ZipFile, budget: _Budget) -> tuple[str, bool]:
    """The first sheet's part name, and whether the workbook counts dates from 1904."""
    names = set(book.namelist())
    found: dict[str, Any] = {"rid": None, "date1904": False, "targets": {}}
    if "xl/workbook.xml" in names:
        part = _Part(book, "xl/workbook.xml", budget)

        def on_book(name: str, attributes: dict[str, str]) -> None:
            if name == "sheet" and found["rid"] is None:
                found["rid"] = _attribute(attributes, "id")
            elif name == "workbookPr":
                found["date1904"] = attributes.get("date1904") in ("1", "true")

        part.handle(start=on_book)
        part.parse()
    rels = "xl/_rels/workbook.xml.rels"
    if found["rid"] is not None and rels in names:
        part = _Part(book, rels, budget)

        def on_rel(name: str, attributes: dict[str, str]) -> None:
            if name == "Relationship":
                found["targets"][attributes.get("Id")] = attributes.get("Target", "")

        part.handle(start=on_rel)
        part.parse()
    target = found["targets"].get(found["rid"])
    if target:
        sheet = target.lstrip("/") if target.startswith("/") else posixpath.join("xl", target)
        sheet = posixpath.normpath(sheet)
        if sheet in names:
            return sheet, found["date1904"]
    sheets = sorted(n for n in names if re.fullmatch(r"xl/worksheets/sheet\d+\.xml", n))
    if not sheets:
        raise JobFailed("The file is not an xlsx workbook: it has no sheet.")
    return min(sheets, key=lambda n: int(re.sub(r"\D", "", n))), found["date1904"]


def _shared_strings(book: zipfile.ZipFile, budget: _Budget) -> list[str]:
    name = "xl/sharedStrings.xml"
    if name not in book.namelist():
        return []
    strings: list[str] = []
    state: dict[str, Any] = {"texts": None, "in_t": False, "phonetic": 0, "length": 0, "used": 0}

    def start(tag: str, _: dict[str, str]) -> None:
        if tag == "si":
            state["texts"], state["length"] = [], 0
        elif tag == "rPh":
            state["phonetic"] += 1
        elif tag == "t" and state["texts"] is not None and not state["phonetic"]:
            state["in_t"] = True

    def end(tag: str) -> None:
        if tag == "si" and state["texts"] is not None:
            text = "".join(state["texts"])
            state["texts"] = None
            state["used"] += len(text) * (1 if text.isascii() else 4) + _STRING_OVERHEAD
            if state["used"] > MAX_SHARED_STRINGS_BYTES:
                raise JobFailed(
                    f"The workbook's shared strings take more than "
                    f"{MAX_SHARED_STRINGS_BYTES:,} bytes."
                )
            strings.append(text)
        elif tag == "rPh":
            state["phonetic"] -= 1
        elif tag == "t":
            state["in_t"] = False

    def text(data: str) -> None:
        if state["in_t"]:
            state["length"] += len(data)
            if state["length"] > MAX_CELL_CHARS:
                raise JobFailed(
                    f"The workbook has a shared string longer than {MAX_CELL_CHARS:,} characters."
                )
            state["texts"].append(data)

    part = _Part(book, name, budget)
    part.handle(start, end, text)
    part.parse()
    return strings


def _is_date_format(code: str) -> bool:
    code = _QUOTED.sub("", code).split(";")[0].lower()
    return any(letter in code for letter in "dmyhs") and "general" not in code


def _date_styles(book: zipfile.ZipFile, budget: _Budget) -> set[int]:
    """The indexes of cell styles (`s`) whose number format is a date or time."""
    name = "xl/styles.xml"
    if name not in book.namelist():
        return set()
    custom: dict[int, str] = {}
    formats: list[int] = []
    state = {"in_xfs": False}

    def start(tag: str, attributes: dict[str, str]) -> None:
        if tag == "numFmt":
            with contextlib.suppress(ValueError, TypeError):
                custom[int(attributes["numFmtId"])] = attributes.get("formatCode", "")
        elif tag == "cellXfs":
            state["in_xfs"] = True
        elif tag == "xf" and state["in_xfs"]:
            try:
                formats.append(int(attributes.get("numFmtId", "0")))
            except ValueError:
                formats.append(0)

    def end(tag: str) -> None:
        if tag == "cellXfs":
            state["in_xfs"] = False

    part = _Part(book, name, budget)
    part.handle(start, end)
    part.parse()
    return {
        index
        for index, number in enumerate(formats)
        if number in _DATE_FORMATS or (number in custom and _is_date_format(custom[number]))
    }


def _column(reference: str | None, previous: int) -> int:
    """A cell's column from 1 (`B7` → 2), or the one after the previous cell."""
    if reference:
        match = _CELL_REF.match(reference)
        if match:
            number = 0
            for letter in match.group(1).upper():
                number = number * 26 + ord(letter) - 64
            return number
    return previous + 1


def _number(text: str) -> int | float:
    text = text.strip()
    if any(mark in text for mark in ".eE") or text.lower() in ("nan", "inf", "-inf"):
        return float(text)
    return int(text)


def _date(serial: float, date1904: bool) -> datetime:
    """openpyxl's reading of a spreadsheet date serial (1900 system's leap-year bug kept)."""
    if date1904:
        base = datetime(1904, 1, 1)
    else:
        base = datetime(1899, 12, 30)
        if 0 < serial < 60:
            serial += 1
    return base + timedelta(milliseconds=round(serial * 86_400_000))


class Sheet:
    """The first sheet's rows: (row number in the sheet, the cells' values from column A)."""

    def __init__(self, path: Path, cap: int) -> None:
        self._file: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed by close()
        try:
            self.book = zipfile.ZipFile(self._file)
            self.budget = _Budget(cap)
            name, self.date1904 = _first_sheet(self.book, self.budget)
            self.strings = _shared_strings(self.book, self.budget)
            self.dates = _date_styles(self.book, self.budget)
            self.part = _Part(self.book, name, self.budget)
        except zipfile.BadZipFile as exc:
            self._file.close()
            raise JobFailed(f"The file is not a complete xlsx workbook (zip): {exc}") from None
        except (
            KeyError,
            OSError,
            EOFError,
            zlib.error,
            ValueError,
            NotImplementedError,
            RuntimeError,
        ) as exc:
            self._file.close()
            raise JobFailed(f"The file is not a readable xlsx workbook: {exc}") from None
        except BaseException:
            self._file.close()
            raise

    def fraction(self) -> float:
        return min(1.0, self.part.done / self.part.size)

    def close(self) -> None:
        self.book.close()
        self._file.close()

    def rows(self) -> Iterator[tuple[int, list[Any]]]:
        ready: list[tuple[int, list[Any]]] = []
        state: dict[str, Any] = {
            "row": 0,
            "cells": None,
            "column": 0,
            "type": None,
            "style": None,
            "texts": None,
            "length": 0,
            "value": False,
            "inline": False,
            "phonetic": 0,
            "in_row": 0,
        }

        def start(tag: str, attributes: dict[str, str]) -> None:
            if tag == "row":
                try:
                    state["row"] = int(attributes.get("r") or state["row"] + 1)
                except ValueError:
                    state["row"] += 1
                state["cells"], state["column"], state["in_row"] = [], 0, 0
            elif tag == "c" and state["cells"] is not None:
                state["column"] = _column(attributes.get("r"), state["column"])
                if state["column"] > MAX_COLUMNS:
                    raise JobFailed(f"Row {state['row']} has a cell beyond column XFD.")
                state["type"] = attributes.get("t", "n")
                state["style"] = attributes.get("s")
                state["texts"], state["length"] = None, 0
            elif tag == "v" and state["cells"] is not None:
                state["value"] = True
                state["texts"] = state["texts"] or []
            elif tag == "is":
                state["inline"] = True
                state["texts"] = state["texts"] or []
            elif tag == "rPh":
                state["phonetic"] += 1
            elif tag == "t" and state["inline"] and not state["phonetic"]:
                state["value"] = True

        def end(tag: str) -> None:
            if tag == "c" and state["cells"] is not None:
                cells = state["cells"]
                value = self._value(state)
                column = state["column"]
                if value is not None:
                    cells.extend([None] * (column - len(cells)))
                    cells[column - 1] = value
            elif tag in ("v", "t"):
                state["value"] = False
            elif tag == "is":
                state["inline"] = False
            elif tag == "rPh":
                state["phonetic"] -= 1
            elif tag == "row" and state["cells"] is not None:
                ready.append((state["row"], state["cells"]))
                state["cells"] = None

        def text(data: str) -> None:
            if state["value"] and state["texts"] is not None:
                state["length"] += len(data)
                if state["length"] > MAX_CELL_CHARS:
                    raise JobFailed(
                        f"Row {state['row']} has a cell longer than {MAX_CELL_CHARS:,} characters."
                    )
                state["in_row"] += len(data)
                if state["in_row"] > MAX_LINE_CHARS:
                    raise JobFailed(
                        f"Row {state['row']} holds more than {MAX_LINE_CHARS:,} characters."
                    )
                state["texts"].append(data)

        self.part.handle(start, end, text)
        for _ in self.part.pieces():
            if ready:
                yield from ready
                ready.clear()

    def _value(self, state: dict[str, Any]) -> Any:
        texts = state["texts"]
        if texts is None:
            return None
        raw = "".join(texts)
        kind = state["type"]
        row = state["row"]
        try:
            if kind == "s":
                return self.strings[int(raw)]
            if kind in ("inlineStr", "str", "e"):
                return raw
            if kind == "b":
                return raw.strip() in ("1", "true")
            if kind == "d":
                return datetime.fromisoformat(raw.strip())
            if raw.strip() == "":
                return None
            number = _number(raw)
            style = state["style"]
            if style is not None and style.isdigit() and int(style) in self.dates:
                return _date(float(number), self.date1904)
            return number
        except (ValueError, IndexError, OverflowError):
            raise JobFailed(
                f"Row {row} has a cell of type {kind!r} whose value does not read."
            ) from None


@contextlib.contextmanager
def open_sheet(path: Path, cap: int) -> Iterator[Sheet]:
    sheet = Sheet(path, cap)
    try:
        yield sheet
    finally:
        sheet.close()
