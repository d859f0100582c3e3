"""A search walked in creation order tests its words' signature bits on the index before it
reads a unit's words (search.index.walked_rows). The signature must never turn away a unit that
has the words: checked against the words' own matching rule in Python, then on PostgreSQL,
where the walk must give exactly what the search index gives, through every way a search
row is written (COPY, a batch, one unit, an update) and for rows not yet signed."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, text

from tests.conftest import fresh_postgres
from units_api.clock import utcnow
from units_api.db import Database, create_engine
from units_api.ids import uuid7
from units_api.migrate import upgrade
from units_api.search.index import newest_matches, search_condition
from units_api.search.normalize import query_tokens
from units_api.search.rank import ranked_matches, relevance_tiers
from units_api.search.upkeep import VACUUM_LOCK, vacuum_search
from units_api.search.words import (
    SIGNATURE_COLUMNS,
    Term,
    index_text,
    signature,
    signed_part,
    terms,
)
from units_api.units import changes
from units_api.units.record import UnitRecord, new_availability, new_publishing
from units_api.units.tables import units
from units_api.units.validation import validate_unit

# Words that share their first letters, English plurals and stems, Arabic words with and
# without their article and attached prepositions, and words of one and two letters.
VOCABULARY = [
    "villa",
    "villas",
    "village",
    "vil",
    "garden",
    "gardens",
    "gardening",
    "gate",
    "sea",
    "seas",
    "season",
    "view",
    "views",
    "pool",
    "pools",
    "penthouse",
    "penthouses",
    "a",
    "ab",
    "x1",
    "2br",
    "القاهرة",
    "بالقاهرة",
    "قاهرة",
    "حديقة",
    "بحديقة",
    "الحديقة",
    "شقة",
    "شقق",
    "مارينا",
    "وال",
    "بحر",
]


def has(term: Term, lexemes: list[str]) -> bool:
    """The search index's rule for one word: its stem whole, or a lexeme it begins."""
    return any(
        (lexeme.startswith(option) if prefix else lexeme == option)
        for option, prefix in term.alternatives
        for lexeme in lexemes
    )


def passes(term: Term, lexemes: list[str]) -> bool:
    """Whether the signature of `lexemes` lets a unit through for `term`."""
    if term.bits is None:
        return True
    signed = signature(lexemes)
    return any(
        all(signed[bit >> 6] & signed_part(1 << (bit & 63)) for bit in bits) for bits in term.bits
    )


words = st.one_of(
    st.sampled_from(VOCABULARY),
    st.text(st.sampled_from("abcsvilqشقحديه"), min_size=1, max_size=6),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(words, min_size=1, max_size=12), st.lists(words, min_size=1, max_size=4))
def test_the_signature_keeps_every_unit_with_the_words(
    text_words: list[str], asked: list[str]
) -> None:
    lexemes = index_text({"unitDesc": " ".join(text_words)}).lexemes
    for term in terms(query_tokens(" ".join(asked))):
        if has(term, lexemes):
            assert passes(term, lexemes), (term, lexemes)


def test_the_signature_turns_away_most_units_without_the_words() -> None:
    rng = random.Random(19)
    turned = kept = 0
    for _ in range(2000):
        lexemes = index_text({"unitDesc": " ".join(rng.sample(VOCABULARY, 6))}).lexemes
        for term in terms(query_tokens(rng.choice(VOCABULARY))):
            if term.bits is not None and not has(term, lexemes):
                turned += not passes(term, lexemes)
                kept += passes(term, lexemes)
    assert turned > 3 * kept


def test_a_prefix_too_short_is_not_tested() -> None:
    (short,) = terms(["ga"])
    assert short.bits is None
    (whole,) = terms(["gardens"])  # its stem whole, or the word as a prefix
    assert whole.bits is not None


