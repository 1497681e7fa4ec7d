"""ALFWorld on the real ALFWorld engine (TextWorld PDDL), with games generated offline.

Modules:

* :mod:`~agentgym_credit.envs.alfworld.env` -- :class:`~agentgym_credit.envs.alfworld.env.ALFWorldEnv`, the ``ALFWorld-Group-v0`` member env;
* :mod:`~agentgym_credit.envs.alfworld.engine` -- :class:`~agentgym_credit.envs.alfworld.engine.AlfredEngine`, upstream's engine stack with
  cached compilation (transcript-identical, faster);
* :mod:`~agentgym_credit.envs.alfworld.grammar` -- TextWorld's text grammar without repeated parsing;
* :mod:`~agentgym_credit.envs.alfworld.data` -- finding games (real ALFWorld data or the shipped set);
* :mod:`~agentgym_credit.envs.alfworld.generate` -- generating games from the floor plans ``alfworld`` ships,
  distributed like the real ALFWorld set;
* :mod:`~agentgym_credit.envs.alfworld.plans` -- the planner's plans cached on disk per game and state;
* :mod:`~agentgym_credit.envs.alfworld.expert` -- upstream's hand-coded expert played as
  ``alfworld-generate`` plays it (the games' walkthroughs);
* :mod:`~agentgym_credit.envs.alfworld.stats` -- statistics of a folder of games (task shares, scenes,
  receptacles, walkthroughs);
* :mod:`~agentgym_credit.envs.alfworld.credit_probe` -- the planner's step ground truth for ``agc run --env alfworld``.

Everything here needs the ``alfworld`` extra (``alfworld``, ``textworld``, ``fast-downward-textworld``).
Names are imported lazily so that importing this package does not load the engine.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ALFWorldEnv", "AlfredEngine", "GameRecord", "find_games", "generate_games"]

_EXPORTS = {
    "ALFWorldEnv": "agentgym_credit.envs.alfworld.env",
    "AlfredEngine": "agentgym_credit.envs.alfworld.engine",
    "GameRecord": "agentgym_credit.envs.alfworld.data",
    "find_games": "agentgym_credit.envs.alfworld.data",
    "generate_games": "agentgym_credit.envs.alfworld.generate",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
