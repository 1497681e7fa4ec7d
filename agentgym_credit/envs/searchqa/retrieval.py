"""Retrievers over a passage corpus: BM25, dense (sentence embeddings + FAISS), their fusion, and a remote one.

Every retriever implements one batched call, :meth:`Retriever.search`
(``queries: list[str], topk: int -> list[list[Hit]]``), so the environment, the HTTP server and user
code treat them alike.

* :class:`BM25Retriever`: Okapi BM25 (``bm25s``, Lucene variant, :math:`k_1 = 1.5`, :math:`b = 0.75`)
  over lowercased word tokens (two or more characters, English stopwords removed). Passages that share
  no term with the query are not returned. The top-k selection is bm25s's numpy one: bm25s imports JAX
  where it is installed and runs a top-k on JAX's default device at import, which on a GPU machine
  preallocates most of the GPU's memory in every process that builds the environment, so bm25s is
  imported through :func:`agentgym_credit.envs.bm25.import_bm25s`.
* :class:`DenseRetriever`: cosine similarity between L2-normalized sentence embeddings
  (:mod:`agentgym_credit.embedding`, offline MiniLM by default) in an exact FAISS ``IndexFlatIP``; a
  prebuilt index (e.g. Search-R1's ``e5_Flat.index``) can be given instead.
* :class:`HybridRetriever`: reciprocal rank fusion (Cormack et al., 2009) of several retrievers,

  .. math:: s(d) = \\sum_i \\frac{w_i}{k + r_i(d)}

  with :math:`r_i(d)` the 1-based rank of passage :math:`d` in retriever :math:`i`'s top-``depth`` list
  (absent passages contribute 0), :math:`k = 60` and weights :math:`w_i = 1`. RRF needs no score
  calibration between BM25 and cosine scores.
* :class:`RemoteRetriever`: the client of a Search-R1-compatible ``/retrieve`` endpoint (e.g.
  :class:`~agentgym_credit.envs.searchqa.server.RetrievalServer`, or Search-R1's E5 server over Wikipedia);
  an endpoint that cannot be reached raises :class:`RetrieverUnavailableError`.

Indexes are built once per corpus and cached on disk under ``cache_dir`` (default
``~/.cache/agentgym_credit/searchqa``), keyed by the corpus fingerprint (SHA-256 of ids and contents)
and, for dense indexes, the model. :func:`get_retriever` keeps one retriever per (kind, corpus, options)
for the whole process, so every member of a vector env shares one index in memory.

Contents: :class:`Hit`, :class:`Retriever`, :class:`BM25Retriever`, :class:`DenseRetriever`,
:class:`HybridRetriever`, :class:`RemoteRetriever`, :class:`RetrieverUnavailableError`, :func:`tokenize`, :func:`get_retriever`, :func:`resolve_retriever`,
:func:`clear_retrievers`, :data:`RETRIEVER_KINDS`, :func:`default_cache_dir`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentgym_credit.envs.bm25 import import_bm25s
from agentgym_credit.envs.searchqa.corpus import Corpus, Passage, load_corpus, load_faiss_index
from agentgym_credit.errors import AgentGymCreditError
from agentgym_credit.user_cache import cache_root

__all__ = [
    "MAX_CACHED_QUERY_CHARS",
    "RETRIEVER_KINDS",
    "BM25Retriever",
    "DenseRetriever",
    "Hit",
    "HybridRetriever",
    "RemoteRetriever",
    "Retriever",
    "RetrieverUnavailableError",
    "clear_retrievers",
    "default_cache_dir",
    "get_retriever",
    "resolve_retriever",
    "tokenize",
]

RETRIEVER_KINDS = ("bm25", "dense", "hybrid")
#: Longest query (in characters) a retriever's query cache keeps: a longer one is searched every time, so
#: 4,096 cached queries take a few megabytes however long the agent's queries are (Search-R1's are a few words).
MAX_CACHED_QUERY_CHARS = 1024
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def default_cache_dir() -> Path:
    """Where built indexes are kept: ``searchqa`` in the library's user cache
    (:func:`~agentgym_credit.user_cache.cache_root`, by default ``~/.cache/agentgym_credit``)."""
    return cache_root() / "searchqa"


@dataclass(frozen=True)
class Hit:
    """One retrieved passage and its score (higher is better; the scale depends on the retriever)."""

    passage: Passage
    score: float

    @property
    def id(self) -> str:
        """The passage id."""
        return self.passage.id

    def to_search_r1(self) -> dict[str, Any]:
        """The hit as Search-R1's retrieval server returns it: ``{"document": {...}, "score": s}``."""
        return {"document": self.passage.to_json(), "score": float(self.score)}


