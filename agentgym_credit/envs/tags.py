"""Tagged blocks of a response (``<code>…</code>``), found in time linear in its length.

A response is untrusted text of any length. The regular expression ``<code>(.*?)</code>`` (``re.S``) finds
the same block, but in time quadratic in the length when openings are not closed: from each ``<code>`` it
scans to the end for a ``</code>`` (96,000 characters of ``<code>`` take seconds, a megabyte minutes).
:func:`first_block` and :func:`blocks` give what its ``search`` and ``findall`` give, with ``str.find``.

Contents: :func:`first_block`, :func:`blocks`.
"""

from __future__ import annotations

__all__ = ["blocks", "first_block"]


def first_block(text: str, tag: str) -> str | None:
    """The content of the first ``<tag>…</tag>`` block of ``text``, None if there is none.

    What ``re.search(f"<{tag}>(.*?)</{tag}>", text, re.S)`` matches: the first opening that a closing
    follows, up to the first closing after it (if the first opening has none, no later one has).
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = text.find(opening)
    if start < 0:
        return None
    start += len(opening)
    end = text.find(closing, start)
    return None if end < 0 else text[start:end]


def blocks(text: str, tag: str) -> list[str]:
    """The contents of every ``<tag>…</tag>`` block of ``text``, in order: what
    ``re.findall(f"<{tag}>(.*?)</{tag}>", text, re.S)`` gives (each search starts after the last block)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    found: list[str] = []
    position = 0
    while True:
        start = text.find(opening, position)
        if start < 0:
            return found
        start += len(opening)
        end = text.find(closing, start)
        if end < 0:
            return found
        found.append(text[start:end])
        position = end + len(closing)
