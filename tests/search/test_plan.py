"""Which words a search reads through the index first, from how many units have each."""

from __future__ import annotations

from units_api.search.plan import first_words


def test_the_rarest_word_when_few_units_have_it() -> None:
    assert first_words(("sea", "marina", "view"), [900, 0, 800], None, 10) == ("marina",)
    assert first_words(("sea", "view"), [9, 10], 100, 10) == ("sea",)


def test_every_word_when_few_units_have_them_together() -> None:
    assert first_words(("villa", "apartment"), [50, 60], 0, 10) == ("villa", "apartment")


def test_none_when_many_match() -> None:
    assert first_words(("villa", "apartment"), [50, 60], None, 10) == ()
    assert first_words(("villa", "apartment"), [50, 60], 11, 10) == ()
    assert first_words(("villa",), [5], None, 0) == ()


def test_a_count_that_ran_out_of_time_is_many() -> None:
    assert first_words(("villa",), [-1], -1, 10) == ()
    assert first_words(("villa", "marina"), [-1, 3], None, 10) == ("marina",)
