"""bm25s is imported without letting JAX take the GPU (agentgym_credit.envs.bm25)."""

from __future__ import annotations

import sys

import pytest

from agentgym_credit.envs.bm25 import import_bm25s

FAKE_JAX = "import builtins\nbuiltins._fake_jax_imports = getattr(builtins, '_fake_jax_imports', 0) + 1\n"
FAKE_LAX = "def top_k(x, k):\n    return x[:k], list(range(k))\n"


@pytest.fixture
def fake_jax(tmp_path, monkeypatch):
    """An installed `jax` whose import is counted, and a process where bm25s and jax are not imported yet."""
    import builtins

    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text(FAKE_JAX)
    (tmp_path / "jax" / "lax.py").write_text(FAKE_LAX)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "bm25s" or m.startswith(("bm25s.", "jax"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(builtins, "_fake_jax_imports", 0, raising=False)
    return builtins


def test_bm25s_is_imported_with_jax_hidden(fake_jax):
    bm25s = import_bm25s()
    assert fake_jax._fake_jax_imports == 0, "bm25s imported JAX"
    assert bm25s.selection.JAX_IS_AVAILABLE is False
    assert "jax" not in sys.modules and "jax.lax" not in sys.modules  # the process can still import it
    import jax  # noqa: F401  (the fake one: JAX itself stays importable afterwards)

    assert fake_jax._fake_jax_imports == 1


def test_a_process_that_imported_jax_keeps_it(fake_jax):
    import jax  # noqa: F401

    bm25s = import_bm25s()
    assert bm25s.selection.JAX_IS_AVAILABLE is True and fake_jax._fake_jax_imports == 1


def test_retrieval_still_ranks_with_numpy_selection(fake_jax):
    from agentgym_credit.envs.searchqa.retrieval import tokenize

    bm25s = import_bm25s()
    index = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    index.index(tokenize(["paris is the capital of france", "berlin is in germany", "rome italy"]),
                show_progress=False)
    rows, _ = index.retrieve(tokenize(["capital of france"]), k=1, show_progress=False, backend_selection="numpy")
    assert rows.tolist() == [[0]]
