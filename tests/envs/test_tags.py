"""Tagged blocks in linear time: the same blocks as the regular expression's search and findall."""

from __future__ import annotations

import random
import re

import pytest

from agentgym_credit.envs import tags as tags_module
from agentgym_credit.envs.tags import Block, blocks, first_block, first_block_of, iter_blocks
from tests.envs.deadline import hard_limit

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


def _finditer(pattern: re.Pattern[str], text: str, tags: tuple[str, ...]) -> list[Block]:
    """The regular expression's matches as blocks (the tag is the alternative that matched)."""
    found = []
    for match in pattern.finditer(text):
        k = next(k for k in range(len(tags)) if match.group(k + 1) is not None)
        found.append(Block(tags[k], match.group(k + 1), match.start(), match.end()))
    return found


def _alternation(tags: tuple[str, ...], flags: int) -> re.Pattern[str]:
    """``<t1>(.*?)</t1>|<t2>(.*?)</t2>|…``: one group per tag."""
    return re.compile("|".join(f"<{tag}>(.*?)</{tag}>" for tag in tags), re.S | flags)


TAG_SETS = [("search", "answer"), ("code",), ("think", "action", "code"), ("a", "ab", "b")]
MIXED = [
    "<search>a</answer>",
    "<search><answer>b</answer>",
    "<answer>x<search>q</search>y</answer>",
    "<search>a<answer>b</search>c</answer>",
    "<search></search><answer></answer><search>z",
    "<ab>1</a></ab><a>2</a><b>3</ab></b>",
    "<think>t</think><action>up</action><code>c</code><action>",
]


@pytest.mark.parametrize("tags", TAG_SETS)
@pytest.mark.parametrize("text", CASES + MIXED)
def test_blocks_of_several_tags_are_the_backreference_patterns(text, tags) -> None:
    """Each block closed by its own tag: ``<(t1|t2)>(.*?)</\\1>``, and the alternation of the tags' patterns."""
    backreference = re.compile(f"<({'|'.join(tags)})>(.*?)</\\1>", re.S)
    expected = [Block(m.group(1), m.group(2), m.start(), m.end()) for m in backreference.finditer(text)]
    assert list(iter_blocks(text, tags)) == expected == _finditer(_alternation(tags, 0), text, tags)
    assert first_block_of(text, tags) == (expected[0] if expected else None)


def test_random_texts_of_several_tags_give_the_backreference_patterns_blocks() -> None:
    rng = random.Random(1)
    parts = ["<search>", "</search>", "<answer>", "</answer>", "<a>", "</a>", "<ab>", "</ab>", "q", "\n", "<",
             "/", ">"]
    for _ in range(3000):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(14)))
        for tags in TAG_SETS:
            backreference = re.compile(f"<({'|'.join(tags)})>(.*?)</\\1>", re.S)
            expected = [Block(m.group(1), m.group(2), m.start(), m.end()) for m in backreference.finditer(text)]
            assert list(iter_blocks(text, tags)) == expected, (text, tags)


# letters that re.IGNORECASE matches to ASCII ones: long s (s), Kelvin sign (k), dotted capital I (i),
# dotless i (i); "İ".lower() is two characters, so lower-casing the text would move the blocks
UNICODE_CASES = ["<ſearch>x</SEARCH>", "<search>x</ſearch>", "<lİnK>y</LINK>", "<link>z</lınk>İ<LINK>w</link>"]


@pytest.mark.parametrize("text", CASES + MIXED + UNICODE_CASES)
def test_blocks_in_any_case_are_the_ignorecase_patterns(text) -> None:
    for tag in ("code", "search", "link"):
        pattern = re.compile(f"<{tag}>(.*?)</{tag}>", re.S | re.I)
        found = pattern.search(text)
        assert first_block(text, tag, ignore_case=True) == (found.group(1) if found else None)
        assert blocks(text, tag, ignore_case=True) == pattern.findall(text)
    tags = ("search", "answer", "link")
    assert list(iter_blocks(text, tags, ignore_case=True)) == _finditer(_alternation(tags, re.I), text, tags)


def test_random_texts_in_any_case_give_the_ignorecase_patterns_blocks() -> None:
    rng = random.Random(2)
    parts = ["<search>", "</search>", "<SEARCH>", "</Search>", "<ſearch>", "</ſEARCH>", "<answer>", "</ANSWER>",
             "<Answer>", "</answer>", "<lİnK>", "</link>", "<LINK>", "</lınk>", "İ", "x", "\n", "<", "/", ">"]
    tags = ("search", "answer", "link")
    for _ in range(3000):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(14)))
        assert list(iter_blocks(text, tags, ignore_case=True)) == _finditer(_alternation(tags, re.I), text, tags)
        for tag in tags:
            pattern = re.compile(f"<{tag}>(.*?)</{tag}>", re.S | re.I)
            assert blocks(text, tag, ignore_case=True) == pattern.findall(text), (text, tag)


def _count_scanned(monkeypatch) -> list[int]:
    """Count the characters that every tag scan reads (from its start to what it finds, or to the end)."""
    scanned = [0]
    finder = tags_module._finder

    def counting(literal: str, ignore_case: bool):
        find = finder(literal, ignore_case)

        def counted(text: str, start: int) -> int:
            found = find(text, start)
            scanned[0] += (len(text) if found < 0 else found + len(literal)) - start
            return found

        return counted

    monkeypatch.setattr(tags_module, "_finder", counting)
    return scanned


ADVERSARIAL = [  # a megabyte of openings that are never closed, and the blocks after them
    ("<search>" * 131_072, ("search", "answer"), False, []),
    ("<search><answer>" * 65_536 + "</answer>", ("search", "answer"), False,
     [Block("answer", "<search><answer>" * 65_535, 8, 1_048_585)]),
    ("<SeArCh>" * 131_072 + "<answer>x</ANSWER>", ("search", "answer"), True,
     [Block("answer", "x", 1_048_576, 1_048_594)]),
    ("<search></answer>" * 61_681, ("search", "answer"), False, []),
]


@pytest.mark.parametrize(("text", "tags", "ignore_case", "expected"), ADVERSARIAL)
def test_a_megabyte_of_unclosed_openings_is_scanned_once_per_tag(monkeypatch, text, tags, ignore_case,
                                                                  expected) -> None:
    """The regular expressions scan to the end from each opening: about 10^11 characters here (minutes)."""
    scanned = _count_scanned(monkeypatch)
    with hard_limit(30, "reading a megabyte of openings"):
        assert list(iter_blocks(text, tags, ignore_case=ignore_case)) == expected
    assert len(text) >= 1_000_000 and scanned[0] <= 2 * len(tags) * (len(text) + 20)
