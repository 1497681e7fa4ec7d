"""The one folder under which the library keeps what it builds on first use and reuses on later runs.

Converted models, the tiny tokenizer, search indexes, the ``static:`` matcher's table, ALFWorld's plans and
AppWorld's engine environment and worlds all live under :func:`cache_root`, so one variable moves them all
and deleting one folder frees them all (the table of what is kept is in the design document, "Caches").
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_FOLDER", "cache_root"]

#: The folder's name under the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``).
CACHE_FOLDER = "agentgym_credit"


def cache_root() -> Path:
    """``$AGC_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/agentgym_credit``, else ``~/.cache/agentgym_credit``.

    Read at every call, so a variable set after import counts. An empty variable counts as unset (the XDG
    Base Directory rule). A ``~`` in ``$AGC_CACHE_DIR`` is expanded. With ``AGC_CACHE_DIR=/scratch/agc``,
    SearchQA's indexes go to ``/scratch/agc/searchqa`` and a converted SmolLM2 to
    ``/scratch/agc/smollm2-135m-instruct-fp32``.
    """
    configured = os.environ.get("AGC_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg else Path.home() / ".cache") / CACHE_FOLDER
