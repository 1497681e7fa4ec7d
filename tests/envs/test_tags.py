"""Tagged blocks in linear time: the same blocks as the regular expression's search and findall."""

from __future__ import annotations

import random
import re

import pytest

from agentgym_credit.envs.tags import blocks, first_block

CASES = [
    "",
    "no tags",
    "<code>x = 1</code>",
    "text <code>a</code> more <code>b</code>",
    "<code><code>inner</code></code>",
    "<code>unclosed",
    "</code>closing first<code>then</code>",
    "<code>\nmulti\nline\n</code>",
    "<code></code>",
    "<code>a</code><code>",
    "<CODE>upper</CODE>",
    "<code>a</cod</code>",
]


@pytest.mark.parametrize("text", CASES)
def test_blocks_are_the_regular_expressions(text) -> None:
    pattern = re.compile(r"<code>(.*?)</code>", re.S)
    found = pattern.search(text)
    assert first_block(text, "code") == (found.group(1) if found else None)
    assert blocks(text, "code") == pattern.findall(text)


def test_random_texts_of_tags_and_letters_give_the_regular_expressions_blocks() -> None:
    rng = random.Random(0)
    parts = ["<code>", "</code>", "<think>", "</think>", "a", "b\n", "<", ">", "/"]
    for _ in range(2000):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(12)))
        for tag in ("code", "think"):
            pattern = re.compile(f"<{tag}>(.*?)</{tag}>", re.S)
            found = pattern.search(text)
            assert first_block(text, tag) == (found.group(1) if found else None), text
            assert blocks(text, tag) == pattern.findall(text), text


def test_a_megabyte_of_unclosed_openings_is_read_once() -> None:
    """The regular expression scans to the end from each of these 200,000 openings (minutes)."""
    text = "<code>" * 200_000
    assert first_block(text, "code") is None and blocks(text, "code") == []
    assert first_block(text + "</code>", "code") == "<code>" * 199_999