def test_the_signature_is_the_same_in_every_process() -> None:
    lexemes = index_text({"unitDesc": " ".join(VOCABULARY)}).lexemes
    program = (
        "from units_api.search.words import index_text, signature\n"
        f"print(signature(index_text({{'unitDesc': {' '.join(VOCABULARY)!r}}}).lexemes))"
    )
    others = {
        subprocess.run(
            [sys.executable, "-c", program],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert others == {str(signature(lexemes))}
    assert all(-(2**63) <= part < 2**63 for part in signature(lexemes))


# --- PostgreSQL: the walk gives what the search index gives ------------------------------


def _unit(rng: random.Random) -> UnitRecord:
    fields = validate_unit(
        {
            "name": " ".join(rng.sample(VOCABULARY, rng.randint(1, 3))),
            "type": "villa",
            "unitDesc": " ".join(rng.sample(VOCABULARY, rng.randint(0, 5))),
        }
    )
    now = utcnow()
    return UnitRecord(uuid7(), 1, now, now, fields, new_publishing(), new_availability(now))


async def _fill(url: str) -> None:
    rng = random.Random(7)
    db = Database(create_engine(url, 2))
    actor = {"type": "system", "id": None, "name": "test"}
    try:
        # COPY (a large insert), a batch of rows, single units, then updates of some.
        batches = [[_unit(rng) for _ in range(changes.COPY_FROM)], [_unit(rng) for _ in range(40)]]
        batches += [[_unit(rng)] for _ in range(20)]
        for batch in batches:
            async with db.transaction() as conn:
                rows = changes.prepare("insert", [changes.created(r) for r in batch], actor)
                await changes.write_rows(conn, rows)
        # Updates of a batch of units and of one: their words are written again.
        for updated in (batches[0][:30], batches[0][30:31]):
            for record in updated:
                record.fields["name"] = "gate vil"
            async with db.transaction() as conn:
                await changes.write(
                    conn,
                    "update",
                    [
                        changes.Change(r, "patch", "unit.updated", {"name": "gate vil"})
                        for r in updated
                    ],
                    actor,
                )
        # Rows written before the signature existed (migration 0019 not yet past them).
        async with db.transaction() as conn:
            unsigned = ", ".join(f"{name} = -1" for name in SIGNATURE_COLUMNS)
            await conn.execute(
                text(
                    f"UPDATE unit_search SET {unsigned} "
                    "WHERE unit_id IN (SELECT unit_id FROM unit_search ORDER BY md5(unit_id::text) "
                    "LIMIT 50)"
                )
            )
    finally:
        await db.dispose()


@pytest.fixture(scope="module")
def signed_database() -> Iterator[str]:
    with fresh_postgres("units_signed") as url:
        upgrade(url)
        asyncio.run(_fill(url))
        yield url


def _searches() -> list[str]:
    rng = random.Random(3)
    asked = [word[:n] for word in VOCABULARY for n in range(1, len(word) + 1)]
    asked += [" ".join(rng.sample(VOCABULARY, rng.randint(2, 3))) for _ in range(60)]
    return list(dict.fromkeys(asked))


async def _compare(url: str) -> int:
    db = Database(create_engine(url, 1))
    compared = 0
    try:
        async with db.read() as conn:
            for q in _searches():
                words = tuple(query_tokens(q))
                condition = search_condition(q, "postgresql", units.c.id)
                expected = [
                    row[0]
                    for row in await conn.execute(
                        select(units.c.id)
                        .where(condition)
                        .order_by(units.c.created_at.desc(), units.c.id.desc())
                    )
                ]
                hits = newest_matches(words, True, 10_000, 0)
                walked = [row[0] for row in await conn.execute(select(hits.c.unit_id))]
                assert walked == expected, q
                compared += bool(expected)
                tiers = relevance_tiers(words)
                if not tiers or not expected:
                    continue
                pages = []
                for few in (True, False):
                    ranked = ranked_matches(
                        words, [(t, few) for t in tiers], True, 10_000, 0, "postgresql", units
                    )
                    pages.append(
                        [
                            tuple(row)
                            for row in await conn.execute(select(ranked.c.unit_id, ranked.c.score))
                        ]
                    )
                assert pages[0] == pages[1], q
                assert sorted(unit_id for unit_id, _ in pages[1]) == sorted(expected), q
            # The writer signed what it wrote: only the rows made unsigned above are at -1.
            unsigned = (
                select(func.count())
                .select_from(text("unit_search"))
                .where(text(" AND ".join(f"{name} = -1" for name in SIGNATURE_COLUMNS)))
            )
            assert (await conn.execute(unsigned)).scalar_one() == 50
    finally:
        await db.dispose()
    return compared


def test_the_walk_finds_what_the_index_finds(signed_database: str) -> None:
    assert asyncio.run(_compare(signed_database)) > 100


async def _vacuumed(url: str) -> tuple[bool, bool, int, int]:
    db = Database(create_engine(url, 1))
    try:
        untouched = await vacuum_search(db, after=10**9)
        # Another process at it (holding the lock): this one leaves it.
        other = await db.raw_connection()
        try:
            assert await other.fetchval("SELECT pg_try_advisory_lock($1, $2)", *VACUUM_LOCK)
            assert not await vacuum_search(db, after=1)
        finally:
            await other.close()
        vacuumed = await vacuum_search(db, after=1)
        async with db.read() as conn:
            pages, visible = (
                await conn.execute(
                    text(
                        "SELECT relpages, relallvisible FROM pg_class WHERE relname = 'unit_search'"
                    )
                )
            ).one()
    finally:
        await db.dispose()
    return untouched, vacuumed, pages, visible


def test_the_search_table_is_vacuumed_once_enough_rows_were_written(signed_database: str) -> None:
    # Vacuumed, every page of the table is marked visible to all: the walk's index-only scan
    # reads no row of a unit its signature turns away.
    untouched, vacuumed, pages, visible = asyncio.run(_vacuumed(signed_database))
    assert (untouched, vacuumed) == (False, True)
    assert visible == pages > 0
