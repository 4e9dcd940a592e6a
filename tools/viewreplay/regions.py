"""Stack regions: the lines of an overlay module that a later upstream PR adds.

The overlay holds each module's final text. A module is staged whole by the ``[[pr]]`` of
``upstream/stack.toml`` that lists it, except for its stack regions: lines between

    # [stack: NAME]
    ...
    # [/stack]

are added by the PR named NAME, a later one, so each staged PR adds the part of a module it
needs and its reviewers see the module grow. Regions nest (an inner region's PR must not come
before its outer one's). The marker lines are comments: the wheel keeps them, ``stage-upstream``
drops them. Only whole lines can be a region, so a region never sits inside a string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from viewreplay import ViewReplayError

_OPEN = re.compile(r"^\s*# \[stack: ([A-Za-z0-9_.-]+)\]\s*$")
_CLOSE = re.compile(r"^\s*# \[/stack\]\s*$")


@dataclass(frozen=True)
class Region:
    """Lines ``first``..``last`` (1-based, the markers included) that PR ``name`` adds."""

    name: str
    first: int
    last: int


def parse_regions(text: str, where: str) -> list[Region]:
    """The stack regions of a module's text, in order of their opening markers; refuse unbalanced markers."""
    regions: list[Region] = []
    open_: list[tuple[str, int]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if (match := _OPEN.match(line)) is not None:
            open_.append((match.group(1), number))
        elif _CLOSE.match(line):
            if not open_:
                raise ViewReplayError(f"{where}:{number}: '# [/stack]' closes no region")
            name, first = open_.pop()
            regions.append(Region(name, first, number))
        elif "# [stack" in line or "# [/stack" in line:
            raise ViewReplayError(f"{where}:{number}: malformed stack marker (a line of its own: '# [stack: NAME]')")
    if open_:
        name, first = open_[-1]
        raise ViewReplayError(f"{where}:{first}: region '{name}' is never closed")
    return sorted(regions, key=lambda r: r.first)


def check_regions(regions: list[Region], order: dict[str, int], staged_by: str, where: str) -> list[str]:
    """Problems with a module's regions: unknown PRs, PRs not after the module's, inner before outer."""
    problems = []
    for region in regions:
        if region.name not in order:
            problems.append(f"{where}:{region.first}: region for '{region.name}', which is no [[pr]]")
        elif order[region.name] <= order[staged_by]:
            problems.append(
                f"{where}:{region.first}: region for '{region.name}', not after '{staged_by}', which stages the module"
            )
        for outer in regions:
            if (
                outer is not region and outer.first < region.first and region.last < outer.last
                and outer.name in order and region.name in order and order[region.name] < order[outer.name]
            ):
                problems.append(f"{where}:{region.first}: region for '{region.name}' inside the later '{outer.name}'")
    return problems


def staged_text(text: str, regions: list[Region], included: set[str]) -> str:
    """``text`` as the PRs ``included`` leave it: regions of other PRs removed, every marker line dropped."""
    dropped: set[int] = set()
    for region in regions:
        dropped |= {region.first, region.last}
        if region.name not in included:
            dropped |= set(range(region.first, region.last + 1))
    lines = text.splitlines(keepends=True)
    return "".join(line for number, line in enumerate(lines, 1) if number not in dropped)