class Retriever(ABC):
    """The common interface: batched top-k search over one corpus.

    Results are deterministic, so each retriever keeps an LRU cache of the last ``query_cache_size``
    ``(query, topk)`` results (the members of a group often issue the same query) and searches each
    distinct query of a batch once; set ``query_cache_size`` to 0 to disable it. Queries longer than
    :data:`MAX_CACHED_QUERY_CHARS` are searched but not kept, so the cache holds at most a few megabytes
    whatever the agent writes. Subclasses implement :meth:`_search` and call ``super().__init__()``.

    Args:
        query_cache_size: how many ``(query, topk)`` results to keep.
    """

    name: str = "retriever"

    def __init__(self, *, query_cache_size: int = 4096) -> None:
        self.query_cache_size = int(query_cache_size)
        self._query_cache: OrderedDict[tuple[str, int], tuple[Hit, ...]] = OrderedDict()
        self._query_cache_lock = threading.Lock()

    def search(self, queries: Sequence[str], topk: int) -> list[list[Hit]]:
        """Retrieve the ``topk`` best passages for every query.

        Args:
            queries: the query strings (one result list per query, in order).
            topk: how many passages per query (fewer where the corpus is smaller or nothing matches).

        Returns:
            One ranked list of :class:`Hit` per query.
        """
        if isinstance(queries, str):
            raise TypeError("queries must be a list of strings, not a single string")
        topk = int(topk)
        if topk < 1:
            raise ValueError(f"topk must be at least 1, got {topk}")
        queries = [str(q) for q in queries]
        if not queries:
            return []
        if self.query_cache_size <= 0:
            return self._search(queries, topk)
        cache, lock = self._query_cache, self._query_cache_lock
        with lock:
            found = {
                q: cache[(q, topk)]
                for q in dict.fromkeys(queries)
                if len(q) <= MAX_CACHED_QUERY_CHARS and (q, topk) in cache
            }
            for q in found:
                cache.move_to_end((q, topk))
        missing = [q for q in dict.fromkeys(queries) if q not in found]
        if missing:
            fresh = {q: tuple(hits) for q, hits in zip(missing, self._search(missing, topk), strict=True)}
            found.update(fresh)
            with lock:
                for q, hits in fresh.items():
                    if len(q) <= MAX_CACHED_QUERY_CHARS:
                        cache[(q, topk)] = hits
                while len(cache) > self.query_cache_size:
                    cache.popitem(last=False)
        return [list(found[q]) for q in queries]

    def clear_query_cache(self) -> None:
        """Forget the cached query results."""
        with self._query_cache_lock:
            self._query_cache.clear()

    @abstractmethod
    def _search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """Search a non-empty batch with ``topk >= 1``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Lowercased word tokens of two or more characters, without English stopwords (BM25 terms)."""
    stop = frozenset(import_bm25s().stopwords.STOPWORDS_EN)
    return [[t for t in _TOKEN.findall(text.lower()) if t not in stop] for text in texts]


def _cache_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    return root


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[-60:] or "model"


class BM25Retriever(Retriever):
    """Okapi BM25 over a corpus (``bm25s``), index cached on disk.

    Args:
        corpus: the passages.
        k1: term-frequency saturation :math:`k_1`.
        b: length normalization :math:`b`.
        cache_dir: where the index is cached (default :func:`default_cache_dir`).
        use_cache: read and write the on-disk cache.
        query_cache_size: results kept in the in-memory query cache (0 disables it).
    """

    name = "bm25"

    def __init__(
        self,
        corpus: Corpus,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        cache_dir: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        query_cache_size: int = 4096,
    ) -> None:
        bm25s = import_bm25s()
        super().__init__(query_cache_size=query_cache_size)
        self.corpus = corpus
        self.k1, self.b = float(k1), float(b)
        path = (
            _cache_root(cache_dir) / f"bm25-{corpus.fingerprint[:16]}-k{self.k1:g}-b{self.b:g}"
            if use_cache
            else None
        )
        if path is not None and (path / "params.index.json").is_file():
            self._bm25 = bm25s.BM25.load(str(path), show_progress=False)
            return
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        self._bm25.index(tokenize([p.contents for p in corpus]), show_progress=False)
        if path is not None:
            tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=".tmp-bm25-"))
            self._bm25.save(str(tmp), show_progress=False)
            try:
                os.replace(tmp, path)
            except OSError:  # another process cached it first
                shutil.rmtree(tmp, ignore_errors=True)

    def _search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        k = min(topk, len(self.corpus))
        rows, scores = self._bm25.retrieve(tokenize(queries), k=k, show_progress=False, n_threads=1,
                                           backend_selection="numpy")
        out = []
        for row, score in zip(rows, scores, strict=True):
            ranked = sorted((-float(s), int(r)) for r, s in zip(row, score, strict=True) if s > 0)
            out.append([Hit(self.corpus[r], -s) for s, r in ranked])
        return out

    def __repr__(self) -> str:
        return f"BM25Retriever(corpus={self.corpus!r}, k1={self.k1:g}, b={self.b:g})"


