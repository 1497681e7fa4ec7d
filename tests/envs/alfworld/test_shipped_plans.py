"""The shipped plans: every shipped evaluation game is covered, small, the planner's own plans, read first."""

from __future__ import annotations

import hashlib
import json
import lzma
from pathlib import Path

import pytest

from agentgym_credit.envs.alfworld.data import GameRecord, find_games
from agentgym_credit.envs.alfworld.plans import SHIPPED_PLANS, PlanCache, planner_version, shipped_plans
from agentgym_credit.envs.alfworld.shipped_plans import EVAL_SPLITS, oracle_plans, write_plans


def _digest(record: GameRecord) -> str:
    """The game's identity in the plan cache (as ``CompiledGame.compile`` computes it)."""
    data = json.loads(record.game_file.read_text())
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(lzma.decompress(SHIPPED_PLANS.read_bytes()))


def test_every_shipped_evaluation_game_has_its_plans_in_a_small_file(
    shipped: dict, shipped_root: Path
) -> None:
    assert SHIPPED_PLANS.stat().st_size < 100 * 1024
    assert shipped["planner"] == planner_version() and shipped_plans() == shipped["plans"]
    games = {_digest(r) for split in EVAL_SPLITS for r in find_games(split, data_path=shipped_root)}
    assert set(shipped["plans"]) == games and len(games) == 274  # 140 valid_seen + 134 valid_unseen
    assert all(plans and all(plan for plan in plans.values()) for plans in shipped["plans"].values())


def test_shipped_plans_are_what_the_oracle_plans_again(shipped: dict, shipped_root: Path) -> None:
    """Made by the project's code from the planner's answers: replanning two small games gives the same entries."""
    records = [
        r for r in find_games("valid_seen", data_path=shipped_root, task_types=["look_at_obj_in_light"])
    ][:2]
    for record in records:
        again = oracle_plans([record.game_file])
        assert again == {_digest(record): shipped["plans"][_digest(record)]}


def test_a_shipped_plan_is_read_before_planning(shipped: dict) -> None:
    game, by_state = next(iter(shipped["plans"].items()))
    state, plan = next(iter(by_state.items()))

    def planner() -> list[str]:
        raise AssertionError("the planner ran for a shipped state")

    cache = PlanCache(None, shipped=True)
    assert cache.get(game, state, planner) == plan and cache.hits == 1 and cache.misses == 0
    with pytest.raises(AssertionError, match="the planner ran"):  # a cache that does not read them plans
        PlanCache(None).get(game, state, planner)


def test_plans_of_another_planner_version_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentgym_credit.envs.alfworld import plans

    path = write_plans({"g": {"s": ["look"]}}, tmp_path / "plans.json.xz")
    assert json.loads(lzma.decompress(path.read_bytes())) == {
        "planner": planner_version(),
        "plans": {"g": {"s": ["look"]}},
    }
    monkeypatch.setattr(plans, "SHIPPED_PLANS", path)
    plans.shipped_plans.cache_clear()
    try:
        assert plans.shipped_plans() == {"g": {"s": ["look"]}}
        plans.shipped_plans.cache_clear()
        monkeypatch.setattr(plans, "planner_version", lambda: "another")
        assert plans.shipped_plans() == {}
    finally:
        plans.shipped_plans.cache_clear()
