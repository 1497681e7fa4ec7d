"""Argument types shared by the ``agc`` subcommands (torch-free, so that every parser starts at once)."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["key_value"]


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
