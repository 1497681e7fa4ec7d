"""Argument types shared by the ``agc`` subcommands (torch-free, so that every parser starts at once)."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["HelpFormatter", "key_value", "non_negative_int", "positive_int"]


def key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` → ``(key, value)``; the value is read as JSON where it parses (``4``, ``true``, ``[6, 6]``),
    else kept as text (``split=test``)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def _integer(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer of at least 1 (argparse ``type=``)."""
    return _integer(text, 1, "a whole number of at least 1")


def non_negative_int(text: str) -> int:
    """An integer of at least 0 (argparse ``type=``)."""
    return _integer(text, 0, "a whole number of at least 0")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """The ``agc`` commands' help layout: each flag's default inside its sentence (``… (default: 4).``), left
    out where the help already says it or there is none to show, and lines broken at spaces only (never
    inside ``vllm-cpu`` or ``token-mean``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        empty = default is None or default is False or default is argparse.SUPPRESS
        shown = action.option_strings and not (empty or (isinstance(default, list) and not default))
        if not shown or "default" in text or "%(default)" in text:
            return text
        if text.endswith("."):
            return f"{text[:-1]} (default: %(default)s)."
        return f"{text} (default: %(default)s)"

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)
