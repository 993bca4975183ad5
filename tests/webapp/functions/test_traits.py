"""Render function traits are declared with the function (``render_function(...,
traits=Traits(...))``) and reach the evaluator through the registry."""

from __future__ import annotations

import pytest

import webapp.functions  # noqa: F401  (registers the built-in functions)
from webapp.functions.registry import NO_TRAITS, Param, RenderFunction, Traits, render_function
from webapp.plugins import RENDER_FUNCTIONS

# What the evaluator and the fused paths may do with each function (as before the
# traits were declared: then attributes set on the functions afterwards).
DECLARED = {
    "packed_input": {"asPercent", "pct", "derivative", "highestMax", "keepLastValue",
                     "nonNegativeDerivative", "perSecond", "scale", "sortByMaxima",
                     "summarize", "transformNull"},
    "keeps_values": {"alias", "aliasByNode", "aliasSub", "limit"},
}
FUSED = {
    "fused_aggregate": {"averageSeries": "average", "avg": "average", "maxSeries": "max",
                        "minSeries": "min", "sum": "sum", "sumSeries": "sum"},
    "fused_group": {"groupByNode": ("callback", "nodeNum"),
                    "groupByNodes": ("callback", "nodes")},
    "fused_window": {"movingAverage": {"func": "average"}, "movingSum": {"func": "sum"},
                     "movingWindow": {}},
}


def _traits() -> dict[str, Traits]:
    return {name: RENDER_FUNCTIONS.get(name).traits for name in RENDER_FUNCTIONS.names()}


@pytest.mark.parametrize("trait", sorted(DECLARED))
def test_flags_are_declared_on_exactly_these_functions(trait: str) -> None:
    assert {name for name, traits in _traits().items() if getattr(traits, trait)} \
        == DECLARED[trait]


@pytest.mark.parametrize("trait", sorted(FUSED))
def test_fused_forms_are_declared_on_exactly_these_functions(trait: str) -> None:
    assert {name: getattr(traits, trait) for name, traits in _traits().items()
            if getattr(traits, trait) is not None} == FUSED[trait]


def test_the_decorator_carries_the_traits_and_defaults_to_none() -> None:
    def plain(requestContext, seriesList):
        return seriesList

    try:
        assert render_function("testTraitsPlain", "Test", [])(plain) is plain
        render_function("testTraitsPacked", "Test", [Param("seriesList", "seriesList")],
                        traits=Traits(packed_input=True))(plain)
        assert RENDER_FUNCTIONS.get("testTraitsPlain").traits is NO_TRAITS
        packed = RENDER_FUNCTIONS.get("testTraitsPacked")
        assert isinstance(packed, RenderFunction) and packed.traits.packed_input
        assert not hasattr(plain, "packed_input")  # nothing set on the function itself
    finally:
        RENDER_FUNCTIONS.discard("testTraitsPlain")
        RENDER_FUNCTIONS.discard("testTraitsPacked")