class DenseRetriever(Retriever):
    """Exact inner-product search over normalized sentence embeddings (cosine similarity).

    Args:
        corpus: the passages; row ``i`` of the index is ``corpus[i]``.
        model: a sentence-transformers model name or path, a loaded model, or ``None`` for the offline
            default of :mod:`agentgym_credit.embedding`.
        index_path: a prebuilt FAISS index over ``corpus`` (same order); when given nothing is encoded
            except queries.
        query_prefix: text put before every query (``"query: "`` for E5 models).
        passage_prefix: text put before every passage when building the index (``"passage: "`` for E5).
        model_id: the cache key of a loaded ``model`` object (a loaded model without one is not cached).
        batch_size: encoder batch size.
        cache_dir: where built indexes are cached (default :func:`default_cache_dir`).
        use_cache: read and write the on-disk cache.
        show_progress: show a progress bar while encoding the corpus.
        query_cache_size: results kept in the in-memory query cache (0 disables it).
    """

    name = "dense"

    def __init__(
        self,
        corpus: Corpus,
        *,
        model: Any | str | None = None,
        index_path: str | os.PathLike[str] | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
        model_id: str | None = None,
        batch_size: int = 64,
        cache_dir: str | os.PathLike[str] | None = None,
        use_cache: bool = True,
        show_progress: bool = True,
        query_cache_size: int = 4096,
    ) -> None:
        import faiss

        from agentgym_credit.embedding import DEFAULT_MODEL, load_sentence_model

        super().__init__(query_cache_size=query_cache_size)
        self.corpus = corpus
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.batch_size = int(batch_size)
        self.model = load_sentence_model(model) if model is None or isinstance(model, str) else model
        if index_path is not None:
            self.index = load_faiss_index(index_path, expected_size=len(corpus))
            return
        if model_id is not None:
            key: str | None = model_id
        elif model is None or isinstance(model, str):
            key = model or DEFAULT_MODEL
        else:
            key = None
        path = None
        if use_cache and key is not None:
            name = f"dense-{_slug(str(key))}-{_slug(passage_prefix)}-{corpus.fingerprint[:16]}.faiss"
            path = _cache_root(cache_dir) / name
        if path is not None and path.is_file():
            self.index = load_faiss_index(path, expected_size=len(corpus))
            return
        embeddings = self._encode_corpus(show_progress)
        self.index = faiss.IndexFlatIP(embeddings.shape[1])
        self.index.add(embeddings)
        if path is not None:
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-dense-")
            os.close(fd)
            faiss.write_index(self.index, tmp)
            os.replace(tmp, path)

    def _encode_corpus(self, show_progress: bool) -> np.ndarray:
        from tqdm.auto import tqdm

        from agentgym_credit.embedding import encode_texts

        texts = [self.passage_prefix + p.contents for p in self.corpus]
        chunk = max(self.batch_size * 8, 1)
        parts = []
        for start in tqdm(
            range(0, len(texts), chunk),
            desc=f"embedding {self.corpus.name}",
            unit="chunk",
            disable=not show_progress,
        ):
            parts.append(encode_texts(texts[start : start + chunk], self.model, batch_size=self.batch_size))
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)

    def _search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        from agentgym_credit.embedding import encode_texts

        vectors = encode_texts(
            [self.query_prefix + q for q in queries], self.model, batch_size=self.batch_size
        )
        scores, rows = self.index.search(vectors, min(topk, len(self.corpus)))
        return [
            [Hit(self.corpus[int(r)], float(s)) for r, s in zip(row, score, strict=True) if r >= 0]
            for row, score in zip(rows, scores, strict=True)
        ]

    def __repr__(self) -> str:
        return f"DenseRetriever(corpus={self.corpus!r}, dim={self.index.d})"


