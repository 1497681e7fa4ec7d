"""A scripted WebShop shopper (an oracle that knows the goal's product).

It searches with the goal's query, pages through the results (``Next >``) until the goal's ASIN shows
up (or a page lists no product), opens it, selects the goal's option values and buys. If the ASIN is not among the results it goes
back to the search page and searches the product name instead. It reads only
``info["admissible_actions"]``, so it works in both observation modes. Given the environment's page
state as well (``act(info, page=env.page)``) it re-plans from wherever it is, so it recovers from
actions it did not choose (a wrong product opened, a wrong option selected, another query searched):
the ε-noisy demonstrations of ``agc sft`` rely on that. Used by the tests and the
speed benchmark. It makes the best purchase there is; that scores 1.0 except for goals whose option
values upstream's option rule cannot match (about 2.5 % of the shipped goals, e.g. ``blueberry``: see
:mod:`~agentgym_credit.envs.webshop.reward`).

Example:
    >>> from agentgym_credit.envs.webshop import WebShopEnv
    >>> from agentgym_credit.envs.webshop.shopper import run_shopper
    >>> env = WebShopEnv(split="test")
    >>> result = run_shopper(env, seed=3)
    >>> result.won, result.score
    (True, 1.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym_credit.envs.webshop.actions import SEARCH_ADMISSIBLE, click_action, search_action
from agentgym_credit.envs.webshop.catalog import Goal
from agentgym_credit.envs.webshop.pages import PageKind, PageState
from agentgym_credit.envs.webshop.search import RESULTS_PER_PAGE

__all__ = ["ScriptedShopper", "ShopperResult", "run_shopper"]

_RESULTS_NAVIGATION = frozenset({"click[back to search]", "click[< prev]", "click[next >]"})


class ScriptedShopper:
    """A goal-aware policy for one WebShop episode.

    Args:
        goal: the episode's goal (``env.goal``).
        queries: the search keywords to try in turn (default: the goal's query, then its product name).
    """

    def __init__(self, goal: Goal, queries: Sequence[str] | None = None) -> None:
        self.goal = goal
        self.queries = list(queries) if queries is not None else [goal.query or goal.name, goal.name]
        self._attempt = 0
        self._opened = False
        self._chosen: set[str] = set()
        self._target = click_action(goal.asin.lower())

    def act(self, info: dict[str, Any], page: PageState | None = None) -> str:
        """The next action given the step's ``info`` (its ``admissible_actions``).

        Args:
            info: the step's info.
            page: the environment's page state (``env.page``); when given, the shopper re-plans from it
                (see :meth:`replan`) instead of assuming every earlier action was its own.
        """
        actions = list(info.get("admissible_actions", ()))
        if page is not None:
            detour = self.replan(page)
            if detour is not None and detour in actions:
                return detour
        if SEARCH_ADMISSIBLE in actions:
            query = self.queries[min(self._attempt, len(self.queries) - 1)]
            self._attempt += 1
            return search_action(query)
        if "click[buy now]" in actions:
            for value in self.goal.goal_options:
                option = click_action(value.lower())
                if value not in self._chosen and option in actions:
                    self._chosen.add(value)
                    return option
            return "click[buy now]"
        if self._opened:  # on a sub-page: go back to the item
            return "click[< prev]"
        if self._target in actions:
            self._opened = True
            return self._target
        listed = [a for a in actions if a not in _RESULTS_NAVIGATION]
        if listed and "click[next >]" in actions:  # past the last results page, Next > lists nothing
            return "click[next >]"
        return "click[back to search]"


    def replan(self, page: PageState) -> str | None:
        """Re-synchronize with the page state; returns a corrective click, or ``None`` to act as usual.

        On the goal's item page the options already selected are the goal's values found in
        ``page.selected`` (a wrong value of an option is replaced by clicking the goal's); another product's
        item page or sub-page is left with ``< prev``; on a results page that holds the goal's ASIN on
        another page, ``next >`` / ``< prev`` move towards it, and results of a query the shopper did not
        search that miss the ASIN are left with ``back to search``.
        """
        on_item = page.kind in (PageKind.ITEM, PageKind.ITEM_SUB)
        self._opened = on_item and page.asin == self.goal.asin
        selected = {value.lower() for _, value in page.selected}
        self._chosen = {v for v in self.goal.goal_options if v.lower() in selected} if self._opened else set()
        if on_item and not self._opened:
            return "click[< prev]"
        if page.kind is PageKind.RESULTS and self.goal.asin not in page.page_results:
            if self.goal.asin in page.results:
                target_page = page.results.index(self.goal.asin) // RESULTS_PER_PAGE + 1
                return "click[next >]" if target_page > page.page else "click[< prev]"
            if page.query not in self.queries:
                return "click[back to search]"
        return None


@dataclass
class ShopperResult:
    """The outcome of one scripted episode."""

    won: bool
    score: float
    reward: float
    steps: int
    actions: list[str] = field(default_factory=list)


def run_shopper(env: Any, seed: int | None = None, options: dict[str, Any] | None = None) -> ShopperResult:
    """Play one episode of ``env`` (a :class:`~agentgym_credit.envs.webshop.env.WebShopEnv`) with the shopper.

    Args:
        env: the environment (its ``goal`` property is read after ``reset``).
        seed: the reset seed.
        options: the reset options (e.g. ``{"goal_id": 7}``).
    """
    _, info = env.reset(seed=seed, options=options)
    shopper = ScriptedShopper(env.unwrapped.goal)
    actions: list[str] = []
    total = 0.0
    while True:
        action = shopper.act(info)
        actions.append(action)
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            break
    return ShopperResult(
        won=bool(info["won"]),
        score=float(info.get("score", 0.0)),
        reward=total,
        steps=len(actions),
        actions=actions,
    )
