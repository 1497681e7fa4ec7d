"""Policies the evaluator can run: random, oracle, a Hugging Face model or checkpoint, any callable.

Every policy answers a batch of prompts with LLM-style responses (``<think>…</think><action>…</action>``
or Search-R1's ``<search>`` / ``<answer>``); the evaluator parses them with
:class:`~agentgym_credit.wrappers.ParseActions` exactly as in training, so a policy that breaks the
format is scored as it would be. A policy sees one :class:`PolicyStep` per environment step:

* :class:`RandomPolicy` — per episode a generator seeded with ``(seed, episode, sample)``; each step it
  picks uniformly among ``info["admissible_actions"]``. Where the list does not name a concrete action
  (WebShop's search page offers ``search[...]``) it searches the instruction; where it is empty
  (SearchQA) it searches the question or answers with one of its words, with equal probability. In the
  code format (AppWorld, no admissible list) it runs one of :data:`RANDOM_CODE_ACTIONS` uniformly:
  reading the app or API documentation, the account passwords, or completing the task with no answer.
  :func:`random_action` is that choice, so a direct rollout of one member env reproduces it.
* :class:`OraclePolicy` — the environment's own oracle, from its family's spec
  (:attr:`~agentgym_credit.envs.spec.EnvFamilySpec.oracle`): the Sokoban solver's optimal plan, ALFWorld's
  planner, WebShop's scripted shopper, SearchQA's plan-following agent, AppWorld's scripted solution.
* :class:`GeneratorPolicy` — a Hugging Face model folder, a model name known to
  :func:`~agentgym_credit.baselines.policy.load_policy` (``"tiny"``, ``"smollm2"``) or a trainer
  run (its ``policy`` folder), sampled through the trainer's own generator; greedy by default.
* :class:`CallablePolicy` — a user function ``prompts -> responses`` (``"module:function"`` on the
  command line, imported as ``python -m`` would: the current folder first on ``sys.path``).

:func:`check_policy` checks a description before any work: a name that is not a policy, a folder with a model,
a model in the local Hugging Face cache or an importable function fails in one line
(:class:`~agentgym_credit.errors.UnknownModelError`), with the name probably meant.
"""

from __future__ import annotations

import importlib
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from agentgym_credit.argtypes import close_match
from agentgym_credit.baselines.models import model_label, resolve_model
from agentgym_credit.errors import UnknownModelError

__all__ = [
    "CallablePolicy",
    "EvalPolicy",
    "GeneratorPolicy",
    "OraclePolicy",
    "PolicyStep",
    "RANDOM_CODE_ACTIONS",
    "POLICY_NAMES",
    "RandomPolicy",
    "check_policy",
    "format_response",
    "random_action",
    "resolve_policy",
]

_THINK = "<think>evaluation</think>"

POLICY_NAMES: tuple[str, ...] = ("random", "oracle")
"""The policies known by name (the model names: :data:`~agentgym_credit.baselines.models.BUILTIN_MODELS`)."""

#: The random policy's code actions (the code format offers no admissible list).
RANDOM_CODE_ACTIONS: tuple[str, ...] = (
    "print(apis.api_docs.show_app_descriptions())",
    "print(apis.api_docs.show_api_descriptions(app_name='supervisor'))",
    "print(apis.supervisor.show_account_passwords())",
    "apis.supervisor.complete_task(answer=None)",
)


def format_response(action: str, fmt: str) -> str:
    """Wrap an environment action in the response format ``fmt`` (search actions are already tagged)."""
    if fmt == "action":
        return f"{_THINK}<action>{action}</action>"
    if fmt == "code":
        return f"<code>{action}</code>"
    return action


@dataclass
class PolicyStep:
    """What a policy sees at one step.

    Attributes:
        members: indices of the members that act now (the others are finished).
        prompts: the prompt of each acting member (same order as ``members``).
        infos: the last ``info`` of each acting member (with ``raw_observation``).
        episodes: ``(episode index, sample)`` of each acting member.
        env: the group vector env (its ``members`` give oracles access to the member envs).
        fmt: the response format.
        step: the step number (0 at the first action).
    """

    members: list[int]
    prompts: list[str]
    infos: list[dict[str, Any]]
    episodes: list[tuple[int, int]]
    env: Any
    fmt: str
    step: int


