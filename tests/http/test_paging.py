"""The paging pieces every paged endpoint uses: limits, cursors, page links."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import orjson
import pytest
from starlette.datastructures import URL

from units_api.errors import InvalidParameter
from units_api.http.paging import (
    INTEGER,
    NUMBER,
    TEXT,
    TIME,
    UUID,
    Keyset,
    Limit,
    link_header,
    nullable,
    page_links,
)

KEYSET = Keyset("test:price:a", (nullable(NUMBER), TIME, nullable(TEXT), UUID))


def forged(*parts: object) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(parts))).decode().rstrip("=")


def test_a_limit_has_its_default_and_bounds() -> None:
    limit = Limit(default=50, maximum=200)
    assert limit.parse(None) == 50
    assert limit.parse("1") == 1 and limit.parse("200") == 200
    for raw in ("0", "201", "-1", "abc", "", "1.5", " 3"):
        with pytest.raises(InvalidParameter) as caught:
            limit.parse(raw)
        assert caught.value.extra == {"parameter": "limit"}
        assert "from 1 to 200" in caught.value.detail
    assert limit.schema == {"type": "integer", "minimum": 1, "maximum": 200, "default": 50}


def test_a_cursor_gives_back_its_typed_values() -> None:
    values = (Decimal("1234567.89"), datetime(2026, 11, 22, 9, 30, tzinfo=UTC), None, uuid.uuid4())
    cursor = KEYSET.encode(values)
    assert cursor.replace("-", "").replace("_", "").isalnum()
    assert KEYSET.decode(cursor) == values
    assert KEYSET.decode(None) is None


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "%%%",
        "not base64!",
        "WyJ4Il0",  # ["x"]: another scope
        forged("test:price:d", "1", "2026-11-22T09:30:00+00:00", None, str(uuid.uuid4())),
        forged("test:price:a", "1", "2026-11-22T09:30:00+00:00", None),
        forged("test:price:a", "NaN", "2026-11-22T09:30:00+00:00", None, str(uuid.uuid4())),
        forged("test:price:a", "1", "yesterday", None, str(uuid.uuid4())),
        forged("test:price:a", "1", "2026-11-22T09:30:00", None, str(uuid.uuid4())),
        forged("test:price:a", "1", None, None, str(uuid.uuid4())),
        forged("test:price:a", "1", "2026-11-22T09:30:00+00:00", 7, str(uuid.uuid4())),
        forged("test:price:a", "1", "2026-11-22T09:30:00+00:00", None, "no-uuid"),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        base64.urlsafe_b64encode(b'{"a": 1}').decode(),
    ],
)
def test_a_bad_or_foreign_cursor_is_a_400_naming_it(cursor: str) -> None:
    with pytest.raises(InvalidParameter) as caught:
        KEYSET.decode(cursor)
    assert caught.value.status == 400
    assert caught.value.extra == {"parameter": "cursor"}


def test_integers_are_integers() -> None:
    keyset = Keyset("n", (INTEGER,))
    assert keyset.decode(keyset.encode([41])) == (41,)
    for value in (True, "41", 41.0):
        with pytest.raises(InvalidParameter):
            keyset.decode(forged("n", value))


def test_a_page_of_limit_plus_one_rows_gives_the_cursor_after_its_last() -> None:
    keyset = Keyset("n", (INTEGER,))
    rows = [{"id": n} for n in range(4)]
    shown, cursor = keyset.page(rows, 3, lambda row: (row["id"],))
    assert shown == rows[:3] and keyset.decode(cursor) == (2,)
    assert keyset.page(rows[:3], 3, lambda row: (row["id"],)) == (rows[:3], None)
    assert keyset.page([], 3, lambda row: (row["id"],)) == ([], None)


def test_page_links_keep_the_other_parameters_and_the_link_header_skips_nulls() -> None:
    url = URL("http://units.test/api/v2/units/?limit=2&p=city%3D%3DCairo&page=2")
    links = page_links(url, page=2, last=2, has_next=False)
    assert links == {
        "self": "http://units.test/api/v2/units/?limit=2&p=city%3D%3DCairo&page=2",
        "first": "http://units.test/api/v2/units/?limit=2&p=city%3D%3DCairo&page=1",
        "prev": "http://units.test/api/v2/units/?limit=2&p=city%3D%3DCairo&page=1",
        "next": None,
        "last": "http://units.test/api/v2/units/?limit=2&p=city%3D%3DCairo&page=2",
    }
    assert page_links(URL("http://units.test/x"), 1, None, True)["next"] == (
        "http://units.test/x?page=2"
    )
    header = link_header(links)
    assert 'rel="next"' not in header and header.count("rel=") == 4
    assert header.startswith("<http://units.test/api/v2/units/?limit=2&p=city%3D%3DCairo&page=2>")
