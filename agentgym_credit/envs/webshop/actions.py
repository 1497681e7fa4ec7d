"""WebShop's action syntax: ``search[keywords]`` and ``click[target]``.

Two syntaxes:

* ``"upstream"`` (default) reads an action as upstream's text environment does: the longest prefix
  ``VERB[ARG]`` of the text, where ``VERB`` is everything before the last ``[`` that is followed by
  some ``ARG`` and a ``]`` on the same line, and ``ARG`` runs to the last such ``]``; text after it is
  ignored. The verb must be exactly ``search`` or ``click`` (lowercase, no spaces); the argument is
  lowercased but not stripped. So ``search[x] now`` searches ``x``, ``search[ ]`` searches a blank,
  and ``Search[x]``, ``click [x]`` and ``click[ x ]`` (no clickable is `` x ``) do nothing.
* ``"lenient"`` (a deliberate difference, kept as an option): the whole text must be one action, the
  verb is case-insensitive, spaces around the verb and inside the brackets are dropped and runs of
  spaces collapse; an empty argument does not parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ACTION_SYNTAXES",
    "ParsedAction",
    "parse_action",
    "search_action",
    "click_action",
    "SEARCH_ADMISSIBLE",
]

#: How the search action appears in ``info["admissible_actions"]`` on the search page.
SEARCH_ADMISSIBLE = "search[...]"
ACTION_SYNTAXES = ("upstream", "lenient")

_LENIENT = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class ParsedAction:
    """A well-formed action."""

    verb: Literal["search", "click"]
    argument: str


def parse_action(text: str, syntax: str = "upstream") -> ParsedAction | None:
    """Parse ``search[...]`` / ``click[...]`` in ``syntax``; ``None`` when it is not an action.

    Raises:
        ValueError: unknown ``syntax``.

    Example:
        >>> parse_action("click[Buy Now]")
        ParsedAction(verb='click', argument='buy now')
        >>> parse_action("search[red mug] please")
        ParsedAction(verb='search', argument='red mug')
        >>> parse_action("Search[red mug]") is None
        True
    """
    if syntax == "upstream":
        match = _upstream_match(text)
        if match is None or match[0] not in ("search", "click"):
            return None
        verb, argument = match[0], match[1].lower()
    elif syntax == "lenient":
        match = _LENIENT.match(text)
        if match is None:
            return None
        verb, argument = match.group(1).lower(), " ".join(match.group(2).split()).lower()
        if not argument:
            return None
    else:
        raise ValueError(f"unknown action syntax {syntax!r}; choose one of {ACTION_SYNTAXES}")
    return ParsedAction(verb="search" if verb == "search" else "click", argument=argument)


def _upstream_match(text: str) -> tuple[str, str] | None:
    """The two groups of ``re.match(r"(.+)\\[(.+)\\]", text)`` (upstream's pattern), in linear time.

    ``.`` stops at a newline, so the match lies in the first line. The greedy first group ends at the
    last ``[`` (not the line's first character) that a ``]`` follows with a character between them; the
    greedy second group then runs to the line's last ``]``. The regular expression finds the same groups by
    backtracking, in time quadratic in the line's length (a line of ``[`` takes seconds at 30,000 characters).
    """
    newline = text.find("\n")
    line = text if newline < 0 else text[:newline]
    close = line.rfind("]")
    open_ = line.rfind("[", 1, close - 1) if close >= 3 else -1
    if open_ < 0:
        return None
    return line[:open_], line[open_ + 1 : close]


def search_action(keywords: str) -> str:
    """The action text that searches for ``keywords``."""
    return f"search[{keywords}]"


def click_action(target: str) -> str:
    """The action text that clicks ``target``."""
    return f"click[{target}]"
