"""BM25 search: tokenization, ranking, the top-50 cut, the on-disk and in-process caches."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym_credit.envs.webshop import search as search_module
from agentgym_credit.envs.webshop.catalog import Catalog
from agentgym_credit.envs.webshop.env import WebShopEnv
from agentgym_credit.envs.webshop.generate import build_catalog
from agentgym_credit.envs.webshop.search import (
    MAX_CACHED_QUERY_CHARS,
    SEARCH_TOP_K,
    SearchIndex,
    default_cache_dir,
    get_search_index,
    tokenize,
)


def test_tokenize_as_lucenes_english_analyzer() -> None:
    # stopwords are Lucene's 33 ("i", "need" are not among them); Porter stems; punctuation cuts words
    assert tokenize("I need Dark-Chocolate BARS, with 12 berries & brushes!") == [
        "i", "need", "dark", "chocol", "bar", "12", "berri", "brush",
    ]  # fmt: skip
    assert tokenize("The Men's Running Shoes, 3.5 oz, 1,000 pcs") == [
        "men",
        "run",
        "shoe",
        "3.5",
        "oz",
        "1,000",
        "pc",
    ]
    assert tokenize("glass class") == ["glass", "class"]
    assert tokenize("’s , .") == ["s"] and tokenize("us xs") == ["us", "xs"]  # 1-2 letters: not stemmed


def test_document_text_is_title_description_first_bullet_and_options(catalog: Catalog) -> None:
    product = next(p for p in catalog.products if len(p.options) >= 2 and len(p.bullet_points) >= 2)
    text = search_module.document_text(product)
    assert text.startswith(f"{product.name} {product.description} {product.bullet_points[0]} ".lower())
    assert product.bullet_points[1].lower() not in text
    first, second = list(product.options.items())[:2]
    assert f"{first[0]}: {', '.join(first[1])}, and {second[0]}: ".lower() in text
    assert product.product_category.lower() not in text


def test_search_returns_at_most_50_matching_products(catalog: Catalog) -> None:
    index = get_search_index(catalog)
    results = index.search("dark chocolate bar")
    assert len(results) == SEARCH_TOP_K
    top = catalog.product(results[0])
    assert top.query == "dark chocolate bar"
    assert index.search("dark chocolate bar") is results  # cached
    assert index.search("qqqzzzxxx") == ()
    few = index.search("hdmi")
    assert 0 < len(few) < SEARCH_TOP_K  # only products that contain the word
    assert all(
        "hdmi" in catalog.product(a).name.lower() + catalog.product(a).description.lower() for a in few
    )


def test_long_queries_are_searched_but_not_cached(catalog: Catalog) -> None:
    # the cache is process-wide: an agent writing 4,096 long search[...] texts must not fill memory with them
    index = get_search_index(catalog)
    too_long = "dark chocolate bar " + "x" * MAX_CACHED_QUERY_CHARS
    assert index.search(too_long) == index.search("dark chocolate bar")  # the unknown word adds nothing
    assert index.search(too_long) is not index.search(too_long)  # searched each time
    assert max(map(len, index._cache)) <= len(f"{SEARCH_TOP_K}\x00") + MAX_CACHED_QUERY_CHARS
    at_limit = too_long[:MAX_CACHED_QUERY_CHARS]
    assert index.search(at_limit) is index.search(at_limit)  # at the limit: kept


def test_product_name_finds_the_product(catalog: Catalog) -> None:
    index = get_search_index(catalog)
    goals = catalog.goals[:100]
    hits = sum(index.search(g.name)[0] == g.asin for g in goals)
    assert hits >= 95
    assert all(g.asin in index.search(g.query) for g in goals)


def test_index_is_saved_and_reloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = build_catalog(120, seed=11)
    built = get_search_index(cat, cache_dir=tmp_path)
    folder = tmp_path / cat.fingerprint[:16]
    assert (folder / "webshop_index.json").is_file()
    assert get_search_index(cat, cache_dir=tmp_path) is built  # shared in-process
    monkeypatch.setattr(search_module, "_INDEXES", {})

    def no_build(cls, catalog):  # noqa: ANN001, ANN202
        raise AssertionError("the saved index should have been loaded")

    monkeypatch.setattr(SearchIndex, "build", classmethod(no_build))
    loaded = get_search_index(cat, cache_dir=tmp_path)
    assert loaded is not built
    for goal in cat.goals[:20]:
        assert loaded.search(goal.query) == built.search(goal.query)


def test_stale_saved_index_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = build_catalog(60, seed=12)
    get_search_index(cat, cache_dir=tmp_path)
    other = build_catalog(60, seed=13)
    with pytest.raises(ValueError, match="another catalog"):
        SearchIndex.load(tmp_path / cat.fingerprint[:16], other)
    monkeypatch.setattr(search_module, "_INDEXES", {})
    meta = tmp_path / cat.fingerprint[:16] / "webshop_index.json"
    meta.write_text('{"fingerprint": "stale"}')
    index = get_search_index(cat, cache_dir=tmp_path)
    assert index.search(cat.goals[0].query)
    assert '"stale"' not in meta.read_text()


def test_unwritable_cache_only_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = build_catalog(40, seed=14)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.warns(RuntimeWarning, match="could not cache"):
        index = get_search_index(cat, cache_dir=blocker / "sub")
    assert index.search(cat.goals[0].query)


def test_envs_share_one_index() -> None:
    assert WebShopEnv().search_index is WebShopEnv(split="test").search_index


def test_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "agentgym_credit" / "webshop"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "agentgym_credit" / "webshop"
