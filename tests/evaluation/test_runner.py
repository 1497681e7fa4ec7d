"""``evaluate``: the oracle reaches its known success, the random policy matches a direct rollout."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import agentgym_credit  # noqa: E402,F401
from agentgym_credit.envs.alfworld.spec import TASK_COLUMNS as ALFWORLD_TASK_COLUMNS  # noqa: E402
from agentgym_credit.evaluation import (  # noqa: E402
    EvaluationUnavailable,
    Evaluator,
    evaluate,
    get_protocol,
    random_action,
)
from agentgym_credit.evaluation.runner import check_split  # noqa: E402
from agentgym_credit.wrappers import parse_action  # noqa: E402


@pytest.fixture
def searchqa_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.getbasetemp() / "searchqa-cache")


def test_sokoban_oracle_wins_exactly_the_rooms_solvable_within_the_step_budget() -> None:
    result = evaluate("oracle", "Sokoban-Group-v0", episodes=48, batch_size=16, progress=False)
    member = gym.make("Sokoban-Group-v0").unwrapped
    solvable = []
    for spec_seed in range(48):
        _, info = member.reset(seed=spec_seed)
        solvable.append(info["optimal_distance"] <= 15)
    assert [e.won for e in result.episodes] == solvable
    assert result.headline == pytest.approx(100.0 * np.mean(solvable))
    assert all(e.invalid_steps == 0 for e in result.episodes)


def test_webshop_oracle_wins_exactly_the_goals_that_can_be_won() -> None:
    """Upstream's option rule makes some goals unwinnable ("blueberry"): the oracle wins all the others."""
    from agentgym_credit.envs.webshop.env import WebShopEnv
    from agentgym_credit.envs.webshop.reward import score_purchase

    result = evaluate("oracle", "WebShop-Group-v0", episodes=24, batch_size=8, progress=False)
    catalog = WebShopEnv(split="test").catalog
    winnable = []
    for e in result.episodes:
        goal = catalog.goals[int(e.task_id)]
        winnable.append(score_purchase(catalog.product(goal.asin), goal, goal.goal_options)["score"] == 1.0)
    assert len(result.episodes) == 24 and sum(winnable) >= 20
    assert [e.won for e in result.episodes] == winnable
    assert result.headline == pytest.approx(100.0 * np.mean(winnable))
    assert all(e.invalid_steps == 0 for e in result.episodes)


def test_searchqa_oracle_wins_every_question(searchqa_cache: str) -> None:
    result = evaluate("oracle", "SearchQA-Group-v0", episodes=30, batch_size=8, progress=False,
                      cache_dir=searchqa_cache)
    assert result.headline == 100.0
    assert len(result.episodes) == 30
    assert all(e.won and e.invalid_steps == 0 for e in result.episodes)
    # per hop count and per question type, every row won
    assert {"1-hop", "2-hop", "3-hop", "All"} <= set(result.metrics["em_by_hops"])
    assert {"single", "bridge", "comparison"} <= set(result.metrics["em_by_question_type"])
    assert all(row["em"] == 100.0 for row in result.metrics["em_by_question_type"].values())


def test_alfworld_oracle_wins_every_game_and_reports_per_task_type() -> None:
    pytest.importorskip("alfworld")
    kinds = ["look_at_obj_in_light", "pick_two_obj_and_place"]
    result = evaluate("oracle", "ALFWorld-Group-v0", "valid_unseen", batch_size=4, progress=False,
                      task_types=kinds, episodes=4)  # the planner takes seconds per game: a few games
    table = result.metrics["success_by_task_type"]
    played = {e.info["task_type"] for e in result.episodes}
    assert played <= set(kinds) and "All" in table
    assert all(row["success"] == 100.0 for row in table.values())
    assert table["All"]["n"] == 4 and result.headline == 100.0
    assert all(e.steps <= 50 for e in result.episodes)
    assert set(ALFWORLD_TASK_COLUMNS) >= set(kinds)


def _direct_random(env_id: str, n: int, seed: int, **kwargs: object) -> list[tuple[bool, float, int]]:
    """Play the random policy on one member env, episode by episode, without the group env or wrappers."""
    protocol = get_protocol(env_id)
    env = gym.make(env_id, **protocol.env_kwargs(protocol.splits[0]), **kwargs).unwrapped
    specs = protocol.episodes(env, protocol.splits[0], seed, n)
    out = []
    for spec in specs:
        _, info = env.reset(seed=spec.seed, options=dict(spec.options))
        rng = np.random.default_rng((seed, spec.index, 0))
        total, steps = 0.0, 0
        while True:
            action = random_action(rng, info, protocol.fmt)
            executed = parse_action(f"<think>x</think><action>{action}</action>").action \
                if protocol.fmt == "action" else action
            _, reward, terminated, truncated, info = env.step(executed)
            total, steps = total + reward, steps + 1
            if terminated or truncated:
                break
        out.append((bool(info["won"]), total, steps))
    return out


@pytest.mark.parametrize(("env_id", "n"), [
    ("Sokoban-Group-v0", 40), ("WebShop-Group-v0", 20), ("SearchQA-Group-v0", 20),
])
def test_random_policy_matches_a_direct_rollout_with_the_same_seed(env_id: str, n: int, searchqa_cache: str) -> None:
    extra = {"cache_dir": searchqa_cache} if env_id.startswith("SearchQA") else {}
    result = evaluate("random", env_id, episodes=n, seed=7, batch_size=6, progress=False, **extra)
    batched = [(e.won, e.reward, e.steps) for e in result.episodes]
    assert batched == _direct_random(env_id, n, 7, **extra)
    assert len({r for _, r, _ in batched}) >= 1 and sum(s for *_, s in batched) > n  # episodes were played


