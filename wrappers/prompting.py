"""Prompting: the papers' prompt templates with a window of recent history.

:class:`PromptObservations` turns each member's observation into the prompt that verl-agent (the code
of "Group-in-Group Policy Optimization for LLM Agent Training", arXiv:2505.10978, also used by GraphGPO
and SALT) builds for the policy. Two templates per environment, as there
(:class:`~agentgym_credit.envs.prompts.PromptTemplate`):

* before the first action, the *no-history* template: the task, the current observation and the
  admissible actions;
* afterwards, the task once, ``"Prior to this step, you have already taken {k} step(s)"``, the last
  ``history_length`` steps, the current observation and the admissible actions.

Each environment family defines its templates, how its observations are shown and how its history lines
read, in its folder (``agentgym_credit/envs/<name>/spec.py``) and registers them with its
:class:`~agentgym_credit.envs.spec.EnvFamilySpec`; :data:`TEMPLATES` is the table of every registered
family's templates. The raw observation stays available in ``info["raw_observation"]``; the anchor used for
credit is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import VectorEnv, VectorWrapper

from agentgym_credit.deprecation import moved
from agentgym_credit.envs.prompts import HistoryStep, PromptTemplate
from agentgym_credit.envs.spec import FamilyTable, family_of_env, get_template
from agentgym_credit.wrappers.recording import member_info

__all__ = ["HistoryStep", "PromptObservations", "PromptTemplate", "TEMPLATES", "render_prompt"]

TEMPLATES: Mapping[str, PromptTemplate] = FamilyTable(lambda spec: tuple(spec.templates.items()))
"""The prompt of each registered environment family (keys are the ``template`` names)."""

_MOVED = {"search_results": "agentgym_credit.envs.searchqa.spec.search_results"}


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)


def render_prompt(
    template: str,
    task: str,
    observation: str,
    history: Sequence[HistoryStep],
    admissible: Sequence[str],
    history_length: int | None = None,
) -> str:
    """The prompt for the current step (:meth:`~agentgym_credit.envs.prompts.PromptTemplate.render`).

    Args:
        template: a key of :data:`TEMPLATES`.
        task: the instruction (``info["task"]``).
        observation: the current raw observation.
        history: every step executed so far, oldest first (only the last ``history_length`` are shown).
        admissible: the admissible actions (``info["admissible_actions"]``).
        history_length: steps shown (None: the template's default; 0: no history, verl-agent's
            ``history_length <= 0``).
    """
    return get_template(template).render(task, observation, history, admissible, history_length)


class PromptObservations(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Replace each member's observation by the paper's prompt with a history window.

    Args:
        env: a group vector env.
        template: a key of :data:`TEMPLATES` (None: the default template of the environment's family).
        history_length: steps shown (None: the template's default, verl-agent's where it has one; 0: no
            history).
    """

    def __init__(self, env: VectorEnv, template: str | None = None, history_length: int | None = None) -> None:
        template = family_of_env(env).template if template is None else template
        if template is None:
            raise ValueError("the environment's family has no prompt template; pass template=")
        spec = get_template(template)  # raises ValueError naming the templates
        if history_length is not None and int(history_length) < 0:
            raise ValueError(f"history_length must be >= 0 (0 = no history), got {history_length}")
        gym.utils.RecordConstructorArgs.__init__(self, template=template, history_length=history_length)
        VectorWrapper.__init__(self, env)
        self.template = template
        self.history_length = spec.history_length if history_length is None else int(history_length)
        self._spec = spec
        self._history: list[list[HistoryStep]] = [[] for _ in range(self.num_envs)]
        self._raw: list[str] = [""] * self.num_envs
        self._task: list[str] = [""] * self.num_envs

    def prompt(self, i: int, infos: dict[str, Any]) -> str:
        """Member ``i``'s prompt from its stored history and the given vector infos."""
        info = member_info(infos, i)
        return self._spec.render(self._task[i], self._raw[i], self._history[i],
                                 list(info.get("admissible_actions", [])), self.history_length)

    def _prompts(self, infos: dict[str, Any]) -> tuple[str, ...]:
        return tuple(self.prompt(i, infos) for i in range(self.num_envs))

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        mask = None if options is None else options.get("reset_mask")
        obs, infos = self.env.reset(seed=seed, options=options)
        for i in range(self.num_envs) if mask is None else np.flatnonzero(mask):
            self._history[i] = []
            self._raw[i] = str(obs[i])
            self._task[i] = str(member_info(infos, int(i)).get("task", ""))
        infos["raw_observation"] = np.array(self._raw, dtype=object)
        infos["_raw_observation"] = np.ones(self.num_envs, dtype=bool)
        return self._prompts(infos), infos

    def fork_state(self, member: int) -> tuple[tuple[HistoryStep, ...], str, str]:
        """The prompt's part of a fork of ``member`` (:mod:`agentgym_credit.wrappers.forking`): its history,
        raw observation and task, so a forked member's next prompt is the one ``member`` would see."""
        return tuple(self._history[member]), self._raw[member], self._task[member]

    def restore_fork_state(self, members: list[int], state: tuple[tuple[HistoryStep, ...], str, str],
                           obs: list[Any], infos: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
        """Give each forked member the history, raw observation and task of ``state``; returns their prompts."""
        history, raw, task = state
        for i in members:
            self._history[i], self._raw[i], self._task[i] = list(history), raw, task
        infos["raw_observation"] = np.array(self._raw, dtype=object)
        infos["_raw_observation"] = np.isin(np.arange(self.num_envs), members)
        return [self.prompt(i, infos) for i in members], infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        for i in range(self.num_envs):
            info = member_info(infos, i)
            if info.get("active", True):
                executed = str(info.get("executed_action", actions[i]))
                self._history[i].append(HistoryStep(self._raw[i], executed, str(obs[i])))
                self._raw[i] = str(obs[i])
        infos["raw_observation"] = np.array(self._raw, dtype=object)
        infos["_raw_observation"] = np.ones(self.num_envs, dtype=bool)
        return self._prompts(infos), rewards, terminated, truncated, infos
