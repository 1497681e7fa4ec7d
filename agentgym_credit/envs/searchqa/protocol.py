"""The Search-R1 interaction protocol: parsing agent outputs, rendering results, scoring answers.

An agent turn is free text holding a tagged command:

* ``<search>query</search>``: the environment retrieves the top-k passages and returns them as
  ``<information>Doc 1(Title: ...) text\nDoc 2(Title: ...) text</information>`` (Search-R1's rendering);
* ``<answer>text</answer>``: the episode ends and the answer is scored.

Which command a turn holds follows the upstream code (:data:`PROTOCOLS`):

* ``"search-r1"`` (the default; Search-R1's ``generation.py``): the response is cut after its first
  ``</search>`` (or, without one, after its first ``</answer>``), and the first complete
  ``<search>…</search>`` or ``<answer>…</answer>`` of what is left is the command. So a search followed
  by an answer searches, an answer followed by a search answers, and of two answers the first counts.
* ``"verl-agent"`` (verl-agent's ``search_projection``): the same cut, then the first ``<search>`` block
  if there is one, else the first ``<answer>`` block; the blocks match in any letter case (the cut
  does not).

Both are the commands of the upstream regular expressions (``<(search|answer)>(.*?)</\\1>``, and
``<search>(.*?)</search>`` then ``<answer>(.*?)</answer>`` in any case), found in time linear in the
output's length by :mod:`agentgym_credit.envs.tags`: the expressions take time quadratic in it when
openings are not closed.

The command's body is stripped; it may be empty (``<search></search>`` searches the empty string,
``<answer></answer>`` ends the episode with reward 0). A turn without a complete command is invalid.
Anything outside the command (for instance ``<think>…</think>``) is ignored.

Answers are compared after SQuAD/Search-R1 normalization: lowercase, drop punctuation, drop the
articles *a*, *an*, *the*, collapse whitespace. Exact match (EM) is 1 if the normalized prediction
equals any normalized gold answer; token F1 is the best over the gold answers of

.. math:: F_1 = \\frac{2PR}{P + R},\\quad P = \\frac{|p \\cap g|}{|p|},\\quad R = \\frac{|p \\cap g|}{|g|}

with :math:`p, g` the multisets of normalized prediction and gold tokens.

Contents: :data:`PROTOCOLS`, :class:`ParsedAction`, :func:`parse_action`, :data:`INVALID_FORMAT_MESSAGE`,
:func:`format_passages`, :func:`format_information`, :func:`parse_information`,
:func:`normalize_answer`, :func:`exact_match`, :func:`token_f1`.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agentgym_credit.envs.tags import blocks, first_block, first_block_of

if TYPE_CHECKING:
    from agentgym_credit.envs.searchqa.retrieval import Hit

__all__ = [
    "INVALID_FORMAT_MESSAGE",
    "NO_RESULTS_TEXT",
    "PROTOCOLS",
    "ParsedAction",
    "exact_match",
    "format_information",
    "format_passages",
    "normalize_answer",
    "parse_action",
    "parse_information",
    "token_f1",
]

INVALID_FORMAT_MESSAGE = (  # Search-R1's words, shown after a turn without a command
    "My previous action is invalid. If I want to search, I should put the query between <search> and "
    "</search>. If I want to give the final answer, I should put the answer between <answer> and "
    "</answer>. Let me try again."
)
NO_RESULTS_TEXT = "No results found."

PROTOCOLS = ("search-r1", "verl-agent")
_COMMANDS = ("search", "answer")
_DOC_HEADER = re.compile(r"^Doc \d+\(Title: ", re.MULTILINE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


@dataclass(frozen=True)
class ParsedAction:
    """One parsed agent output.

    Attributes:
        kind: ``"search"``, ``"answer"`` or ``"invalid"``.
        content: the stripped text inside the tag (empty for invalid outputs).
        error: why the output is invalid (empty for valid ones).
    """

    kind: Literal["search", "answer", "invalid"]
    content: str = ""
    error: str = ""

    @property
    def valid(self) -> bool:
        """Whether the output is a well-formed search or answer."""
        return self.kind != "invalid"


def _cut(text: str) -> str:
    """Keep ``text`` up to its first ``</search>``, or else up to its first ``</answer>``."""
    for close in ("</search>", "</answer>"):
        end = text.find(close)
        if end >= 0:
            return text[: end + len(close)]
    return text


def parse_action(text: str, protocol: str = "search-r1") -> ParsedAction:
    """Find the command of one agent output, as the upstream agent loop does.

    Args:
        text: the raw agent output.
        protocol: ``"search-r1"`` or ``"verl-agent"`` (see the module docstring).

    Returns:
        The parsed command (its body stripped, possibly empty); ``kind="invalid"`` with an ``error`` when
        the output holds no complete ``<search>`` or ``<answer>`` command.

    Examples:
        >>> parse_action("<think>who?</think><search>Tarsk</search><answer>x</answer>")
        ParsedAction(kind='search', content='Tarsk', error='')
        >>> parse_action("<answer>a</answer><answer>b</answer>").content
        'a'
        >>> parse_action("The answer is Tarsk.").kind
        'invalid'
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if not isinstance(text, str):
        return ParsedAction("invalid", error=f"output must be a str, got {type(text).__name__}")
    kept = _cut(text)
    if protocol == "search-r1":  # Search-R1's re.search(r"<(search|answer)>(.*?)</\1>", kept, re.DOTALL)
        found = first_block_of(kept, _COMMANDS)
        if found is None:
            return ParsedAction("invalid", error="no complete <search>...</search> or <answer>...</answer>")
        return ParsedAction(found.tag, found.content.strip())  # type: ignore[arg-type]
    for tag in _COMMANDS:  # verl-agent's re.search(rf"<{tag}>(.*?)</{tag}>", kept, re.DOTALL | re.IGNORECASE)
        content = first_block(kept, tag, ignore_case=True)
        if content is not None:
            return ParsedAction(tag, content.strip())  # type: ignore[arg-type]
    return ParsedAction("invalid", error="no complete <search>...</search> or <answer>...</answer>")


