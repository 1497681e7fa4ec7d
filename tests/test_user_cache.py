"""Every cache of the library under one folder that ``$AGC_CACHE_DIR`` moves."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from agentgym_credit.user_cache import cache_root

# every default cache folder of the library, as its owner computes it, and where it sits under the root; the
# functions are taken when this file is collected, before any test runs (the WebShop tests' session fixture
# replaces search.default_cache_dir on their worker to keep indexes out of the user's cache)
DEFAULTS = [
    (module, getattr(importlib.import_module(module), function), parts)
    for module, function, parts in (
        ("agentgym_credit.baselines.models", "default_cache_dir", ()),
        ("agentgym_credit.envs.webshop.search", "default_cache_dir", ("webshop",)),
        ("agentgym_credit.envs.searchqa.retrieval", "default_cache_dir", ("searchqa",)),
        ("agentgym_credit.envs.alfworld.plans", "default_plan_dir", ("alfworld", "plans")),
        ("agentgym_credit.envs.appworld.engine", "world_cache_dir", ("appworld", "worlds")),
    )
]


def test_cache_root_reads_agc_cache_dir_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AGC_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_root() == tmp_path / "home" / ".cache" / "agentgym_credit"
    monkeypatch.setenv("XDG_CACHE_HOME", "")  # empty counts as unset
    assert cache_root() == tmp_path / "home" / ".cache" / "agentgym_credit"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "agentgym_credit"
    monkeypatch.setenv("AGC_CACHE_DIR", "~/scratch")
    assert cache_root() == tmp_path / "home" / "scratch"


@pytest.mark.parametrize(("module", "default", "parts"), DEFAULTS, ids=[m for m, _, _ in DEFAULTS])
def test_every_cache_moves_with_agc_cache_dir(monkeypatch, tmp_path, module, default, parts):
    monkeypatch.setenv("AGC_CACHE_DIR", str(tmp_path))
    assert default() == tmp_path.joinpath(*parts)
    monkeypatch.delenv("AGC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default() == tmp_path.joinpath("xdg", "agentgym_credit", *parts)


def test_appworld_environment_lives_in_the_cache_unless_configured(monkeypatch, tmp_path):
    from agentgym_credit.envs.appworld.engine import appworld_venv_dir

    monkeypatch.delenv("AGC_APPWORLD_VENV", raising=False)
    monkeypatch.setenv("AGC_CACHE_DIR", str(tmp_path))
    assert appworld_venv_dir().parent == tmp_path / "appworld"
    monkeypatch.setenv("AGC_APPWORLD_VENV", str(tmp_path / "elsewhere"))
    assert appworld_venv_dir() == tmp_path / "elsewhere"


def test_static_table_from_the_old_folder_is_moved_not_distilled_again(monkeypatch, tmp_path):
    static = pytest.importorskip("agentgym_credit.embedding.static")
    monkeypatch.delenv("AGC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(static, "_LEGACY_ROOT", tmp_path / "old")
    model = str(tmp_path / "all-MiniLM-L6-v2")
    path = static.static_cache_path(model, 16)
    assert path.parent == tmp_path / "xdg" / "agentgym_credit" / "static"
    assert static.cached_static_table(model, 16) is None
    legacy = tmp_path / "old" / "static" / path.name
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(b"table")
    monkeypatch.setattr(static, "distill_static_embeddings", lambda *a, **k: pytest.fail("distilled again"))
    assert static.prepare_static_table(model, 16) == path
    assert path.read_bytes() == b"table" and not legacy.exists()
    assert static.cached_static_table(model, 16) == path


def test_no_module_builds_its_own_cache_path():
    # the folder is named in one place: a second computation of it drifts (as the static table's had: its own
    # folder name, and WebShop's read XDG_CACHE_HOME where the others read AGC_CACHE_DIR)
    root = Path(__file__).resolve().parents[1]
    builds = re.compile(r'environ\.get\(\s*"(AGC_CACHE_DIR|XDG_CACHE_HOME)"|"\.cache"')
    offenders = {
        str(path.relative_to(root)): builds.findall(text)
        for folder in ("agentgym_credit", "baselines", "wrappers")
        for path in (root / folder).rglob("*.py")
        if path.name != "user_cache.py"
        # the static table's folder before the caches shared one (read once, to move a table out of it)
        and (text := path.read_text(encoding="utf-8").replace('_LEGACY_ROOT = Path.home() / ".cache" /', ""))
        and builds.search(text)
    }
    assert offenders == {}
