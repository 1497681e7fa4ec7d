"""BM25 product search for WebShop (``bm25s`` with PyStemmer's Porter stemmer, numpy only).

Upstream WebShop searches a Lucene index (pyserini's default English analyzer, Java). This module
rebuilds that index in Python:

* **Documents** — as upstream's index builder writes them: the product's title, description, first
  bullet point and option text (``"color: black, white, and size: small, large"``) joined by spaces and
  lowercased.
* **Analysis** (documents and queries alike) — words as Lucene's standard tokenizer cuts them (letters
  and digits; ``.`` and ``'`` inside a word and ``,`` inside a number do not cut: ``3.5``, ``men's``,
  ``1,000``), a trailing possessive ``'s`` removed, lowercased, Lucene's 33 English stopwords removed,
  Porter-stemmed (PyStemmer's ``porter``: ``batteries`` → ``batteri``, ``running`` → ``run``; words of
  one or two letters are kept, as Lucene's Porter stemmer keeps them).
* **Ranking** — BM25 with Lucene's defaults ``k1 = 0.9``, ``b = 0.4``; a query word that occurs ``c``
  times counts ``c`` times; ties go to the earlier product; the top 50 products that share a word
  with the query are the results (10 per page)::

      score(q, d) = Σ_{t ∈ q} idf(t) · tf(t, d) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))

Not reproduced: Lucene stores document lengths with one byte of precision, which can reorder
near-ties, and the full Unicode word-break rules (``a.5`` stays one token here).

The index of a catalog is built once, saved under ``cache_dir/<catalog fingerprint>`` (default
``webshop`` in the library's user cache, :func:`default_cache_dir`), and shared by every
environment of the process through :func:`get_search_index`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import Stemmer

from agentgym_credit.envs.bm25 import import_bm25s
from agentgym_credit.envs.webshop.catalog import Catalog, Product
from agentgym_credit.user_cache import cache_root

bm25s = import_bm25s()

__all__ = [
    "SEARCH_TOP_K",
    "RESULTS_PER_PAGE",
    "BM25_K1",
    "BM25_B",
    "MAX_CACHED_QUERY_CHARS",
    "INDEX_FORMAT",
    "STOPWORDS",
    "SearchIndex",
    "default_cache_dir",
    "document_text",
    "get_search_index",
    "tokenize",
]

SEARCH_TOP_K = 50
RESULTS_PER_PAGE = 10
BM25_K1 = 0.9
BM25_B = 0.4
_QUERY_CACHE_SIZE = 4096
#: Longest query (in characters) the query cache keeps: a longer one is searched every time, so the process-wide
#: cache takes a few megabytes however long the agent's ``search[...]`` texts are.
MAX_CACHED_QUERY_CHARS = 1024
_META_FILE = "webshop_index.json"

#: Lucene's English stopwords (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``).
STOPWORDS = frozenset(
    """
    a an and are as at be but by for if in into is it no not of on or such that the their then there
    these they this to was will with
    """.split()
)
#: Changes whenever the analysis or the document text changes (saved indexes are rebuilt).
INDEX_FORMAT = "webshop-index/2"
_WORD = re.compile(r"[^\W_]+(?:(?:['’.]|(?<=\d),(?=\d))[^\W_]+)*")
_STEMMERS = threading.local()


def _stem_words(words: list[str]) -> list[str]:
    stemmer = getattr(_STEMMERS, "porter", None)
    if stemmer is None:  # PyStemmer's stemmer objects are not thread-safe: one per thread
        stemmer = _STEMMERS.porter = Stemmer.Stemmer("porter")
    # like Lucene's PorterStemmer (and Porter's reference code), words of one or two letters stay as
    # they are ("us", "xs"); Snowball's version would cut them
    return [w if len(w) <= 2 else stem for w, stem in zip(words, stemmer.stemWords(words), strict=True)]


def tokenize(text: str) -> list[str]:
    """Search tokens of ``text``: words, possessives dropped, lowercased, no stopwords, Porter-stemmed.

    Example:
        >>> tokenize("The Men's Running Shoes, 3.5 oz")
        ['men', 'run', 'shoe', '3.5', 'oz']
    """
    words = []
    for word in _WORD.findall(text.lower()):
        if word.endswith(("'s", "’s")):
            word = word[:-2]
        if word and word not in STOPWORDS:
            words.append(word)
    return _stem_words(words)


def document_text(product: Product) -> str:
    """The indexed text of a product, as upstream builds it: title, description, first bullet point and
    option text (``"color: black, white, and size: small"``), lowercased."""
    options = ", and ".join(f"{name}: {', '.join(values)}" for name, values in product.options.items())
    first_bullet = product.bullet_points[0] if product.bullet_points else ""
    return " ".join((product.name, product.description, first_bullet, options)).lower()


def default_cache_dir() -> Path:
    """``webshop`` in the library's user cache (:func:`~agentgym_credit.user_cache.cache_root`:
    ``$AGC_CACHE_DIR``, else ``$XDG_CACHE_HOME/agentgym_credit``, else ``~/.cache/agentgym_credit``)."""
    return cache_root() / "webshop"


class SearchIndex:
    """A BM25 index over a catalog's products.

    Args:
        asins: the ASIN of each indexed document, in index order.
        retriever: the ``bm25s.BM25`` index.
        fingerprint: the catalog fingerprint the index was built for.
    """

    def __init__(self, asins: Sequence[str], retriever: bm25s.BM25, fingerprint: str) -> None:
        self.asins: tuple[str, ...] = tuple(asins)
        self.fingerprint = fingerprint
        self._retriever = retriever
        self._cache: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def build(cls, catalog: Catalog) -> SearchIndex:
        """Index every product of ``catalog`` (in catalog order)."""
        retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B)
        retriever.index([tokenize(document_text(p)) for p in catalog.products], show_progress=False)
        return cls([p.asin for p in catalog.products], retriever, catalog.fingerprint)

    def save(self, directory: str | Path) -> Path:
        """Write the index to ``directory`` atomically (a complete folder or nothing).

        Returns:
            ``directory``.
        """
        target = Path(directory)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            self._retriever.save(str(tmp), show_progress=False)
            meta = {
                "fingerprint": self.fingerprint,
                "asins": list(self.asins),
                "bm25s": bm25s.__version__,
                "format": INDEX_FORMAT,
            }
            (tmp / _META_FILE).write_text(json.dumps(meta), encoding="utf-8")
            try:
                os.replace(tmp, target)
            except OSError:  # another process saved it first: keep theirs
                if not (target / _META_FILE).is_file():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return target

    @classmethod
    def load(cls, directory: str | Path, catalog: Catalog) -> SearchIndex:
        """Read an index saved by :meth:`save` for ``catalog``.

        Raises:
            ValueError: the saved index belongs to another catalog or bm25s version.
            OSError: the folder cannot be read.
        """
        directory = Path(directory)
        meta = json.loads((directory / _META_FILE).read_text(encoding="utf-8"))
        asins = [p.asin for p in catalog.products]
        if (
            meta.get("fingerprint") != catalog.fingerprint
            or meta.get("asins") != asins
            or meta.get("bm25s") != bm25s.__version__
            or meta.get("format") != INDEX_FORMAT
        ):
            raise ValueError(
                f"the index in {directory} was built for another catalog, bm25s version or index format"
            )
        retriever = bm25s.BM25.load(str(directory), show_progress=False)
        return cls(asins, retriever, catalog.fingerprint)

    def search(self, query: str, top_k: int = SEARCH_TOP_K) -> tuple[str, ...]:
        """The ASINs of the best ``top_k`` products for ``query``, best first.

        Ties are broken by catalog order; products with score 0 are left out. Results are cached per
        query (queries of up to :data:`MAX_CACHED_QUERY_CHARS` characters).
        """
        key = f"{top_k}\x00{query}" if len(query) <= MAX_CACHED_QUERY_CHARS else None
        if key is not None:
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    return hit
        ids = self._retriever.get_tokens_ids(tokenize(query))
        if ids:
            scores = np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float64)
            order = np.lexsort((np.arange(scores.size), -scores))[:top_k]
            result = tuple(self.asins[i] for i in order if scores[i] > 0.0)
        else:
            result = ()
        if key is not None:
            with self._lock:
                self._cache[key] = result
                if len(self._cache) > _QUERY_CACHE_SIZE:
                    self._cache.popitem(last=False)
        return result


_INDEXES: dict[str, SearchIndex] = {}
_INDEXES_LOCK = threading.Lock()


def get_search_index(catalog: Catalog, cache_dir: str | Path | None = None) -> SearchIndex:
    """The search index of ``catalog``, shared by the whole process.

    Looked up in memory by the catalog fingerprint, else loaded from
    ``cache_dir/<fingerprint[:16]>``, else built and saved there. A cache folder that cannot be written
    only costs a rebuild in the next process (with a warning).

    Args:
        catalog: the catalog to search.
        cache_dir: folder of saved indexes (default :func:`default_cache_dir`).
    """
    key = catalog.fingerprint
    with _INDEXES_LOCK:
        index = _INDEXES.get(key)
        if index is not None:
            return index
        folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        directory = folder / key[:16]
        index = None
        if (directory / _META_FILE).is_file():
            try:
                index = SearchIndex.load(directory, catalog)
            except (OSError, ValueError):
                shutil.rmtree(directory, ignore_errors=True)
        if index is None:
            index = SearchIndex.build(catalog)
            try:
                index.save(directory)
            except OSError as exc:
                warnings.warn(
                    f"could not cache the WebShop search index in {directory} ({exc}); "
                    "pass cache_dir= to a writable folder",
                    RuntimeWarning,
                    stacklevel=2,
                )
        _INDEXES[key] = index
        return index
