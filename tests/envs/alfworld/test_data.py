"""Finding games: shipped set, ALFWORLD_DATA (strict), data_path, upstream's filter, real-layout data."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from agentgym_credit.envs.alfworld import data as data_module
from agentgym_credit.envs.alfworld.data import (
    SHIPPED_ARCHIVE,
    NoGamesFoundError,
    data_root,
    find_games,
    normalize_task_types,
    record_for,
    scan_games,
    shipped_games_root,
    task_type_of,
)
from agentgym_credit.envs.alfworld.env import WIN_REWARD, ALFWorldEnv
from agentgym_credit.envs.alfworld.generate import SHIPPED_SPLIT_SIZES
from agentgym_credit.envs.alfworld.stats import collect_stats


def test_default_is_the_shipped_set_sorted_with_task_types() -> None:
    records = find_games("train")
    assert [r.game_id for r in records] == sorted(r.game_id for r in records)
    assert all(r.game_file.is_relative_to(shipped_games_root()) for r in records)
    assert all(r.task_type == task_type_of(r.game_id.split("/")[0]) for r in records)
    assert {r.task_type for r in records} == set(normalize_task_types(range(1, 7)))
    assert data_root() is None
    # One extraction per machine, named after the archive's content.
    digest = hashlib.sha256(SHIPPED_ARCHIVE.read_bytes()).hexdigest()[:16]
    assert shipped_games_root().parent.name == f"agc-alfworld-games-{digest}"


def test_shipped_set_under_alfworld_data_loads_through_the_same_path(
    _isolated_alfworld_data: Path, shipped_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALFWORLD_DATA", str(_isolated_alfworld_data))
    root = _isolated_alfworld_data / "json_2.1.1"
    root.symlink_to(shipped_root, target_is_directory=True)
    assert data_root() == root
    records = find_games("valid_seen")
    assert all(r.game_file.is_relative_to(root) for r in records)
    assert [r.game_id for r in records] == [
        r.game_id for r in scan_games(shipped_games_root() / "valid_seen")
    ]

    env = ALFWorldEnv(split="valid_seen")
    obs, info = env.reset(seed=0)
    assert info["gamefile"].startswith(str(root))
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
    env.close()


@pytest.mark.parametrize("suffix", ["", "json_2.1.1", "json_2.1.1/valid_unseen"])
def test_data_path_forms(shipped_root: Path, suffix: str) -> None:
    base = shipped_root.parent / suffix if suffix else shipped_root.parent
    records = find_games("valid_unseen", data_path=base)
    assert [r.game_id for r in records] == [r.game_id for r in scan_games(shipped_root / "valid_unseen")]


def test_upstream_filter_and_task_type_filter(shipped_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "json_2.1.1" / "train"
    shutil.copytree(shipped_root / "valid_unseen", root)
    games = scan_games(root)
    assert len(games) == SHIPPED_SPLIT_SIZES["valid_unseen"]

    unsolvable = games[0].game_file
    data = json.loads(unsolvable.read_text())
    data["solvable"] = False
    unsolvable.write_text(json.dumps(data))
    games[1].game_file.unlink()
    del data["solvable"]
    games[2].game_file.write_text(json.dumps(data))
    moved = games[3].game_file.parent
    shutil.copytree(moved.parent, root / (moved.parent.name + "-movable"))

    kept = {r.game_id for r in scan_games(root)}
    assert kept == {r.game_id for r in games[3:]}
    assert {r.task_type for r in scan_games(root, ["look_at_obj_in_light", 1])} <= {
        "look_at_obj_in_light",
        "pick_and_place_simple",
    }
    assert all(
        r.task_type == "pick_two_obj_and_place" for r in find_games(data_path=tmp_path, task_types=[6])
    )


def test_errors_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown split"):
        find_games("test")
    with pytest.raises(ValueError, match="unknown task type"):
        normalize_task_types(["juggle"])
    with pytest.raises(ValueError, match="did you mean 'look_at_obj_in_light'"):
        normalize_task_types(["look_at_obj_in_lite"])
    # ids as a command line gives them (agc run --task-types 1 2)
    assert normalize_task_types(["1", "2"]) == ("pick_and_place_simple", "look_at_obj_in_light")
    with pytest.raises(NoGamesFoundError, match="agc alfworld generate"):
        find_games(data_path=tmp_path)
    with pytest.raises(NoGamesFoundError):
        find_games(data_path=tmp_path / "missing")
    (tmp_path / "valid_seen").mkdir()
    with pytest.raises(NoGamesFoundError, match="no 'train' folder"):
        find_games("train", data_path=tmp_path)


def test_record_for_file_or_trial_folder(shipped_root: Path) -> None:
    record = scan_games(shipped_root / "train")[0]
    assert record_for(record.game_file) == record == record_for(record.game_file.parent)
    assert record.traj_data_file.is_file()


def test_alfworld_data_that_is_missing_or_empty_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "missing"))
    with pytest.raises(NoGamesFoundError, match="does not exist"):
        find_games("train")
    with pytest.raises(NoGamesFoundError, match="does not exist"):
        ALFWorldEnv()
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("ALFWORLD_DATA", str(empty))
    with pytest.raises(NoGamesFoundError, match="holds no json_2.1.1"):
        find_games("valid_seen")
    (empty / "json_2.1.1" / "valid_seen").mkdir(parents=True)
    with pytest.raises(NoGamesFoundError, match="no playable ALFWorld game"):
        find_games("valid_seen")
    # alfworld's own default folder, which importing alfworld creates empty, means "not set".
    default = tmp_path / "cache" / "alfworld"
    default.mkdir(parents=True)
    monkeypatch.setattr(data_module, "ALFWORLD_DEFAULT_CACHE", default)
    monkeypatch.setenv("ALFWORLD_DATA", str(default))
    assert data_root() is None
    assert all(r.game_file.is_relative_to(shipped_games_root()) for r in find_games("valid_unseen"))


_REAL_TRIAL = "trial_T20190907_212755_456877"


def _real_layout_sample(shipped_root: Path, dest: Path) -> tuple[Path, str]:
    """ALFWorld data as ``alfworld-download`` lays it out, built from a shipped game.

    What differs from the library's own output, as in the real data: ALFRED trial names; ALFRED's
    ``traj_data.json`` (human ``turk_annotations``, scene metadata, a low-level ``plan``; no
    ``split`` or ``generation``); an ``initial_state.pddl`` beside the game; an instruction written by
    a person in the grammar; folders of movable-receptacle and sliced-object tasks, which upstream
    skips; an unsolvable game; a folder holding only ``traj_data.json``.
    """
    record = next(
        r for r in scan_games(shipped_root / "valid_seen") if r.task_type == "pick_and_place_simple"
    )
    ours = json.loads(record.traj_data_file.read_text())
    game = json.loads(record.game_file.read_text())
    templated = game["grammar"].split("Your task is to: ", 1)[1].split('"', 1)[0].split("\n", 1)[0]
    human = "Pick up the item and set it down in its place."
    game["grammar"] = game["grammar"].replace(templated, human)
    traj = {
        "images": [],
        "pddl_params": ours["pddl_params"],
        "plan": {"high_pddl": [], "low_actions": []},
        "scene": {
            "dirty_and_empty": False,
            "floor_plan": ours["scene"]["floor_plan"],
            "init_action": {
                "action": "TeleportFull",
                "horizon": 30,
                "rotation": 90,
                "x": 0.0,
                "y": 0.9,
                "z": 0.0,
            },
            "object_poses": [],
            "object_toggles": [],
            "random_seed": 1234567,
            "scene_num": ours["scene"]["scene_num"],
        },
        "task_id": _REAL_TRIAL,
        "task_type": ours["task_type"],
        "turk_annotations": {
            "anns": [{"assignment_id": "A1", "high_descs": ["Go."], "task_desc": human, "votes": [1, 1]}]
        },
    }
    root = dest / "json_2.1.1" / "valid_seen"
    task_folder = record.game_id.split("/")[0]
    trial = root / task_folder / _REAL_TRIAL
    trial.mkdir(parents=True)
    (trial / "traj_data.json").write_text(json.dumps(traj))
    (trial / "game.tw-pddl").write_text(json.dumps(game))
    (trial / "initial_state.pddl").write_text(game["pddl_problem"])
    for folder, solvable in (
        ("pick_and_place_with_movable_recep-Apple-Bowl-Fridge-7", True),
        ("pick_and_place_simple-AppleSliced-None-Fridge-7", True),
        ("pick_and_place_simple-Egg-None-Fridge-7", False),
    ):
        other = root / folder / "trial_T20190909_000000_000001"
        other.mkdir(parents=True)
        (other / "traj_data.json").write_text(json.dumps({**traj, "task_type": folder.split("-")[0]}))
        (other / "game.tw-pddl").write_text(json.dumps({**game, "solvable": solvable}))
    only_traj = root / "pick_cool_then_place_in_recep-Apple-None-Fridge-7" / "trial_T20190909_000000_000002"
    only_traj.mkdir(parents=True)
    (only_traj / "traj_data.json").write_text(json.dumps(traj))
    return root, human


def test_loader_reads_real_layout_alfworld_data(
    shipped_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    split_folder, human = _real_layout_sample(shipped_root, tmp_path)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    records = find_games("valid_seen")
    assert [r.game_id.split("/")[1] for r in records] == [_REAL_TRIAL]
    assert records[0].task_type == "pick_and_place_simple"

    env = ALFWorldEnv(split="valid_seen")
    obs, info = env.reset(seed=0)
    assert info["task"] == human and obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert info["walkthrough"][0] == "look"
    for command in info["walkthrough"]:
        obs, reward, terminated, _, info = env.step(command)
    assert terminated and reward == WIN_REWARD
    env.close()

    stats = collect_stats(tmp_path)["valid_seen"]  # no ``generation`` record: the source is inferred
    assert stats.games == 1 and stats.walkthrough_sources == {"handcoded_expert": 1}
    assert not stats.templates  # a human instruction matches no template
