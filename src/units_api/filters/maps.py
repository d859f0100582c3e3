"""What a filter asks of the map, read in one walk of its tree (`MapPlan`): whether it searches
the map, whether every match lies in one box an index can walk, and the one `=near=` a sort
by distance measures from.

The shapes are those the SQL translation resolved (`filters.sql.translate`), so each map
comparison is read once, and a bad one is named where the translation names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from units_api.filters import geo
from units_api.filters.fields import Location
from units_api.filters.tree import Comparison, Node, comparisons, required

# A map comparison as the translation resolved it: where its field's points are, its shape.
Placed = tuple[Location, geo.Shape]


@dataclass(frozen=True, slots=True)
class Near:
    """A `=near=` every match satisfies: where its field's points are, and its circle."""

    location: Location
    circle: geo.Circle


@dataclass(frozen=True, slots=True)
class MapPlan:
    located: bool = False  # the filter searches the map
    # Every match is in one box an index can walk: an `=inside=`, or a `=within=` that does
    # not cross the antimeridian, joined to the rest by AND.
    box: bool = False
    # The filter's one `=near=`, joined to the rest by AND: the point distances are from.
    near: Near | None = None

    def beside(self, policy: MapPlan) -> MapPlan:
        """This filter's plan with a key's policy beside it: either may search the map or
        hold it in a box; distances are measured from the filter's point alone."""
        return MapPlan(self.located or policy.located, self.box or policy.box, self.near)


NO_MAP = MapPlan()


def required_near(node: Node | None) -> Comparison | None:
    """The filter's `=near=`, when it has exactly one and every match satisfies it (it is
    joined to the rest by AND); read from the tree alone, before any value is."""
    return None if node is None else _near(comparisons(node), required(node))


def _near(every: list[Comparison], needed: list[Comparison]) -> Comparison | None:
    nears = [found for found in every if found.operator == "near"]
    return nears[0] if len(nears) == 1 and nears[0] in needed else None


def map_plan(node: Node | None, placed: Mapping[Comparison, Placed]) -> MapPlan:
    """The filter's map plan; `placed` holds each of its map comparisons, resolved."""
    if node is None:
        return NO_MAP
    every, needed = comparisons(node), required(node)
    near = _near(every, needed)
    return MapPlan(
        located=any(found.operator in geo.SHAPES for found in every),
        box=any(_one_box(found, placed) for found in needed),
        near=None if near is None else _resolved_near(placed[near]),
    )


def _one_box(found: Comparison, placed: Mapping[Comparison, Placed]) -> bool:
    if found.operator == "within":
        _, box = placed[found]
        return isinstance(box, geo.Box) and len(geo.split(box)) == 1
    return found.operator == "inside"


def _resolved_near(place: Placed) -> Near:
    location, circle = place
    assert isinstance(circle, geo.Circle)
    return Near(location, circle)