def test_random_policy_is_reproducible_and_seed_dependent() -> None:
    a = evaluate("random", "Sokoban-Group-v0", episodes=32, seed=1, progress=False)
    b = evaluate("random", "Sokoban-Group-v0", episodes=32, seed=1, batch_size=5, progress=False)
    c = evaluate("random", "Sokoban-Group-v0", episodes=32, seed=2, progress=False)
    steps = lambda r: [(e.won, e.steps) for e in r.episodes]  # noqa: E731
    assert steps(a) == steps(b)
    assert steps(a) != steps(c)


def test_samples_run_each_task_from_the_same_start_and_average(tmp_path) -> None:
    result = evaluate("random", "Sokoban-Group-v0", episodes=6, samples=4, progress=False)
    assert len(result.episodes) == 24
    for index in range(6):
        runs = [e for e in result.episodes if e.index == index]
        assert len({e.task_id for e in runs}) == 1 and len(runs) == 4
    assert result.headline == pytest.approx(100.0 * np.mean([e.won for e in result.episodes]))
    json_path, md_path = result.write(tmp_path)
    data = json.loads(json_path.read_text())
    assert data["metrics"]["overall"]["All"]["n"] == 24 and len(data["episodes"]) == 24
    assert "| All |" in md_path.read_text()
    assert "Every column but n (the episodes of the row) is a percentage, 0–100." in md_path.read_text()


def test_callable_policy_sees_prompts_and_is_parsed_like_training() -> None:
    seen: list[str] = []

    def always_up(prompts: list[str]) -> list[str]:
        seen.extend(prompts)
        return ["<think>push</think><action>up</action>"] * len(prompts)

    result = evaluate(always_up, "Sokoban-Group-v0", episodes=4, progress=False)
    assert seen and all("Sokoban" in p for p in seen)
    assert all(e.invalid_steps == 0 for e in result.episodes)
    broken = evaluate(lambda ps: ["up"] * len(ps), "Sokoban-Group-v0", episodes=4, progress=False)
    assert all(e.invalid_steps == e.steps for e in broken.episodes)  # no <action> tags: invalid format


def test_evaluator_is_reusable_inside_a_training_loop() -> None:
    with Evaluator("Sokoban-Group-v0", episodes=8, progress=False) as evaluator:
        first = evaluator("random")
        second = evaluator("random")
        oracle = evaluator("oracle")
    assert [e.steps for e in first.episodes] == [e.steps for e in second.episodes]
    assert oracle.headline >= first.headline


@pytest.mark.parametrize("policy", ["oracle", "random"])
def test_worker_processes_play_the_same_episodes(policy: str) -> None:
    """--workers plays a batch's tasks in worker processes (the oracle runs there too) with the same results."""
    results = [evaluate(policy, "Sokoban-Group-v0", episodes=10, samples=2, batch_size=4, seed=3, progress=False,
                        workers=workers) for workers in (0, 2)]
    episodes = [[(e.index, e.sample, e.task_id, e.won, e.reward, e.steps) for e in r.episodes] for r in results]
    assert episodes[0] == episodes[1] and len(episodes[0]) == 20
    assert [r.settings["workers"] for r in results] == [0, 2]


def test_alfworld_oracle_in_workers_matches_in_process() -> None:
    pytest.importorskip("alfworld")
    kinds = ["look_at_obj_in_light"]  # small rooms: short searches where a plan is not shipped
    results = [evaluate("oracle", "ALFWorld-Group-v0", "valid_seen", episodes=2, batch_size=2, progress=False,
                        task_types=kinds, workers=workers) for workers in (0, 2)]
    episodes = [[(e.task_id, e.won, e.steps) for e in r.episodes] for r in results]
    assert episodes[0] == episodes[1] and all(won for _, won, _ in episodes[0])


def test_unknown_or_unregistered_environment_is_a_clear_error() -> None:
    with pytest.raises(EvaluationUnavailable, match="no evaluation protocol"):
        get_protocol("CartPole-v1")
    if "AppWorld-Group-v0" not in gym.registry:
        with pytest.raises(EvaluationUnavailable, match="not registered"):
            get_protocol("AppWorld-Group-v0")
    with pytest.raises(ValueError, match="valid_seen"):
        Evaluator("ALFWorld-Group-v0", "train")
    with pytest.raises(ValueError, match="not 'valid'; did you mean 'valid_seen'"):
        Evaluator("ALFWorld-Group-v0", "valid")
    # an environment without splits refuses one instead of playing its seeded tasks under another name
    with pytest.raises(ValueError, match="Sokoban-Group-v0 has no splits: its tasks are drawn from reset seeds"):
        Evaluator("Sokoban-Group-v0", "test")
    assert check_split(get_protocol("Sokoban-Group-v0"), None) == check_split(get_protocol("Sokoban-Group-v0"), "")


def test_model_policy_is_loaded_in_the_requested_precision(tmp_path) -> None:
    pytest.importorskip("transformers")
    from agentgym_credit.evaluation.policies import resolve_policy

    cache = str(tmp_path / "cache")
    agent = resolve_policy("tiny", precision="bfloat16", max_new_tokens=4, cache_dir=cache)
    assert agent.policy.precision == "bfloat16"
    assert resolve_policy("tiny", cache_dir=cache).policy.precision == "float32"
    with pytest.raises(ValueError, match="precision"):
        resolve_policy("tiny", precision="fp16", cache_dir=cache)
    result = evaluate(agent, "Sokoban-Group-v0", episodes=2, max_steps=2, progress=False)
    assert len(result.episodes) == 2 and all(e.steps >= 1 for e in result.episodes)
