"""Stack regions (viewreplay.regions): the lines of an overlay module that a later upstream PR adds."""

from __future__ import annotations

import re

import pytest
from viewreplay import ViewReplayError
from viewreplay.regions import check_regions, parse_regions, Region, staged_text

MODULE = """\
import a
# [stack: two]
import b
# [/stack]


def f(
    x,
    # [stack: two]
    y,
    # [stack: three]
    z,
    # [/stack]
    # [/stack]
):
    return x
"""


def test_parse_regions_nested() -> None:
    assert parse_regions(MODULE, "m.py") == [Region("two", 2, 4), Region("two", 9, 14), Region("three", 11, 13)]


@pytest.mark.parametrize(
    ("included", "expected"),
    [
        (set(), "import a\n\n\ndef f(\n    x,\n):\n    return x\n"),
        ({"two"}, "import a\nimport b\n\n\ndef f(\n    x,\n    y,\n):\n    return x\n"),
        ({"two", "three"}, "import a\nimport b\n\n\ndef f(\n    x,\n    y,\n    z,\n):\n    return x\n"),
    ],
)
def test_staged_text_drops_other_prs_regions_and_every_marker(included: set[str], expected: str) -> None:
    assert staged_text(MODULE, parse_regions(MODULE, "m.py"), included) == expected


def test_a_region_inside_an_excluded_one_is_dropped_with_it() -> None:
    assert "z," not in staged_text(MODULE, parse_regions(MODULE, "m.py"), {"three"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# [stack: two]\nx = 1\n", "m.py:1: region 'two' is never closed"),
        ("x = 1\n# [/stack]\n", "m.py:2: '# [/stack]' closes no region"),
        ("x = 1  # [stack: two]\n", "m.py:1: malformed stack marker"),
    ],
)
def test_unbalanced_or_malformed_markers_are_refused(text: str, message: str) -> None:
    with pytest.raises(ViewReplayError, match=re.escape(message)):
        parse_regions(text, "m.py")


def test_check_regions() -> None:
    order = {"one": 0, "two": 1, "three": 2}
    regions = parse_regions(MODULE, "m.py")
    assert check_regions(regions, order, "one", "m.py") == []
    assert check_regions(regions, order, "two", "m.py") == [
        "m.py:2: region for 'two', not after 'two', which stages the module",
        "m.py:9: region for 'two', not after 'two', which stages the module",
    ]
    assert check_regions(regions, {"one": 0, "two": 2, "three": 1}, "one", "m.py") == [
        "m.py:11: region for 'three' inside the later 'two'"
    ]
    assert check_regions(regions, {"one": 0, "three": 1}, "one", "m.py")[0] == "m.py:2: region for 'two', which is no [[pr]]"
