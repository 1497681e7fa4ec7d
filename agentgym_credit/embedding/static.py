"""Static sentence embeddings distilled offline from a sentence-transformer (the Model2Vec recipe).

A static model keeps one vector per token of the teacher's vocabulary; a text's embedding is the mean
of its tokens' vectors, L2-normalized. Encoding is a tokenizer call and a table lookup — thousands of
texts in milliseconds on one core, against seconds for the transformer — at the price of word order
and context (Tulkens and van Dongen, 2024, "Model2Vec: Fast State-of-the-Art Static Embeddings",
https://github.com/MinishLab/model2vec).

Distillation (:func:`distill_static_embeddings`), offline from the loaded teacher:

1. every vocabulary token ``t`` is embedded by the teacher as the sequence ``[CLS] t [SEP]``, output
   mean-pooled over the three positions;
2. the vectors are centred and projected on their first ``dims`` principal components (PCA by SVD);
3. each token is weighted by the SIF weight :math:`a / (a + p(t))` (Arora et al., 2017, "A Simple but
   Tough-to-Beat Baseline for Sentence Embeddings"), with :math:`p(t)` estimated by Zipf's law from the
   token's rank in the vocabulary (WordPiece vocabularies are ordered roughly by frequency) and
   :math:`a = 10^{-4}`.

The table is stored as float16 in the library's user cache (``static/`` under
:func:`~agentgym_credit.user_cache.cache_root`: ``$AGC_CACHE_DIR`` or ``~/.cache/agentgym_credit``; 15.6 MB for all-MiniLM-L6-v2's 30,522 tokens × 256 dimensions), keyed
by the teacher's path, so the distillation runs once per machine; later loads take milliseconds.
``make install`` (and so ``make run`` / ``make test``) runs it ahead of time with ``agc embeddings
prepare`` (:func:`prepare_static_table`); a first use without it distils the table on the spot, with a
message and a progress bar. The cosine scale differs from the teacher's (static embeddings of related
texts are more alike), so thresholds must be calibrated against the teacher;
``benchmarks/matching_backends.py`` measures the agreement.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix

from agentgym_credit.embedding.texts import encodable_texts
from agentgym_credit.embedding.transformer import load_sentence_transformer
from agentgym_credit.user_cache import cache_root

__all__ = [
    "SIF_COEFFICIENT",
    "StaticSentenceEncoder",
    "cached_static_table",
    "distill_static_embeddings",
    "prepare_static_table",
    "static_cache_path",
]

#: The SIF weighting constant a (Model2Vec's default).
SIF_COEFFICIENT = 1e-4


#: Where tables were kept before every cache of the library shared :func:`~agentgym_credit.user_cache.cache_root`;
#: a table found there is moved on its first use.
_LEGACY_ROOT = Path.home() / ".cache" / "agentgym-credit"


def static_cache_path(model_path: str, dims: int) -> Path:
    """Where the distilled table of ``model_path`` with ``dims`` dimensions is cached."""
    key = hashlib.sha256(os.path.realpath(model_path).encode()).hexdigest()[:16]
    return cache_root() / "static" / f"{Path(model_path).name}-{key}-{dims}d.npy"


def distill_static_embeddings(
    teacher: Any, dims: int = 256, batch_size: int = 2048, progress: bool = True, num_tokens: int | None = None
) -> np.ndarray:
    """One float32 vector per vocabulary token of a sentence-transformers ``teacher`` (see the module docstring).

    Args:
        teacher: a loaded ``sentence_transformers.SentenceTransformer`` with a BERT-style tokenizer.
        dims: principal components kept (at most the teacher's dimension and the number of tokens).
        batch_size: tokens per forward pass. Every sequence has three tokens, so batches carry no
            padding; large batches keep the matrix products efficient (measured on 2 cores: 3.6 ms per
            token at 2,048, 5.5 ms at 512, 16 ms at 128).
        progress: show a tqdm bar.
        num_tokens: distil only the first ``num_tokens`` ids of the vocabulary (default: all of it).

    Returns:
        ``(vocab_size, dims)`` float32, SIF-weighted.
    """
    import torch
    from tqdm import tqdm

    tokenizer = teacher.tokenizer
    transformer = teacher[0].auto_model.eval()
    vocab = len(tokenizer) if num_tokens is None else min(int(num_tokens), len(tokenizer))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    out = np.empty((vocab, transformer.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for lo in tqdm(range(0, vocab, batch_size), desc="distilling static embeddings", disable=not progress):
            ids = torch.arange(lo, min(lo + batch_size, vocab))
            seq = torch.stack([torch.full_like(ids, cls), ids, torch.full_like(ids, sep)], dim=1)
            hidden = transformer(input_ids=seq, attention_mask=torch.ones_like(seq)).last_hidden_state
            out[lo : lo + len(ids)] = hidden.float().mean(dim=1).numpy()
    centred = out - out.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    projected = centred @ vt[: min(dims, vt.shape[0])].T
    rank = np.arange(1, vocab + 1, dtype=np.float64)
    proba = (1.0 / rank) / np.sum(1.0 / rank)
    weight = SIF_COEFFICIENT / (SIF_COEFFICIENT + proba)
    return (projected * weight[:, None]).astype(np.float32)


def cached_static_table(model_path: str, dims: int) -> Path | None:
    """The cached table of ``model_path`` with ``dims`` dimensions, or None where none is cached.

    A table distilled before every cache of the library shared one folder (``~/.cache/agentgym-credit``) is
    moved to :func:`static_cache_path` here instead of being distilled again.
    """
    path = static_cache_path(model_path, dims)
    if path.is_file():
        return path
    legacy = _LEGACY_ROOT / "static" / path.name
    if not legacy.is_file():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(legacy, path)
    return path


def prepare_static_table(
    model_path: str, dims: int = 256, *, force: bool = False, progress: bool = True, announce: bool = False
) -> Path:
    """Distil the static table of ``model_path`` into the user's cache unless it is there; its path.

    Args:
        model_path: the teacher's folder.
        dims: dimensions of the table.
        force: distil again even when a table is cached.
        progress: show a progress bar while distilling.
        announce: print a line to stderr before distilling (what happens, how long, how to avoid it).

    Returns:
        The cached ``.npy`` file (float16, ``(vocabulary, dims)``).
    """
    path = static_cache_path(model_path, dims)
    if not force and cached_static_table(model_path, dims) is not None:
        return path
    if announce:
        print(f"agentgym-credit: distilling the static embedding table of {Path(model_path).name} once for this "
              f"machine into {path} (67 s of CPU, a few minutes on 2 busy cores; `agc embeddings prepare` does it ahead of time)",
              file=sys.stderr, flush=True)
    teacher = load_sentence_transformer(model_path, "cpu")  # loaded once per process (torch)
    table = distill_static_embeddings(teacher, dims, progress=progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
    np.save(tmp, table.astype(np.float16))
    os.replace(tmp, path)
    return path


class StaticSentenceEncoder:
    """Mean of distilled token vectors, with the ``encode`` API of sentence-transformers.

    Args:
        model_path: the teacher's folder (its ``tokenizer.json`` tokenizes; its weights distil the
            table on the first use on a machine).
        dims: dimensions of the distilled table.
        progress: show a bar while distilling.
    """

    backend = "static"

    def __init__(self, model_path: str, dims: int = 256, progress: bool = True) -> None:
        from tokenizers import Tokenizer

        self.model_path = str(model_path)
        self.dims = int(dims)
        self.tokenizer = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        path = prepare_static_table(self.model_path, self.dims, progress=progress, announce=True)
        self.table = np.load(path).astype(np.float32)

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.table.shape[1])

    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 64,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = True,
        show_progress_bar: bool = False,
        **_: Any,
    ) -> np.ndarray:
        """Embeddings of ``sentences``: the (normalized) mean of their tokens' vectors, float32."""
        texts = list(sentences)
        if not texts:
            return np.zeros((0, self.table.shape[1]), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(encodable_texts(texts), add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        ids = np.fromiter((i for e in encodings for i in e.ids), dtype=np.int64, count=int(lengths.sum()))
        # (texts × vocabulary) token counts times the table: no (tokens × dims) intermediate
        counts = csr_matrix((np.ones(len(ids), dtype=np.float32), ids, np.concatenate([[0], np.cumsum(lengths)])),
                            shape=(len(texts), self.table.shape[0]))
        emb = np.asarray(counts @ self.table, dtype=np.float32)
        emb /= np.maximum(lengths, 1)[:, None]
        if normalize_embeddings:
            norm = np.linalg.norm(emb, axis=1, keepdims=True)
            emb = np.divide(emb, norm, out=np.zeros_like(emb), where=norm > 0)
        return emb.astype(np.float32)