class HybridRetriever(Retriever):
    """Reciprocal rank fusion of several retrievers over the same corpus.

    Args:
        retrievers: the retrievers to fuse (typically a :class:`BM25Retriever` and a
            :class:`DenseRetriever`).
        weights: :math:`w_i` per retriever (default 1 each).
        rrf_k: the RRF constant :math:`k`.
        depth: how many results of each retriever take part in the fusion (at least ``topk``).
        query_cache_size: fused results kept in the in-memory query cache (0 disables it).
    """

    name = "hybrid"

    def __init__(
        self,
        retrievers: Sequence[Retriever],
        *,
        weights: Sequence[float] | None = None,
        rrf_k: float = 60.0,
        depth: int = 50,
        query_cache_size: int = 4096,
    ) -> None:
        super().__init__(query_cache_size=query_cache_size)
        if not retrievers:
            raise ValueError("HybridRetriever needs at least one retriever")
        self.retrievers = list(retrievers)
        self.weights = [1.0] * len(self.retrievers) if weights is None else [float(w) for w in weights]
        if len(self.weights) != len(self.retrievers):
            raise ValueError(f"got {len(self.weights)} weights for {len(self.retrievers)} retrievers")
        self.rrf_k, self.depth = float(rrf_k), int(depth)

    def _search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        depth = max(topk, self.depth)
        results = [r.search(queries, depth) for r in self.retrievers]
        fused: list[list[Hit]] = []
        for qi in range(len(queries)):
            score: dict[str, float] = {}
            passages: dict[str, Passage] = {}
            for weight, result in zip(self.weights, results, strict=True):
                for rank, hit in enumerate(result[qi], 1):
                    passages.setdefault(hit.id, hit.passage)
                    score[hit.id] = score.get(hit.id, 0.0) + weight / (self.rrf_k + rank)
            order = list(passages)  # first-seen order breaks ties deterministically
            best = sorted(range(len(order)), key=lambda i: (-score[order[i]], i))[:topk]
            fused.append([Hit(passages[order[i]], score[order[i]]) for i in best])
        return fused

    def __repr__(self) -> str:
        return f"HybridRetriever({self.retrievers!r}, rrf_k={self.rrf_k:g}, depth={self.depth})"


# --------------------------------------------------------------------------------------------- registry
_REGISTRY: dict[tuple[Any, ...], Retriever] = {}
_REGISTRY_LOCK = threading.RLock()


class RetrieverUnavailableError(AgentGymCreditError, ConnectionError):
    """A retrieval server cannot be reached or answered with an error."""


