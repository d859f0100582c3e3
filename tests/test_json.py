"""JSON writing: the fast encoder of plain data writes exactly what the general one does."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from units_api.clock import utcnow
from units_api.http.json import dumps, dumps_plain, parse_exact
from units_api.ids import uuid7
from units_api.sample_data import fake_unit
from units_api.units.record import UnitRecord, creation_changes, new_availability, new_publishing
from units_api.units.validation import validate_unit

DECIMALS = st.decimals(allow_nan=False, allow_infinity=False)
# Integers within 64 bits: orjson refuses larger ones (units hold none: numbers are bounded).
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text() | DECIMALS
PLAIN = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(value=PLAIN)
def test_plain_data_is_written_byte_for_byte_as_dumps_writes_it(value: Any) -> None:
    assert dumps_plain(value) == dumps(value)


@settings(max_examples=200, deadline=None)
@given(value=DECIMALS)
def test_a_decimal_reads_back_as_the_same_digits(value: Decimal) -> None:
    read = parse_exact(dumps_plain([value]))[0]
    assert str(read) == str(value) if isinstance(read, Decimal) else read == value


def test_seeded_units_and_their_changes_are_written_alike() -> None:
    rng = random.Random(8)
    for _ in range(200):
        now = utcnow()
        fields = validate_unit(fake_unit(rng))
        record = UnitRecord(uuid7(), 1, now, now, fields, new_publishing(), new_availability(now))
        assert dumps_plain(record.document()) == dumps(record.document())
        assert dumps_plain(creation_changes(fields)) == dumps(creation_changes(fields))
