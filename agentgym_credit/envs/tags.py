"""Tagged blocks of a response (``<code>…</code>``), found in time linear in its length.

A response is untrusted text of any length. The regular expression ``<code>(.*?)</code>`` (``re.S``) finds
the same block, but in time quadratic in the length when openings are not closed: from each ``<code>`` it
scans to the end for a ``</code>`` (96,000 characters of ``<code>`` take seconds, a megabyte minutes).
The functions here give what the regular expression's ``search``, ``findall`` and ``finditer`` give, with
one forward scan per tag (``str.find``, or a literal regular expression in any letter case):

* :func:`iter_blocks` of several tags, each block closed by its own tag, gives the matches of
  ``<(t1|t2|…)>(.*?)</\\1>``, which are those of ``<t1>(.*?)</t1>|<t2>(.*?)</t2>|…``: a search from a
  position finds the leftmost opening that its own closing follows, up to the first such closing after it
  (``<search>x</answer>`` closes nothing), and the next search starts after that closing. An opening with
  no closing after it is skipped, and since no later opening of its tag has one either, the tag is dropped.
* ``ignore_case=True`` matches the openings and closings as ``re.IGNORECASE`` does (each tag's own
  closing, in any case: the alternation above with ``re.I``).

Contents: :class:`Block`, :func:`iter_blocks`, :func:`first_block_of`, :func:`first_block`, :func:`blocks`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from typing import NamedTuple

__all__ = ["Block", "blocks", "first_block", "first_block_of", "iter_blocks"]

_Find = Callable[[str, int], int]


class Block(NamedTuple):
    """One ``<tag>content</tag>`` block of a text.

    Attributes:
        tag: the tag as given (not as written in the text, which may differ in case).
        content: the text between the opening and the closing.
        start: the index of the opening's ``<``.
        end: the index just after the closing's ``>`` (``text[start:end]`` is the whole block).
    """

    tag: str
    content: str
    start: int
    end: int


@lru_cache(maxsize=64)
def _finder(literal: str, ignore_case: bool) -> _Find:
    """``find(text, start)``: the index of the first ``literal`` in ``text`` at or after ``start``, or -1."""
    if not ignore_case:
        return lambda text, start: text.find(literal, start)
    search = re.compile(re.escape(literal), re.IGNORECASE).search  # a literal: at most len(literal) per index

    def find(text: str, start: int) -> int:
        found = search(text, start)
        return -1 if found is None else found.start()

    return find


def iter_blocks(text: str, tags: Sequence[str], *, ignore_case: bool = False) -> Iterator[Block]:
    """The blocks of ``text`` whose opening is one of ``tags``, each closed by its own tag, in order.

    What ``re.finditer("<(t1|t2|…)>(.*?)</\\1>", text, re.S)`` finds (with ``ignore_case``, what
    ``re.finditer("<t1>(.*?)</t1>|<t2>(.*?)</t2>|…", text, re.S | re.I)`` finds), in time linear in
    ``len(text)`` for each tag: every tag's openings and closings are scanned forward once.

    Args:
        text: the text to read.
        tags: the tag names, e.g. ``("search", "answer")``; where two could open at one index (only with
            ``ignore_case`` or a ``>`` in a name), the earlier one listed is taken, as the alternation does.
        ignore_case: match the tags in any letter case, as ``re.IGNORECASE`` does.

    Yields:
        Each :class:`Block`, the next one searched from the end of the last.
    """
    scans = [
        (i, tag, _finder(f"<{tag}>", ignore_case), _finder(f"</{tag}>", ignore_case), len(tag) + 2, len(tag) + 3)
        for i, tag in enumerate(tags)
    ]
    opening = [-1] * len(scans)  # each tag's first opening at or after the search position
    closing = [-1] * len(scans)  # the first closing after that opening
    position = 0
    while scans:
        live = []
        for scan in scans:
            i, _, find_opening, find_closing, opening_length, _ = scan
            if opening[i] < position:
                opening[i] = find_opening(text, position)
                if opening[i] < 0:
                    continue
            if closing[i] < opening[i] + opening_length:  # else the last closing found is still the first
                closing[i] = find_closing(text, opening[i] + opening_length)
                if closing[i] < 0:  # no later opening of this tag is closed either
                    continue
            live.append(scan)
        scans = live
        if not scans:
            return
        i, tag, _, _, opening_length, closing_length = min(scans, key=lambda scan: (opening[scan[0]], scan[0]))
        yield Block(tag, text[opening[i] + opening_length : closing[i]], opening[i], closing[i] + closing_length)
        position = closing[i] + closing_length


def first_block_of(text: str, tags: Sequence[str], *, ignore_case: bool = False) -> Block | None:
    """The first block of :func:`iter_blocks` (what its regular expression's ``search`` matches), or None."""
    return next(iter_blocks(text, tags, ignore_case=ignore_case), None)


def first_block(text: str, tag: str, *, ignore_case: bool = False) -> str | None:
    """The content of the first ``<tag>…</tag>`` block of ``text``, None if there is none.

    What ``re.search(f"<{tag}>(.*?)</{tag}>", text, re.S)`` matches (``re.S | re.I`` with ``ignore_case``):
    the first opening that a closing follows, up to the first closing after it (if the first opening has
    none, no later one has).
    """
    found = first_block_of(text, (tag,), ignore_case=ignore_case)
    return None if found is None else found.content


def blocks(text: str, tag: str, *, ignore_case: bool = False) -> list[str]:
    """The contents of every ``<tag>…</tag>`` block of ``text``, in order: what
    ``re.findall(f"<{tag}>(.*?)</{tag}>", text, re.S)`` gives (each search starts after the last block;
    ``re.S | re.I`` with ``ignore_case``)."""
    return [found.content for found in iter_blocks(text, (tag,), ignore_case=ignore_case)]