class EvalPolicy(Protocol):
    """A policy for :func:`~agentgym_credit.evaluation.evaluate`: ``start`` each episode, then ``act``."""

    name: str

    def start(self, member: int, episode: int, sample: int, info: dict[str, Any], env: Any) -> None: ...

    def act(self, step: PolicyStep) -> list[str]: ...


def random_action(rng: np.random.Generator, info: dict[str, Any], fmt: str) -> str:
    """The random policy's next environment action (see the module docstring).

    Args:
        rng: the episode's generator.
        info: the member's last info (``admissible_actions``, ``task``).
        fmt: the response format (``"search"`` for Search-R1).
    """
    if fmt == "code":
        return RANDOM_CODE_ACTIONS[int(rng.integers(len(RANDOM_CODE_ACTIONS)))]
    admissible = [str(a) for a in info.get("admissible_actions", [])]
    task = str(info.get("task", "")).strip()
    if fmt == "search" or not admissible:
        words = task.rstrip("?").split() or ["unknown"]
        if rng.random() < 0.5:
            return f"<search>{task}</search>"
        return f"<answer>{words[int(rng.integers(len(words)))]}</answer>"
    choice = admissible[int(rng.integers(len(admissible)))]
    if choice.endswith("[...]"):
        return f"{choice[:-5]}[{task.lower()}]"
    return choice


class RandomPolicy:
    """Uniform over the admissible actions, seeded per episode (see the module docstring).

    Args:
        seed: the base seed; episode ``e``, sample ``k`` uses ``np.random.default_rng((seed, e, k))``.
    """

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self._rngs: dict[int, np.random.Generator] = {}

    def start(self, member: int, episode: int, sample: int, info: dict[str, Any], env: Any) -> None:
        self._rngs[member] = np.random.default_rng((self.seed, episode, sample))

    def act(self, step: PolicyStep) -> list[str]:
        return [format_response(random_action(self._rngs[m], info, step.fmt), step.fmt)
                for m, info in zip(step.members, step.infos, strict=True)]


class OraclePolicy:
    """The environment family's oracle (its spec's ``oracle``, with deterministic choices).

    With in-process members (``num_workers=0``) it reads them directly; with worker processes it runs where
    the members live (:meth:`~agentgym_credit.envs.group_vector.GroupVectorEnv.apply`: one oracle per worker,
    the workers side by side), with the same answers.
    """

    name = "oracle"

    def __init__(self) -> None:
        self._family: Any = None
        self._oracle: Any = None
        self._token = uuid.uuid4().hex  # names this policy's oracles in the worker processes

    def _factory(self, env: Any) -> Any:
        from agentgym_credit.envs.spec import family_of_env

        family = family_of_env(env)
        if family.oracle is None:
            raise ValueError(f"environment family {family.name!r} has no oracle; evaluate another policy")
        if family is not self._family:
            self._family, self._oracle = family, family.oracle(None)
        return family.oracle

    def start(self, member: int, episode: int, sample: int, info: dict[str, Any], env: Any) -> None:
        factory = self._factory(env)
        if getattr(env, "members", None):
            self._oracle.start(member, env.members[member].unwrapped, info)
        else:
            env.apply(_start_oracle, {member: (self._token, factory, member, info)})

    def act(self, step: PolicyStep) -> list[str]:
        if getattr(step.env, "members", None):
            actions = [self._oracle.act(m, step.env.members[m].unwrapped, info)
                       for m, info in zip(step.members, step.infos, strict=True)]
        else:
            factory = self._factory(step.env)
            calls = {m: (self._token, factory, m, info)
                     for m, info in zip(step.members, step.infos, strict=True)}
            answers = step.env.apply(_oracle_action, calls)
            actions = [answers[m] for m in step.members]
        return [format_response(action, step.fmt) for action in actions]


#: The oracles of :class:`OraclePolicy` in a worker process, by policy token (the latest few).
_WORKER_ORACLES: dict[str, Any] = {}


def _worker_oracle(token: str, factory: Any) -> Any:
    if token not in _WORKER_ORACLES:
        while len(_WORKER_ORACLES) >= 4:  # a long-lived worker outlives the policies that used it
            _WORKER_ORACLES.pop(next(iter(_WORKER_ORACLES)))
        _WORKER_ORACLES[token] = factory(None)
    return _WORKER_ORACLES[token]


