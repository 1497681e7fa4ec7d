"""WebShop's action syntax: the upstream reading equals upstream's regular expression, in linear time."""

from __future__ import annotations

import random
import re

import pytest

from agentgym_credit.envs.webshop.actions import ParsedAction, _upstream_match, parse_action
from tests.envs.deadline import hard_limit

UPSTREAM = re.compile(r"(.+)\[(.+)\]")  # WebShop's text environment


def _with_regex(text: str) -> ParsedAction | None:
    """``parse_action(text, "upstream")`` written with upstream's pattern (quadratic on a line of ``[``)."""
    match = UPSTREAM.match(text)
    if match is None or match.group(1) not in ("search", "click"):
        return None
    return ParsedAction(match.group(1), match.group(2).lower())  # type: ignore[arg-type]


CASES = [
    "search[red mug]", "click[Buy Now]", "search[x] now", "search[ ]", "search[]", "click[]", "search[[x]]",
    "search[a]b]", "search[a[b]", "search[a]\nclick[b]", "\nsearch[a]", "search\n[a]", "search[a\n]",
    "search[a]\r]", "[search[a]", "search[]]", "search[[]", "search[]x]", "Search[x]", "click [x]", "click[]]",
    "search[x][y]", "clicksearch[x]", "click[x]search[y]", "[", "]", "[]", "a[]", "a[b]", "",
]


@pytest.mark.parametrize("text", CASES)
def test_upstream_syntax_is_upstreams_regular_expression(text: str) -> None:
    assert parse_action(text) == _with_regex(text)
    match = UPSTREAM.match(text)
    assert _upstream_match(text) == (None if match is None else match.groups())


def test_random_texts_give_the_regular_expressions_action() -> None:
    rng = random.Random(0)
    parts = ["search", "click", "[", "]", "[", "]", "a", "B", " ", "\n", "\r"]
    for _ in range(4000):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(10)))
        assert parse_action(text) == _with_regex(text), text
        match = UPSTREAM.match(text)  # the groups too, whatever the verb
        assert _upstream_match(text) == (None if match is None else match.groups()), text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * (1 << 20), None),
        ("search[" + "[" * (1 << 20), None),
        ("search[x]" + "[" * (1 << 20), ParsedAction("search", "x")),
        ("search[" + "a[" * (1 << 19) + "]", None),  # the verb would run to the last [ with a character before ]
        ("click[X" + "]" * (1 << 20), ParsedAction("click", "x" + "]" * ((1 << 20) - 1))),
    ],
)
def test_a_megabyte_line_of_brackets_is_read_at_once(text: str, expected: ParsedAction | None) -> None:
    """The regular expression backtracks from every ``[`` to the line's end: minutes on these."""
    with hard_limit(5, "reading a megabyte of brackets"):
        assert parse_action(text) == expected
