"""A persistent cache of the planner's plans, keyed by the game's content and the state planned from.

TextWorld's planner (``PddlState.replan``: Fast Downward's search on the game's optimized SAS
translation) is deterministic: from one state of one game it always returns the same plan. Its cost is
the search itself, not the translation or the process: a few hundredths of a second in small rooms,
but seconds for multi-step tasks in the large kitchens of ``valid_unseen`` (scene 10: 11.8 s of CPU for
one cool task's plan), every time an oracle starts an episode there; a plan read from the cache takes 1 ms.

:class:`PlanCache` therefore memoizes plans under

* the game's digest (SHA-256 of its ``game.tw-pddl`` content: an edited or regenerated game is a
  different game), and
* the digest of the state's facts (sorted), which is all the search depends on,

in memory and in one small JSON file per game under ``$AGC_CACHE_DIR/alfworld/plans`` (default
``~/.cache/agentgym_credit/alfworld/plans``; a few hundred bytes per game). A plan is computed once
per machine, on first use: the oracle's plan from a game's initial state, and the replans after
detours, which are mostly the same few states. The cache changes no plan: what it returns is what the
planner returned for that state (a test plans again and compares).

The package also ships the plans the planning oracle uses on the shipped evaluation games
(:data:`SHIPPED_PLANS`, made by :func:`~agentgym_credit.envs.alfworld.shipped_plans.build_shipped_plans`,
``agc alfworld plans``): every plan of an oracle episode on each ``valid_seen`` and ``valid_unseen`` game, so
that ``agc eval --env ALFWorld-Group-v0 --policy oracle`` plans nothing even the first time on a machine.
:data:`SHARED_PLAN_CACHE` reads them after its own plans (``shipped=True``); they are used only with the
planner version they were made with.
"""

from __future__ import annotations

import functools
import hashlib
import json
import lzma
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from agentgym_credit.user_cache import cache_root

__all__ = [
    "PlanCache",
    "SHARED_PLAN_CACHE",
    "SHIPPED_PLANS",
    "default_plan_dir",
    "planner_version",
    "shipped_plans",
    "state_digest",
]

#: The plans shipped with the package, xz-compressed JSON:
#: ``{"planner": version, "plans": {game: {state: plan}}}``.
SHIPPED_PLANS = Path(__file__).resolve().parent / "data" / "alfworld_plans.json.xz"


def default_plan_dir() -> Path:
    """``alfworld/plans`` in the library's user cache (:func:`~agentgym_credit.user_cache.cache_root`: by
    default ``~/.cache/agentgym_credit/alfworld/plans``)."""
    return cache_root() / "alfworld" / "plans"


def planner_version() -> str:
    """The installed planner's version (``fast-downward-textworld``): plans are kept per version."""
    try:
        return metadata.version("fast-downward-textworld")
    except metadata.PackageNotFoundError:  # pragma: no cover - the alfworld extra installs it
        return "unknown"


def state_digest(facts: Iterable[Any]) -> str:
    """SHA-256 of a state's facts (their text, sorted): equal states give equal digests."""
    text = "\n".join(sorted(str(fact) for fact in facts))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1)
def shipped_plans() -> dict[str, dict[str, list[str]]]:
    """The shipped plans (:data:`SHIPPED_PLANS`) by game and state digest; empty when the file is missing or
    unreadable, or was made with another planner version."""
    try:
        stored = json.loads(lzma.decompress(SHIPPED_PLANS.read_bytes()).decode("utf-8"))
    except (OSError, ValueError, lzma.LZMAError):
        return {}
    if not isinstance(stored, dict) or stored.get("planner") != planner_version():
        return {}
    return stored.get("plans", {})


class PlanCache:
    """Plans by (game digest, state digest), in memory and, when ``path`` is set, on disk.

    Args:
        path: the folder of the per-game JSON files; ``None`` keeps plans in memory only.
        shipped: also return the plans shipped with the package (:func:`shipped_plans`) before planning.

    Attributes:
        hits: plans returned from the cache (the shipped plans included).
        misses: plans computed by the planner.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, shipped: bool = False) -> None:
        self.path = None if path is None else Path(path)
        self.shipped = bool(shipped)
        self._version = planner_version()
        self._plans: dict[str, dict[str, list[str]]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _file(self, game: str) -> Path | None:
        return None if self.path is None else self.path / f"{game}.json"

    def _load(self, game: str) -> dict[str, list[str]]:
        plans = self._plans.get(game)
        if plans is None:
            plans = {}
            file = self._file(game)
            if file is not None and file.exists():
                try:
                    stored = json.loads(file.read_text(encoding="utf-8"))
                    if stored.get("planner") == self._version:
                        plans = {k: list(v) for k, v in stored["plans"].items()}
                except (OSError, ValueError, KeyError, AttributeError, TypeError):
                    plans = {}  # an unreadable file is planned again and rewritten
            self._plans[game] = plans
        return plans

    def _store(self, game: str, plans: dict[str, list[str]]) -> None:
        file = self._file(game)
        if file is None:
            return
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            if file.exists():  # keep what another process stored meanwhile
                try:
                    stored = json.loads(file.read_text(encoding="utf-8"))
                    if stored.get("planner") == self._version:
                        plans = {**stored["plans"], **plans}
                except (OSError, ValueError, KeyError, AttributeError, TypeError):
                    pass
            handle, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{game}.", suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"planner": self._version, "plans": plans}, out)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the plans from the machine's other users
            os.replace(tmp, file)
        except OSError:  # a read-only or full cache folder: plans stay in memory
            pass

    def get(self, game: str, state: str, planner: Callable[[], list[str]]) -> list[str]:
        """The plan of ``game`` from ``state``; ``planner()`` computes it on a miss (and it is stored).

        Args:
            game: the game's digest.
            state: the state's digest (:func:`state_digest`).
            planner: plans from the current state (the engine's planner call).
        """
        with self._lock:
            plan = self._load(game).get(state)
            if plan is None and self.shipped:
                plan = shipped_plans().get(game, {}).get(state)
            if plan is not None:
                self.hits += 1
                return list(plan)
        plan = list(planner())
        with self._lock:
            self.misses += 1
            plans = self._load(game)
            plans[state] = plan
            self._store(game, plans)
        return list(plan)

    def clear(self) -> None:
        """Forget the plans held in memory (the files stay)."""
        with self._lock:
            self._plans.clear()


#: The process-wide cache every engine uses unless given its own, on disk and with the shipped plans
#: (``AGC_ALFWORLD_PLAN_CACHE=0``: nothing is written to disk).
SHARED_PLAN_CACHE = PlanCache(
    None if os.environ.get("AGC_ALFWORLD_PLAN_CACHE") == "0" else default_plan_dir(), shipped=True
)
