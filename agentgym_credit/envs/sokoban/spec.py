"""The Sokoban family: ``Sokoban-Group-v0``, its prompt, evaluation protocol, oracle and presets.

* Prompt — verl-agent's Sokoban template: the rules and symbols, then the board only (the observation's last
  paragraph without its label line; the rules are in the template, so an environment that prepends them to
  every observation does not repeat them in the history), the last 2 steps, the moves quoted with double
  quotes.
* Evaluation — no split: 256 rooms from seeds ``seed, seed + 1, …``, 15 steps, the success rate.
* Oracle — the exact solver's optimal move from the current board (:class:`SokobanOracle`), with ties broken
  by ``ACTIONS`` order (the reset info's ``walkthrough``) or, given a generator, at random
  (:class:`~agentgym_credit.envs.sokoban.oracle.EpsilonOraclePolicy` with ε = 0). Its ``agc sft`` noise is
  a uniformly random move.
* Credit probe — the ε-noisy solver and the solver's distance change as each step's ground truth
  (:mod:`~agentgym_credit.envs.sokoban.credit_probe`), for ``agc run``.
* GraphGPO's ω = 0.8 ("Beyond Trajectory-Level Attribution: Graph-Based Credit Assignment for Agentic
  Reinforcement Learning", arXiv:2605.26684, Appendix D.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentgym_credit.envs.eval_protocol import EvalProtocol, seeded_episodes, success_table
from agentgym_credit.envs.prompts import (
    HISTORY,
    THINK_ACTION,
    HistoryStep,
    PromptTemplate,
    simple_history_line,
)
from agentgym_credit.envs.sokoban.credit_probe import PROBE as CREDIT_PROBE
from agentgym_credit.envs.sokoban.state import ACTIONS
from agentgym_credit.envs.spec import EnvFamilySpec

__all__ = ["DEFAULT_EPISODES", "ID", "PROTOCOL", "SPEC", "SokobanOracle", "TEMPLATE", "board"]

ID = "Sokoban-Group-v0"
DEFAULT_EPISODES = 256
"""Rooms in the Sokoban evaluation set (seeds ``seed .. seed + 255``)."""

_RULES = (
    "\nYou are an expert agent operating in the Sokoban environment.\n\n"
    "# Symbols and Their Meaning\n"
    "- Walls (`#`): These block movement. You can't move through or push anything into walls.\n"
    "- Floor (`_`): Open spaces where you can walk and move boxes.\n"
    "- Targets (`O`): The spots where boxes need to go.\n"
    "- Boxes (`X`): These are what you need to push onto the targets.\n"
    "- Player (`P`): That's you! You'll move around the grid to push boxes.\n"
    "- Box on Target (`√`): A box successfully placed on a target.\n"
    "- Player on Target (`S`): You standing on a target.\n\n"
    "# Your Goal\n"
    "Your goal is to push all the boxes (`X`) onto the target spots (`O`). Once all boxes are on the "
    "targets, you win!\n\n"
    "# Rules\n"
    "You can only push boxes. You can't pull them, so plan ahead to avoid getting stuck.\n"
    "You can't walk through or push boxes into walls (`#`).\n"
    "To avoid traps, do not push boxes into corners or against walls where they can't be moved again.\n\n"
    "# Current Step\n"
)
_TAIL = (
    "Your current observation is:\n{observation}\n"
    "Your admissible actions are [{admissible}].\n\n"
    "Now it's your turn to make a move (choose ONE action only for the current step).\n"
    "You should first reason step-by-step about the current situation — observe the positions of boxes "
    "and targets, plan a path to push a box toward a target, and avoid traps like corners or walls. "
    + THINK_ACTION
)


def board(observation: str, task: str) -> str:
    """The board: the observation's last paragraph without a trailing label line (the rules are in the template)."""
    last = observation.rsplit("\n\n", 1)[-1]
    first, sep, rest = last.partition("\n")
    return rest if sep and first.rstrip().endswith(":") else last


TEMPLATE = PromptTemplate(
    first=_RULES + _TAIL,
    later=_RULES + HISTORY + "You are now at step {current_step} and y" + _TAIL[1:],
    history_length=2, observation=board, admissible=lambda a: ", ".join(f'"{x}"' for x in a),
    history_line=simple_history_line(board),
)

PROTOCOL = EvalProtocol(ID, "sokoban", "action", 15, ("",), ("optimal_distance",), ("overall", "All", "success"),
                        seeded_episodes(DEFAULT_EPISODES), success_table)


class SokobanOracle:
    """The solver's optimal move from each member's current board (see the module docstring).

    Args:
        rng: breaks ties between optimal moves (one generator for the batch, drawn from once per move);
            None: the first optimal move in ``ACTIONS`` order, i.e. the walkthrough's.
    """

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        from agentgym_credit.envs.sokoban.oracle import EpsilonOraclePolicy

        self.policy = None if rng is None else EpsilonOraclePolicy(0.0, seed=int(rng.integers(2**31)))

    def start(self, member: int, env: Any, info: dict[str, Any]) -> None:
        """Nothing to remember: the solver answers from the board."""

    def act(self, member: int, env: Any, info: dict[str, Any]) -> str:
        if self.policy is not None:
            return self.policy.act(env.room_state, env.solver)
        return (env.solver.optimal_actions(env.room_state) or list(ACTIONS))[0]


def _noise(oracle: SokobanOracle, member: int, env: Any, info: dict[str, Any],
           rng: np.random.Generator) -> tuple[str, str]:
    """The solver's move, and a uniformly random move played instead."""
    return oracle.act(member, env, info), str(rng.choice(ACTIONS))


def _tokenizer_texts() -> list[str]:
    """Prompts of 24 rooms along random moves, and responses in the action format for every move."""
    import gymnasium as gym

    texts: list[str] = []
    rng = np.random.default_rng(0)
    env = gym.make(ID)
    for seed in range(24):
        obs, info = env.reset(seed=seed)
        history: list[HistoryStep] = []
        for _ in range(4):
            texts.append(TEMPLATE.render(info["task"], obs, history, info["admissible_actions"]))
            action = str(rng.choice(ACTIONS))
            nxt, _, terminated, truncated, info = env.step(action)
            history.append(HistoryStep(obs, action, nxt))
            obs = nxt
            if terminated or truncated:
                break
    env.close()
    for action in ACTIONS:
        for thought in ("The box is next to me.", "I should move the player towards the box.", "Push it."):
            texts.append(f"<think>{thought}</think><action>{action}</action>")
    return texts


SPEC = EnvFamilySpec(
    name="sokoban",
    ids=(ID,),
    entry_point="agentgym_credit.envs.sokoban.env:SokobanEnv",
    max_episode_steps=15,
    templates={"sokoban": TEMPLATE},
    response_format="action",
    protocols=(PROTOCOL,),
    oracle=SokobanOracle,
    noise=_noise,
    oracle_exact=True,
    credit_probe=CREDIT_PROBE,
    graphgpo_omega=0.8,
    tokenizer_texts=_tokenizer_texts,
    docs="environments/sokoban.md",
)
