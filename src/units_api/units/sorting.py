"""The orders a list or a query may ask for: sort names and directions, and the computed
sort keys (relevance, distance) with what each needs and adds to a record."""

from __future__ import annotations

from types import MappingProxyType

from units_api.errors import InvalidParameter
from units_api.filters.maps import Near, required_near
from units_api.filters.sql import distance_from
from units_api.filters.tree import Node
from units_api.search.normalize import Words
from units_api.search.plan import Order
from units_api.search.rank import relevant_matches
from units_api.units.fields import COMPUTED_SORTS, DISTANCE, RELEVANCE, SORTABLE, SortKey
from units_api.units.repository import NOTHING_COMPUTED, Computed
from units_api.units.tables import units


def split_commas(raw: str) -> list[str]:
    return [part.strip() for part in raw.split(",")]


SORT_NAMES = (*SORTABLE, *COMPUTED_SORTS)


def parse_sort(sort_by: str | None, order: str | None) -> tuple[SortKey, ...]:
    for name, value in (("sortBy", sort_by), ("order", order)):
        if value is not None and not value.strip():
            raise InvalidParameter(name, "is empty; leave it out for the default")
    names = split_commas(sort_by) if sort_by else ["createdAt"]
    for name in names:
        if name not in SORT_NAMES:
            raise InvalidParameter(
                "sortBy", f"'{name}' is not sortable; use {', '.join(SORT_NAMES)}"
            )
    if len(set(names)) != len(names):
        raise InvalidParameter("sortBy", "names a field twice")
    # Nearest first, anything else newest or highest first, unless asked otherwise.
    orders = split_commas(order) if order else ["asc" if n == DISTANCE else "desc" for n in names]
    for value in orders:
        if value not in ("asc", "desc"):
            raise InvalidParameter("order", f"'{value}' is not asc or desc")
    if len(orders) == 1:
        orders = orders * len(names)
    if len(orders) != len(names):
        raise InvalidParameter("order", "give one order, or one per sortBy field")
    return with_recency(tuple(SortKey(n, o == "desc") for n, o in zip(names, orders, strict=True)))


def with_recency(sort: tuple[SortKey, ...]) -> tuple[SortKey, ...]:
    """Relevance ranks ties by recency (CONTRACT 5): createdAt follows it, in its direction,
    unless the sort names createdAt itself."""
    fields = [key.field for key in sort]
    if RELEVANCE not in fields or "createdAt" in fields:
        return sort
    at = fields.index(RELEVANCE) + 1
    return (*sort[:at], SortKey("createdAt", sort[at - 1].descending), *sort[at:])


def check_relevance(sort: tuple[SortKey, ...], words: tuple[str, ...], parameter: str) -> None:
    if not words and any(key.field == RELEVANCE for key in sort):
        raise InvalidParameter(parameter, "relevance needs a search text (q) with a word in it")


def by_relevance(
    words: Words, dialect: str, first: Words = (), distance: Computed = NOTHING_COMPUTED
) -> Computed:
    """The relevance sort key: the search's matches joined to the units, with their score;
    beside it, the `distance` key when the sort has one too."""
    relevant = relevant_matches(words, dialect, first)
    return Computed(
        MappingProxyType({RELEVANCE: relevant.c.score, **distance.keys}),
        units.join(relevant, relevant.c.unit_id == units.c.id),
        distance.shown,
    )


_NEAREST_FIRST = (SortKey(DISTANCE, False),)


def order_of(sort: tuple[SortKey, ...]) -> Order:
    """What a read plan tells the sort to be (search.plan.Order)."""
    fields = [key.field for key in sort]
    if fields == ["createdAt"]:
        return "created"
    if sort == _NEAREST_FIRST:
        return "nearest"
    if fields == [RELEVANCE, "createdAt"] and sort[0].descending == sort[1].descending:
        return "ranked"
    return "relevance" if RELEVANCE in fields else "other"


# The field a sort by distance adds to each record: metres from the =near= point.
DISTANCE_FIELD = "distanceMeters"


def check_distance(
    sort: tuple[SortKey, ...], tree: Node | None, parameter: str, filter_parameter: str
) -> None:
    if any(key.field == DISTANCE for key in sort) and required_near(tree) is None:
        raise InvalidParameter(
            parameter,
            f"distance needs exactly one unitLocation=near= in {filter_parameter}, joined to "
            "the rest of it by ';' (every match is then within its distance)",
        )


def by_distance(sort: tuple[SortKey, ...], near: Near | None) -> Computed:
    """The distance sort key (none unless the sort names it): metres from the filter's one
    `=near=` point (its MapPlan's), added to each record as `distanceMeters`."""
    if near is None or all(key.field != DISTANCE for key in sort):
        return NOTHING_COMPUTED
    return Computed(
        MappingProxyType({DISTANCE: distance_from(near, units)}),
        shown=MappingProxyType({DISTANCE: DISTANCE_FIELD}),
    )
