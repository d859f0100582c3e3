"""The built-in names and how a value is shown: without a database."""

from __future__ import annotations

from pathlib import Path

from units_api import sample_data
from units_api.names.builtin import BUILT_IN
from units_api.names.service import BUILT_IN_ONLY, CACHE_SECONDS, MAX_STORED, Names
from units_api.names.values import FIELDS, MAX_NAME, MAX_VALUE, Name, normalize


def test_built_in_values_are_stored_as_they_match_and_named_in_both_languages() -> None:
    assert set(BUILT_IN) <= set(FIELDS)
    for values in BUILT_IN.values():
        for value, name in values.items():
            assert normalize(value) == value
            assert name.en and name.ar and name.en[0] == name.en[0].upper()
            assert any("\u0600" <= char <= "\u06ff" for char in name.ar)


def test_the_sample_data_s_cities_types_and_countries_have_names() -> None:
    for city, city_ar, _ in sample_data.CITIES:
        assert BUILT_IN_ONLY.display("city", city, "ar") == city_ar
        assert BUILT_IN_ONLY.display("city", city, "en") == city
    for kind, _ in sample_data.TYPES:
        assert BUILT_IN_ONLY.name("type", kind) is not None
    for country in sample_data.COUNTRIES.values():
        assert BUILT_IN_ONLY.name("country", country) is not None


def test_a_value_without_a_name_is_shown_as_it_is() -> None:
    names = Names({("city", "lake town"): Name("Lake Town", "مدينة البحيرة")})
    assert names.display("city", "Lake  TOWN ", "ar") == "مدينة البحيرة"
    assert names.display("city", "Atlantis", "ar") == "Atlantis"
    assert names.display("name", "villa", "ar") == "villa"  # no field of names
    assert names.display("city", None, "en") == ""
    assert names.display("type", "Twin House", "en") == "Twin house"
    assert names.values_named("city", "مدينة  البحيرة") == ["lake town"]
    assert names.values_named("type", "VILLA") == ["villa"]
    assert BUILT_IN_ONLY.values_named("city", "الاسكندريه") == ["alexandria"]
    assert ("lake town", Name("Lake Town", "مدينة البحيرة")) in names.choices("city")


def test_the_readme_gives_the_figures_of_the_code(project_root: Path) -> None:
    readme = (project_root / "README.md").read_text()
    section = readme.split("### Display names", 1)[1].split("\n### ", 1)[0]
    assert f"1 to {MAX_NAME} characters" in section
    assert f"over {MAX_VALUE} characters" in section
    assert f"At most {MAX_STORED:,}" in section
    assert (
        f"every {CACHE_SECONDS:g} seconds" in section and f"within {CACHE_SECONDS:g} s" in section
    )
    assert all(f"`{field}`" in section for field in FIELDS)
