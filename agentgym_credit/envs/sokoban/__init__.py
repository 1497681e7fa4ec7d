"""Sokoban: an own implementation of the box-pushing puzzle for ``Sokoban-Group-v0``.

* :mod:`~agentgym_credit.envs.sokoban.state` — the compact hashable board and its move rules;
* :mod:`~agentgym_credit.envs.sokoban.room` — room generation by exhaustive reverse play (the papers' generator);
* :mod:`~agentgym_credit.envs.sokoban.solver` — exact optimal distances and plans;
* :mod:`~agentgym_credit.envs.sokoban.render` — text (GiGPO symbols, verl-agent's layout) and RGB views;
* :mod:`~agentgym_credit.envs.sokoban.rewards` — the shaped (verl-agent) and sparse rewards;
* :mod:`~agentgym_credit.envs.sokoban.actions` — reading a move out of action text;
* :mod:`~agentgym_credit.envs.sokoban.env` — the member environment :class:`SokobanEnv`;
* :mod:`~agentgym_credit.envs.sokoban.oracle` — an ε-optimal scripted policy;
* :mod:`~agentgym_credit.envs.sokoban.credit_probe` — the solver's step ground truth for ``agc run``.
"""

from __future__ import annotations

from agentgym_credit.envs.sokoban.actions import STILL, parse_direction
from agentgym_credit.envs.sokoban.env import SOKOBAN_INSTRUCTION, SokobanEnv
from agentgym_credit.envs.sokoban.oracle import EpsilonOraclePolicy
from agentgym_credit.envs.sokoban.render import (
    LEGEND,
    SYMBOLS,
    TEXT_FORMATS,
    parse_text,
    render_board,
    render_rgb,
    render_text,
    render_verl_agent_text,
)
from agentgym_credit.envs.sokoban.rewards import REWARD_MODES, STEP_PENALTY, WIN_REWARD, step_reward
from agentgym_credit.envs.sokoban.room import (
    DEFAULT_SEARCH_DEPTH,
    RoomGenerationError,
    default_num_gen_steps,
    generate_room,
)
from agentgym_credit.envs.sokoban.solver import SokobanSolver, SolverLimitError, optimal_distance, plan
from agentgym_credit.envs.sokoban.state import (
    ACTIONS,
    BOX,
    BOX_ON_TARGET,
    DIRECTIONS,
    FLOOR,
    PLAYER,
    PLAYER_ON_TARGET,
    TARGET,
    WALL,
    Position,
    Room,
    SokobanState,
)

__all__ = [
    "ACTIONS",
    "BOX",
    "BOX_ON_TARGET",
    "DEFAULT_SEARCH_DEPTH",
    "DIRECTIONS",
    "FLOOR",
    "LEGEND",
    "PLAYER",
    "PLAYER_ON_TARGET",
    "Position",
    "REWARD_MODES",
    "Room",
    "RoomGenerationError",
    "SOKOBAN_INSTRUCTION",
    "STEP_PENALTY",
    "STILL",
    "SYMBOLS",
    "SokobanEnv",
    "SokobanSolver",
    "SokobanState",
    "SolverLimitError",
    "TARGET",
    "TEXT_FORMATS",
    "WALL",
    "WIN_REWARD",
    "EpsilonOraclePolicy",
    "default_num_gen_steps",
    "generate_room",
    "optimal_distance",
    "parse_direction",
    "parse_text",
    "plan",
    "render_board",
    "render_rgb",
    "render_text",
    "render_verl_agent_text",
    "step_reward",
]