class RemoteRetriever(Retriever):
    """A :class:`Retriever` that calls a Search-R1-compatible ``/retrieve`` endpoint.

    Args:
        url: the endpoint, e.g. ``"http://127.0.0.1:8000/retrieve"`` (a bare ``http://host:port`` gets
            ``/retrieve`` appended).
        timeout: seconds to wait for one request.
        retries: further attempts after a connection failure.
        backoff: seconds before the first retry (doubled for each next one).
        query_cache_size: results kept in the in-memory query cache (0 disables it; do so when the
            server's corpus can change while the client runs).

    Hits keep the server's ``score``; documents without one (``return_scores`` unsupported) score 0.0.
    """

    name = "remote"

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        query_cache_size: int = 4096,
    ) -> None:
        super().__init__(query_cache_size=query_cache_size)
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the retriever URL must look like http://host:port/retrieve, got {url!r}")
        if parts.path in ("", "/"):
            parts = parts._replace(path="/retrieve")
        self.url = urllib.parse.urlunsplit(parts)
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)

    def _post(self, payload: dict[str, Any]) -> Any:
        body = json.dumps(payload).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:500]
                raise RetrieverUnavailableError(
                    f"the retrieval server at {self.url} answered HTTP {exc.code}: {detail}"
                ) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                if attempt == self.retries:
                    reason = getattr(exc, "reason", exc)
                    raise RetrieverUnavailableError(
                        f"cannot reach the retrieval server at {self.url} ({reason}); start one with "
                        "`python -m agentgym_credit.envs.searchqa.server --port PORT` or fix the URL"
                    ) from None
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        response = self._post({"queries": queries, "topk": topk, "return_scores": True})
        result = response.get("result") if isinstance(response, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            raise RetrieverUnavailableError(
                f"the retrieval server at {self.url} did not answer {{'result': [...]}} with one list per query"
            )
        return [[_hit(item) for item in items] for items in result]

    def __repr__(self) -> str:
        return f"RemoteRetriever({self.url!r})"


def _hit(item: Any) -> Hit:
    if isinstance(item, dict) and isinstance(item.get("document"), dict):
        document, score = item["document"], float(item.get("score", 0.0))
    elif isinstance(item, dict):
        document, score = item, 0.0
    else:
        raise RetrieverUnavailableError(f"the retrieval server returned a malformed document: {item!r:.200}")
    if "contents" in document:
        passage = Passage.from_contents(str(document.get("id", "")), str(document["contents"]))
    else:
        passage = Passage(
            str(document.get("id", "")), str(document.get("title", "")), str(document.get("text", ""))
        )
    return Hit(passage, score)


def _as_corpus(corpus: Corpus | str | os.PathLike[str] | None) -> Corpus:
    return corpus if isinstance(corpus, Corpus) else load_corpus(corpus)


def _option_key(options: dict[str, Any]) -> tuple[Any, ...]:
    items = []
    for name, value in sorted(options.items()):
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        try:
            hash(value)
        except TypeError:
            value = ("id", id(value))
        items.append((name, value))
    return tuple(items)


def get_retriever(
    kind: str, corpus: Corpus | str | os.PathLike[str] | None = None, **options: Any
) -> Retriever:
    """The process-wide retriever of ``kind`` over ``corpus`` (built on first use, then shared).

    Args:
        kind: ``"bm25"``, ``"dense"`` or ``"hybrid"``.
        corpus: a :class:`Corpus`, a JSONL corpus path, or ``None`` for the shipped corpus.
        **options: constructor options. ``hybrid`` takes ``rrf_k``, ``depth`` and ``weights``; every other
            option of a hybrid (``cache_dir``, ``model``…) goes to its dense part and ``cache_dir`` to both
            parts, which are themselves shared through this registry.

    Returns:
        The shared retriever: the same object for the same kind, corpus content and options.
    """
    if kind not in RETRIEVER_KINDS:
        raise ValueError(f"unknown retriever kind {kind!r}; choose one of {RETRIEVER_KINDS}")
    corpus = _as_corpus(corpus)
    key = (kind, corpus.fingerprint, _option_key(options))
    with _REGISTRY_LOCK:
        if key in _REGISTRY:
            return _REGISTRY[key]
        if kind == "bm25":
            retriever: Retriever = BM25Retriever(corpus, **options)
        elif kind == "dense":
            retriever = DenseRetriever(corpus, **options)
        else:
            fusion = {k: options.pop(k) for k in ("rrf_k", "depth", "weights") if k in options}
            sparse_options = {k: v for k, v in options.items() if k in ("cache_dir", "use_cache")}
            retriever = HybridRetriever(
                [get_retriever("bm25", corpus, **sparse_options), get_retriever("dense", corpus, **options)],
                **fusion,
            )
        _REGISTRY[key] = retriever
        return retriever


def resolve_retriever(
    spec: str | Retriever, corpus: Corpus | str | os.PathLike[str] | None = None, **options: Any
) -> Retriever:
    """Turn a retriever specification into a retriever.

    Args:
        spec: a :class:`Retriever` (returned as is), a kind of :data:`RETRIEVER_KINDS` (shared through
            :func:`get_retriever`), or the ``http(s)://`` URL of a Search-R1-compatible ``/retrieve``
            endpoint (a :class:`RemoteRetriever`).
        corpus: the corpus of a local retriever (``None``: the shipped corpus).
        **options: options of :func:`get_retriever` (ignored for URLs and retriever objects).
    """
    if isinstance(spec, Retriever):
        return spec
    if isinstance(spec, str) and spec.startswith(("http://", "https://")):
        return RemoteRetriever(spec)
    if isinstance(spec, str) and spec in RETRIEVER_KINDS:
        return get_retriever(spec, corpus, **options)
    raise ValueError(
        f"retriever must be one of {RETRIEVER_KINDS}, an http(s):// URL of a /retrieve endpoint, or a "
        f"Retriever instance; got {spec!r}"
    )


def clear_retrievers() -> None:
    """Forget every shared retriever (the on-disk caches stay)."""
    with _REGISTRY_LOCK:
        _REGISTRY.clear()