def format_passages(hits: Sequence[Hit]) -> str:
    """Render retrieved passages the way Search-R1 does: ``Doc i(Title: t) text`` per line.

    Args:
        hits: the ranked hits of one query.

    Returns:
        The rendered lines (without the ``<information>`` tags), or :data:`NO_RESULTS_TEXT`.
    """
    if not hits:
        return NO_RESULTS_TEXT
    lines = [f"Doc {i}(Title: {hit.passage.title}) {hit.passage.text}" for i, hit in enumerate(hits, 1)]
    return "\n".join(lines)


def format_information(hits: Sequence[Hit]) -> str:
    """The ``<information>…</information>`` block returned for a search."""
    return f"<information>{format_passages(hits)}</information>"


def parse_information(text: str) -> list[tuple[str, str]]:
    """Recover ``(title, text)`` pairs from the last ``<information>`` block of ``text``.

    The inverse of :func:`format_information` for titles without ``") "`` in them.

    Args:
        text: an observation or transcript containing at least one ``<information>`` block.

    Returns:
        The passages of the last block in rank order (empty if there is none or it holds no results).
    """
    found = blocks(text, "information")
    if not found:
        return []
    block = found[-1]
    starts = [m.start() for m in _DOC_HEADER.finditer(block)]
    docs: list[tuple[str, str]] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(block)
        entry = block[start:end].rstrip("\n")
        header_end = entry.index("(Title: ") + len("(Title: ")
        close = entry.find(") ", header_end)
        if close < 0:  # a passage with an empty text
            title, body = entry[header_end:].rstrip(")"), ""
        else:
            title, body = entry[header_end:close], entry[close + 2 :]
        docs.append((title, body))
    return docs


def normalize_answer(text: str) -> str:
    """Lowercase, remove punctuation and the articles a/an/the, collapse whitespace.

    Examples:
        >>> normalize_answer("The  Glass Orvan!")
        'glass orvan'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golden_answers: Iterable[str]) -> bool:
    """Whether the normalized prediction equals any normalized gold answer."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(gold) for gold in golden_answers)


def token_f1(prediction: str, golden_answers: Iterable[str]) -> float:
    """The best token-level F1 of ``prediction`` against the gold answers (0.0 if there are none)."""
    pred_tokens = normalize_answer(prediction).split()
    best = 0.0
    for gold in golden_answers:
        gold_tokens = normalize_answer(gold).split()
        common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
        if common == 0:
            continue
        precision = common / len(pred_tokens)
        recall = common / len(gold_tokens)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best
