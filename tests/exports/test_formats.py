"""The export formats' reading of stored documents: the fast field slicer gives exactly what
parsing gives, whatever the text holds; parquet's row groups."""

from __future__ import annotations

import itertools
import os
import random
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from units_api.exports.formats import (
    ParquetWriter,
    columns_for,
    field_texts,
    open_writer,
    split_document,
)
from units_api.process import WRITEBACK_BYTES, Writeback
from units_api.sample_data import fake_unit
from units_api.units.columns import DOCUMENT_ORDER
from units_api.units.record import UnitRecord, new_availability, new_publishing
from units_api.units.schemas import UnitFields
from units_api.units.validation import validate_unit

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
UUID = "01a20e30-443e-744e-b8d5-81633dd90dde"


def stored(fields: dict[str, Any]) -> str:
    record = UnitRecord(
        uuid.UUID(UUID), 3, NOW, NOW, fields, new_publishing(), new_availability(NOW)
    )
    return record.render().decode()


def nested_keys(schema: dict[str, Any], node: Any) -> set[str]:
    """Every property name anywhere inside a JSON schema node."""
    found: set[str] = set()
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            node = schema["$defs"][name]
        for key, value in node.get("properties", {}).items():
            found.add(key)
            found |= nested_keys(schema, value)
        for part in ("items", "anyOf", "allOf", "oneOf"):
            value = node.get(part)
            for each in value if isinstance(value, list) else [value] if value else []:
                found |= nested_keys(schema, each)
    return found


def test_no_nested_value_has_a_key_named_like_the_field_after_it() -> None:
    """What lets the slicer end a field at the next field's name (see field_texts)."""
    schema = UnitFields.model_json_schema()
    servers = {
        "publishing": {"status", "publishedAt", "scheduledAt", "channels"},
        "availability": {"status", "reservedUntil", "changedAt"},
    }
    for name, following in itertools.pairwise(DOCUMENT_ORDER):
        if name in servers:
            inner = servers[name]
        elif name in schema["properties"]:
            inner = nested_keys(schema, schema["properties"][name])
        else:
            continue
        assert following not in inner, (name, following)


def test_seeded_units_slice_as_they_parse() -> None:
    rng = random.Random(11)
    for _ in range(300):
        doc = stored(validate_unit(fake_unit(rng)))
        assert field_texts(doc) == split_document(doc)
        assert list(field_texts(doc)) == list(DOCUMENT_ORDER)


PIECES = [*'abc ,:"\\{}[]\n\u0627\u0644', ',"type":', ',"city":', '"}', ',"unitDesc":']
TRICKY = st.lists(st.sampled_from(PIECES), max_size=20).map("".join)


@settings(max_examples=300, deadline=None)
@given(name=TRICKY, desc=TRICKY, city=st.none() | TRICKY, plan=TRICKY)
def test_any_text_slices_as_it_parses(name: str, desc: str, city: str | None, plan: str) -> None:
    body = {
        "name": name if name.strip() else "x",
        "type": "villa",
        "city": city,
        "unitDesc": desc,
        "paymentPlans": [{"planName": plan, "planDesc": ',"floorsPlan":'}],
        "unitLocation": {"type": "Point", "coordinates": [31, 30]},
    }
    doc = stored(validate_unit(body))
    assert field_texts(doc) == split_document(doc)


def test_a_document_in_another_order_is_parsed() -> None:
    doc = '{"name":"A","id":"x","price":1.50}'
    assert field_texts(doc) == {"name": '"A"', "id": '"x"', "price": "1.50"}


def test_parquet_row_groups_grow_with_the_announced_count(tmp_path: Path) -> None:
    """Small exports get groups of MIN_GROUP units; a large one fewer, larger groups (at most
    MAX_GROUP units), so the footer the writer keeps in memory stays about the same size."""
    rng = random.Random(5)
    docs = [stored(validate_unit(fake_unit(rng))).encode() for _ in range(100)]
    sizes = {}
    for announced in (0, 5000 * ParquetWriter.MAX_GROUPS, 10**9):
        path = tmp_path / f"{announced}.parquet"
        writer = open_writer("parquet", path, columns_for(None), "none", announced)
        for _ in range(250):
            writer.write(docs)
        writer.close()
        metadata = pq.ParquetFile(path).metadata
        assert metadata.num_rows == 25_000
        sizes[announced] = [
            metadata.row_group(index).num_rows for index in range(metadata.num_row_groups)
        ]
    assert sizes[0] == [ParquetWriter.MIN_GROUP] * 25
    assert sizes[5000 * ParquetWriter.MAX_GROUPS] == [5000] * 5
    assert sizes[10**9] == [ParquetWriter.MAX_GROUP] * 2 + [5000]


def test_an_export_file_is_written_back_as_it_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every WRITEBACK_BYTES of growth the file is synced (and dropped from the page cache),
    so the kernel never holds gigabytes of it dirty; a file not created yet is no error."""
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    path = tmp_path / "export.jsonl"
    writeback = Writeback(path)
    writeback.step()  # no file yet
    chunk = b"x" * (WRITEBACK_BYTES // 2 + 1)
    with path.open("wb") as file:
        for _ in range(5):
            file.write(chunk)
            file.flush()
            writeback.step()
    writeback.close()
    assert len(synced) == 2  # at 2 and 4 chunks: past 8 MB each time
    assert path.stat().st_size == 5 * len(chunk)