def _start_oracle(env: Any, token: str, factory: Any, member: int, info: dict[str, Any]) -> None:
    """``oracle.start`` where the member lives (run by ``GroupVectorEnv.apply``)."""
    _worker_oracle(token, factory).start(member, env, info)


def _oracle_action(env: Any, token: str, factory: Any, member: int, info: dict[str, Any]) -> str:
    """``oracle.act`` where the member lives (run by ``GroupVectorEnv.apply``)."""
    return _worker_oracle(token, factory).act(member, env, info)


class CallablePolicy:
    """A user function ``prompts -> responses`` (one response per prompt).

    Args:
        fn: the function.
        name: the name shown in reports.
    """

    def __init__(self, fn: Callable[[list[str]], Sequence[str]], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__qualname__", "callable")

    def start(self, member: int, episode: int, sample: int, info: dict[str, Any], env: Any) -> None:
        """Nothing to set up: the function sees prompts only."""

    def act(self, step: PolicyStep) -> list[str]:
        responses = list(self.fn(list(step.prompts)))
        if len(responses) != len(step.prompts):
            raise ValueError(f"policy {self.name} returned {len(responses)} responses for {len(step.prompts)} prompts")
        return [str(r) for r in responses]


class GeneratorPolicy:
    """An LLM policy sampled with the trainer's generator (greedy when ``temperature == 0``).

    Args:
        model: a Hugging Face folder, ``"tiny"`` / ``"smollm2"``, an ``agc train`` / ``agc sft`` run folder (its ``policy``),
            or an already loaded :class:`~agentgym_credit.baselines.policy.Policy`.
        temperature: sampling temperature; 0 = greedy.
        max_new_tokens: response budget per step.
        seed: seeds the sampling noise of every step.
        device: where the model runs.
        stop: strings that end a response (default by format: ``</action>`` or ``</search>``/``</answer>``).
        precision: forward passes of a model loaded here: ``"float32"``, ``"bfloat16"`` (autocast) or ``"auto"``.
        batch_seeded: seed step ``k`` of a batch of episodes whose first is episode ``e`` with
            ``(seed + e) · 100003 + k``, as the trainer's rollouts seed a batch from its reset seed (default:
            ``seed · 100003 + k`` in every batch).
    """

    def __init__(self, model: Any, temperature: float = 0.0, max_new_tokens: int = 128, seed: int = 0,
                 device: str = "cpu", stop: Sequence[str] | None = None, cache_dir: str | None = None,
                 precision: str = "float32", batch_seeded: bool = False) -> None:
        from agentgym_credit.baselines.policy import load_policy

        if isinstance(model, str | Path):
            source = resolve_model(model, cache_dir, what="policy")
            policy = load_policy(source, cache_dir=cache_dir, device=device, seed=seed, precision=precision)
            name = model_label(model)
        else:
            policy = model
            name = str(getattr(policy, "name", model))
        self.policy = policy
        self.name = name
        self.temperature = float(temperature)
        self.max_new_tokens = int(max_new_tokens)
        self.seed = int(seed)
        self.stop = stop
        self.batch_seeded = bool(batch_seeded)
        self._first_episode = 0
        self._generators: dict[tuple[str, ...], Any] = {}

    def _generator(self, fmt: str) -> Any:
        from agentgym_credit.baselines.generation import HFGenerator

        stop = tuple(self.stop) if self.stop is not None else (
            ("</search>", "</answer>") if fmt == "search" else ("</action>",) if fmt == "action" else ("</code>",))
        if stop not in self._generators:
            self._generators[stop] = HFGenerator(self.policy, self.max_new_tokens, self.temperature, stop=stop)
        return self._generators[stop]

    def start(self, member: int, episode: int, sample: int, info: dict[str, Any], env: Any) -> None:
        """The model sees prompts only; a batch's first member gives its first episode (``batch_seeded``)."""
        if member == 0:
            self._first_episode = int(episode)

    def act(self, step: PolicyStep) -> list[str]:
        seed = (self.seed + (self._first_episode if self.batch_seeded else 0)) * 100_003 + step.step
        return [g.text for g in self._generator(step.fmt).generate(step.prompts, seed=seed)]


def _import_callable(spec: str) -> Callable[[list[str]], Sequence[str]]:
    """The function of ``"module:function"``, imported as ``python -m`` would: the current folder comes first
    on ``sys.path`` for the import (a user's ``mypackage/agent.py`` is found without ``PYTHONPATH=.``).

    Raises:
        UnknownModelError: the module is not found, has no such attribute, or it is not callable (one line).
    """
    module_name, _, attr = spec.partition(":")
    saved = list(sys.path)
    sys.path.insert(0, os.getcwd())
    try:
        fn: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise  # an import inside the user's module failed: its own traceback says where
        raise UnknownModelError(f"policy {spec!r}: no module {exc.name!r} in the current folder "
                                f"({os.getcwd()}) or on the Python path; run from the folder that holds "
                                f"{exc.name.split('.')[0]}, or install it") from None
    finally:
        sys.path[:] = saved
    owner = module_name
    for part in attr.split("."):
        if not hasattr(fn, part):
            public = [n for n in dir(fn) if not n.startswith("_")]
            fix = close_match(part, public) or "; name a function of it after the colon"
            raise UnknownModelError(f"policy {spec!r}: {owner} has no attribute {part!r}{fix}")
        fn, owner = getattr(fn, part), f"{owner}.{part}"
    if not callable(fn):
        raise UnknownModelError(f"policy {spec!r}: {owner} is a {type(fn).__name__}, not a function; name a "
                                "function prompts -> responses")
    return fn


def _is_callable_spec(text: str) -> bool:
    """Whether ``text`` reads as ``module:function`` (not an existing path, no ``/`` before the colon)."""
    return ":" in text and not Path(text).exists() and "/" not in text.split(":", 1)[0]


def check_policy(spec: Any, cache_dir: str | None = None) -> Any:
    """Check a policy description before any work; what :func:`resolve_policy` then takes.

    ``"random"`` and ``"oracle"`` are returned as they are, ``"module:function"`` as the imported
    :class:`CallablePolicy`, a model name or folder as it is once
    :func:`~agentgym_credit.baselines.models.resolve_model` has found it (nothing is loaded or downloaded);
    anything that is not a string or path is returned unchanged.

    Raises:
        UnknownModelError: one line saying what ``spec`` is not (not a folder, not a model in the local
            Hugging Face cache, not one of random/oracle/tiny/smollm2) with the name probably meant.
    """
    if not isinstance(spec, str | Path):
        return spec
    text = str(spec)
    if text in POLICY_NAMES:
        return text
    if _is_callable_spec(text):
        return CallablePolicy(_import_callable(text), name=text)
    resolve_model(text, cache_dir, what="policy", others=POLICY_NAMES)
    return spec


def resolve_policy(spec: Any, *, seed: int = 0, temperature: float = 0.0, max_new_tokens: int = 128,
                   device: str = "cpu", cache_dir: str | None = None, precision: str = "float32") -> EvalPolicy:
    """Turn a policy description into an :class:`EvalPolicy`.

    Args:
        spec: ``"random"``, ``"oracle"``, ``"module:function"`` (a callable ``prompts -> responses``), a
            model folder / name / training run folder, a loaded :class:`~agentgym_credit.baselines.policy.Policy`,
            a callable, or an object with ``start`` and ``act``.
        seed: seed of the random policy and of sampling.
        temperature: sampling temperature of model policies (0 = greedy).
        max_new_tokens: response budget of model policies.
        device: where a model runs.
        cache_dir: model cache (see :func:`~agentgym_credit.baselines.policy.default_cache_dir`).
        precision: forward passes of a model loaded from a name or folder (a loaded policy keeps its own).
    """
    if hasattr(spec, "act") and hasattr(spec, "start"):
        return spec
    if hasattr(spec, "model") and hasattr(spec, "tokenizer"):  # a loaded baselines Policy
        return GeneratorPolicy(spec, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed,
                               device=device, cache_dir=cache_dir)
    if callable(spec):
        return CallablePolicy(spec)
    if not isinstance(spec, str | Path):
        raise TypeError(f"cannot make a policy from {type(spec).__name__}")
    text = str(spec)
    if text == "random":
        return RandomPolicy(seed)
    if text == "oracle":
        return OraclePolicy()
    if _is_callable_spec(text):
        return CallablePolicy(_import_callable(text), name=text)
    return GeneratorPolicy(text, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed,
                           device=device, cache_dir=cache_dir, precision=precision)
