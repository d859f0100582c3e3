"""Hostile import files, built small or at any size: a truncated workbook, XML that declares
entities, zip and gzip bombs, a header line with no end, cells and rows past an import's caps,
text that is not UTF-8, a cut gzip stream.

`bench/hostile.py` uploads them to a running server and `tests/imports/test_hostile.py`
imports them; each chooses the sizes (what a bomb expands to, how long a cell is). Big files
are written a piece at a time, so building one never holds what it expands to.
"""

from __future__ import annotations

import gzip
import io
import zipfile
from collections.abc import Callable
from typing import IO

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
MiB = 1024 * 1024
HEADER_ROW = b'<row r="1"><c r="A1" t="inlineStr"><is><t>name</t></is></c></row>'
LAUGHS = (
    b'<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">'
    b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
)
_CLOSING = b"</sheetData></worksheet>"

SheetWriter = Callable[[IO[bytes]], None]


def _opening(prolog: bytes = b"") -> bytes:
    return (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        + prolog
        + f'<worksheet xmlns="{MAIN}"><sheetData>'.encode()
    )


def sheet_xml(rows: bytes, prolog: bytes = b"") -> bytes:
    return _opening(prolog) + rows + _CLOSING


def xlsx(sheet: bytes | SheetWriter, strings: bytes | None = None) -> bytes:
    """A minimal workbook whose first sheet's XML is `sheet` (or written by the callable to
    the open zip member, a piece at a time), with `strings` as its shared strings."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
            'package/2006/content-types"/>',
        )
        book.writestr(
            "xl/workbook.xml",
            f'<workbook xmlns="{MAIN}" xmlns:r="http://schemas.openxmlformats.org/'
            'officeDocument/2006/relationships"><sheets><sheet name="S" sheetId="1" '
            'r:id="rId1"/></sheets></workbook>',
        )
        book.writestr(
            "xl/_rels/workbook.xml.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            'relationships"><Relationship Id="rId1" Target="worksheets/sheet1.xml" '
            'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'worksheet"/></Relationships>',
        )
        if strings is not None:
            book.writestr("xl/sharedStrings.xml", strings)
        if callable(sheet):
            with book.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as member:
                sheet(member)
        else:
            book.writestr("xl/worksheets/sheet1.xml", sheet)
    return buffer.getvalue()


def _filled(before: bytes, byte: bytes, size: int, after: bytes) -> SheetWriter:
    """A sheet writer: `before`, then `size` copies of `byte` a MiB at a time, then `after`."""

    def write(member: IO[bytes]) -> None:
        member.write(before)
        for start in range(0, size, MiB):
            member.write(byte * min(MiB, size - start))
        member.write(after)

    return write


def truncated_xlsx(size: int = 200) -> bytes:
    """A whole workbook's first `size` bytes."""
    return xlsx(sheet_xml(HEADER_ROW))[:size]


def entity_sheet() -> bytes:
    """A workbook whose sheet's XML declares entities (a billion laughs) and uses them."""
    return xlsx(sheet_xml(HEADER_ROW.replace(b"name", b"&lol3;"), LAUGHS))


def entity_strings() -> bytes:
    """A workbook whose shared strings declare entities."""
    return xlsx(
        sheet_xml(b'<row r="1"><c r="A1" t="s"><v>0</v></c></row>'),
        b'<?xml version="1.0"?>'
        + LAUGHS
        + f'<sst xmlns="{MAIN}"><si><t>&lol3;</t></si></sst>'.encode(),
    )


def zip_bomb(size: int, after_rows: bytes = b"") -> bytes:
    """A workbook whose sheet holds `size` bytes of whitespace after its header row (then
    `after_rows`): a few kB that expand to `size`."""
    return xlsx(_filled(_opening() + HEADER_ROW, b" ", size, after_rows + _CLOSING))


def huge_cell(size: int) -> bytes:
    """A workbook whose second row is one cell of `size` characters."""
    opening = _opening() + HEADER_ROW + b'<row r="2"><c r="A2" t="inlineStr"><is><t>'
    return xlsx(_filled(opening, b"x", size, b"</t></is></c></row>" + _CLOSING))


def xlsx_row_of_long_cells(cell_chars: int) -> bytes:
    """A workbook whose second row has five cells of `cell_chars` characters each."""
    cell = b'<c t="inlineStr"><is><t>' + b"y" * cell_chars + b"</t></is></c>"
    return xlsx(sheet_xml(HEADER_ROW + b'<row r="2">' + cell * 5 + b"</row>"))


def csv_row_of_long_cells(cell_chars: int) -> bytes:
    """A csv row of five quoted cells of about `cell_chars` characters each, in lines of
    1,000."""
    quoted = b'"' + (b"z" * 999 + b"\n") * (cell_chars // 1000) + b'"'
    return b"name,type,city,unitNameAr,subProjectId\n" + b",".join([quoted] * 5) + b"\n"


def long_header(size: int) -> bytes:
    """A csv header line of `size` characters with no end."""
    return b"n" * size


def gzip_bomb(size: int) -> bytes:
    """A gzip jsonl of `size` bytes of blank lines, a MiB each."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9) as out:
        for _ in range(size // MiB):
            out.write(b" " * (MiB - 1) + b"\n")
    return buffer.getvalue()


def not_utf8_csv() -> bytes:
    return b"name,type\n\xff\xfeVilla,villa\n"


def broken_gzip() -> bytes:
    """A gzip csv cut before its end."""
    return gzip.compress(b"name\nx\n")[:-12]
