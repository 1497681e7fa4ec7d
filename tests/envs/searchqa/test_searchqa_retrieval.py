"""BM25, dense and hybrid retrieval: recall on generated questions, sharing, on-disk caching."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgym_credit.envs.searchqa.corpus import Corpus, load_corpus
from agentgym_credit.envs.searchqa.evaluation import evaluate_recall
from agentgym_credit.envs.searchqa.generate import (
    QuestionConfig,
    WorldConfig,
    generate_encyclopedia,
    generate_questions,
)
from agentgym_credit.envs.searchqa.retrieval import (
    MAX_CACHED_QUERY_CHARS,
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    get_retriever,
    resolve_retriever,
)

pytest.importorskip("faiss")
pytest.importorskip("sentence_transformers")

DATA = Path(__file__).parent / "data"
# a small world keeps the dense index quick to build on two cores (the shipped one takes about a minute)
WORLD = WorldConfig(countries=6, cities=40, people=150, organizations=48, works=80)
QUESTIONS = QuestionConfig(single=20, bridge=((2, 15), (3, 15), (4, 8)), comparison=16, test_fraction=0.5)
# recall@3 floors (measured on this world: all three retrievers are at or near 1.0 on entity queries)
FLOORS = {
    "bm25": {"entity_recall": 0.98, "question_recall": 0.95},
    "dense": {"entity_recall": 0.90, "question_recall": 0.80},
    "hybrid": {"entity_recall": 0.98, "question_recall": 0.95},
}


@pytest.fixture(scope="module", autouse=True)
def single_thread() -> Iterator[None]:
    """One torch/FAISS thread: on a busy two-core machine it encodes several times faster than two."""
    import faiss
    import torch

    before = torch.get_num_threads(), faiss.omp_get_max_threads()
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    yield
    torch.set_num_threads(before[0])
    faiss.omp_set_num_threads(before[1])


@pytest.fixture(scope="module")
def world_corpus() -> Corpus:
    return generate_encyclopedia(3, WORLD).corpus()


@pytest.fixture(scope="module")
def questions(world_corpus: Corpus):
    world = generate_encyclopedia(3, WORLD)
    split = generate_questions(world, 3, QUESTIONS)
    return split["train"] + split["test"]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("searchqa-index-cache"))


@pytest.fixture(scope="module")
def retrievers(world_corpus: Corpus, cache_dir: str) -> dict:
    """The three retrievers over the small world, built once and shared through the registry."""
    return {
        kind: get_retriever(
            kind, world_corpus, cache_dir=cache_dir, **({} if kind == "bm25" else {"show_progress": False})
        )
        for kind in ("bm25", "dense", "hybrid")
    }


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_recall_at_3_is_above_floor(kind: str, retrievers, questions, world_corpus, record_property) -> None:
    report = evaluate_recall(retrievers[kind], questions, world_corpus, k=3)
    record_property(f"{kind}_recall", report.as_dict())
    print(
        f"\n{kind}: entity recall@3 = {report.entity_recall:.3f}, question recall@3 = {report.question_recall:.3f}"
    )
    assert report.n_entity_queries > len(questions)
    assert report.entity_recall >= FLOORS[kind]["entity_recall"]
    assert report.question_recall >= FLOORS[kind]["question_recall"]


def test_registry_shares_one_retriever(retrievers, world_corpus: Corpus, cache_dir: str) -> None:
    assert get_retriever("bm25", world_corpus, cache_dir=cache_dir) is retrievers["bm25"]
    assert resolve_retriever("bm25", world_corpus, cache_dir=cache_dir) is retrievers["bm25"]
    hybrid = retrievers["hybrid"]
    assert isinstance(hybrid, HybridRetriever)
    assert hybrid.retrievers[0] is retrievers["bm25"] and hybrid.retrievers[1] is retrievers["dense"]
    assert resolve_retriever(hybrid) is hybrid
    assert get_retriever("bm25", world_corpus, cache_dir=cache_dir, k1=1.2) is not retrievers["bm25"]


def test_indexes_are_cached_on_disk(retrievers, world_corpus: Corpus, cache_dir: str, monkeypatch) -> None:
    files = {p.name for p in Path(cache_dir).iterdir()}
    key = world_corpus.fingerprint[:16]
    assert any(name.startswith("bm25-") and key in name for name in files)
    assert any(name.startswith("dense-") and key in name and name.endswith(".faiss") for name in files)

    def no_encoding(*args, **kwargs):
        raise AssertionError("the cached dense index should have been loaded, not rebuilt")

    monkeypatch.setattr(DenseRetriever, "_encode_corpus", no_encoding)
    reloaded = DenseRetriever(world_corpus, cache_dir=cache_dir)
    queries = [world_corpus[5].title, world_corpus[50].title]
    fresh = [[(h.id, h.score) for h in hits] for hits in reloaded.search(queries, 4)]
    assert fresh == [[(h.id, h.score) for h in hits] for hits in retrievers["dense"].search(queries, 4)]
    bm25 = BM25Retriever(world_corpus, cache_dir=cache_dir)
    assert [h.id for h in bm25.search(queries, 4)[0]] == [
        h.id for h in retrievers["bm25"].search(queries, 4)[0]
    ]


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_batched_equals_single_and_topk(kind: str, retrievers, world_corpus: Corpus) -> None:
    retriever = retrievers[kind]
    queries = [p.title for p in world_corpus[:12]]
    batched = retriever.search(queries, 5)
    singles = [retriever.search([q], 5)[0] for q in queries]
    assert [[h.id for h in hits] for hits in batched] == [[h.id for h in hits] for hits in singles]
    assert all(len(hits) == 5 for hits in batched)
    for hits in batched:
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
    assert retriever.search([], 3) == []
    with pytest.raises(ValueError, match="topk"):
        retriever.search(["x"], 0)
    with pytest.raises(TypeError):
        retriever.search("a single string", 3)  # type: ignore[arg-type]


def test_bm25_returns_only_matching_passages(retrievers) -> None:
    assert retrievers["bm25"].search(["zzzz qqqq", "the of and"], 3) == [[], []]


def test_dense_retriever_reads_a_prebuilt_faiss_index(tmp_path: Path) -> None:
    import faiss

    from agentgym_credit.embedding import encode_texts

    corpus = load_corpus(DATA / "corpus_sample.jsonl")
    index = faiss.IndexFlatIP(384)
    index.add(encode_texts([p.contents for p in corpus]))
    path = tmp_path / "sample_Flat.index"
    faiss.write_index(index, str(path))
    dense = DenseRetriever(corpus, index_path=path, use_cache=False)
    hits = dense.search(["which planet has rings of ice", "insect that makes honey"], 2)
    assert [h[0].passage.title for h in hits] == ['"Saturn"', '"Honey bee"']
    assert -1.0 <= hits[0][1].score <= hits[0][0].score <= 1.0


def test_query_cache_serves_repeated_queries(world_corpus: Corpus, cache_dir: str, monkeypatch) -> None:
    bm25 = BM25Retriever(world_corpus, cache_dir=cache_dir)
    calls: list[tuple[list[str], int]] = []
    search = bm25._search
    monkeypatch.setattr(
        bm25, "_search", lambda queries, k: calls.append((list(queries), k)) or search(queries, k)
    )
    a, b = world_corpus[1].title, world_corpus[2].title
    first = bm25.search([a, a, b], 3)
    assert calls == [([a, b], 3)] and first[0] == first[1]
    first[2].clear()  # callers get copies: the cache is not affected
    assert bm25.search([b], 3) == [search([b], 3)[0]] and len(calls) == 1
    bm25.search([b], 4)
    assert calls[-1] == ([b], 4)
    bm25.query_cache_size = 2
    bm25.search([world_corpus[3].title], 3)
    assert len(bm25._query_cache) == 2
    bm25.query_cache_size = 0
    bm25.search([a], 3)
    assert calls[-1] == ([a], 3)


def test_query_cache_keeps_no_long_query(world_corpus: Corpus, cache_dir: str) -> None:
    # an agent's 2 MB <search> texts are searched, never kept: the cache stays a few megabytes
    bm25 = BM25Retriever(world_corpus, cache_dir=cache_dir)
    title = world_corpus[1].title
    too_long = title + " " + "z" * MAX_CACHED_QUERY_CHARS
    assert bm25.search([too_long, too_long], 3)[0][0] == bm25.search([title], 3)[0][0]
    assert list(bm25._query_cache) == [(title, 3)]
    at_limit = too_long[:MAX_CACHED_QUERY_CHARS]
    bm25.search([at_limit], 3)
    assert (at_limit, 3) in bm25._query_cache
