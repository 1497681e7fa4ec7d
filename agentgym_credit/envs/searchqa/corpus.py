"""Passages, questions and their files: the data formats of Search-R1 and FlashRAG.

Formats read and written here:

* **Corpus JSONL** (FlashRAG / Search-R1 ``wiki-18.jsonl``): one passage per line,
  ``{"id": "0", "contents": "Title\\ntext"}``; the first line of ``contents`` is the title, kept as
  written: the Wikipedia dump quotes it (``"\\"Aaron\\"\\n..."``) and Search-R1 shows it so
  (``Doc 1(Title: "Aaron") ...``).
  Records with separate ``title`` and ``text`` fields are accepted too. ``.gz`` files are read directly.
* **Question JSONL** (FlashRAG datasets): ``{"id", "question", "golden_answers": [...], "metadata": {...}}``.
* **Question parquet** (Search-R1's ``data/nq_search/train.parquet`` style): columns ``question``,
  ``golden_answers``, ``data_source``, ``id``; the gold answers may instead sit in the nested
  ``reward_model.ground_truth.target`` and the question only inside the chat ``prompt``
  (``... Question: <q>\\n``); both forms are read.
* **FAISS index** (Search-R1's ``e5_Flat.index``): any index written by ``faiss.write_index`` whose rows
  follow the corpus order.

Contents: :class:`Passage`, :class:`Corpus`, :class:`QARecord`, :class:`CorpusFormatError`,
:func:`read_jsonl`, :func:`write_jsonl`, :func:`load_corpus`, :func:`load_questions`,
:func:`load_search_r1_parquet`, :func:`load_faiss_index`, :func:`default_data_dir`,
:func:`default_corpus_path`, :func:`default_questions_path`.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, overload

from agentgym_credit.errors import AgentGymCreditError, DataNotFoundError

__all__ = [
    "Corpus",
    "CorpusFormatError",
    "Passage",
    "QARecord",
    "SPLITS",
    "default_corpus_path",
    "default_data_dir",
    "default_questions_path",
    "load_corpus",
    "load_faiss_index",
    "load_questions",
    "load_search_r1_parquet",
    "read_jsonl",
    "write_jsonl",
]

SPLITS = ("train", "test")


class CorpusFormatError(AgentGymCreditError, ValueError):
    """A corpus, question or index file does not follow the expected format."""


# --------------------------------------------------------------------------------------------- passages
@dataclass(frozen=True)
class Passage:
    """One retrievable passage.

    Attributes:
        id: the passage id, unique in its corpus.
        title: the title (first line of ``contents``).
        text: the body text.
    """

    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """``"title\\ntext"``, the ``contents`` field of the JSONL corpus format."""
        return f"{self.title}\n{self.text}"

    def to_json(self) -> dict[str, str]:
        """The corpus-JSONL record (also the ``document`` of a retrieval-server hit)."""
        return {"id": self.id, "contents": self.contents}

    @classmethod
    def from_contents(cls, id: str, contents: str) -> Passage:
        """Split ``contents`` into title (first line, quotes kept as Search-R1 keeps them) and text."""
        title, _, text = contents.partition("\n")
        return cls(id=str(id), title=title.strip(), text=text.strip())

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Passage:
        """Build from a ``{"id", "contents"}`` or ``{"id", "title", "text"}`` record."""
        if "id" not in record:
            raise CorpusFormatError(f"passage record without an 'id' field: {dict(record)!r:.200}")
        if "contents" in record:
            return cls.from_contents(str(record["id"]), str(record["contents"]))
        if "title" in record and "text" in record:
            return cls(id=str(record["id"]), title=str(record["title"]), text=str(record["text"]))
        raise CorpusFormatError(
            f"passage {record['id']!r} has neither 'contents' nor 'title'+'text'; "
            'corpus lines must look like {"id": ..., "contents": "title\\ntext"}'
        )


class Corpus(Sequence[Passage]):
    """An ordered, immutable collection of passages with lookup by id.

    Args:
        passages: the passages; the order is the row order of every index built over the corpus.
        name: a label for messages and cache file names.

    Raises:
        CorpusFormatError: if two passages share an id or the corpus is empty.
    """

    def __init__(self, passages: Iterable[Passage], name: str = "corpus") -> None:
        self._passages = tuple(passages)
        self.name = name
        if not self._passages:
            raise CorpusFormatError(f"corpus {name!r} holds no passages")
        self._row = {p.id: i for i, p in enumerate(self._passages)}
        if len(self._row) != len(self._passages):
            dup = next(pid for pid, n in Counter(p.id for p in self._passages).items() if n > 1)
            raise CorpusFormatError(f"corpus {name!r} has the passage id {dup!r} more than once")

    def __len__(self) -> int:
        return len(self._passages)

    @overload
    def __getitem__(self, index: int) -> Passage: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Passage]: ...

    def __getitem__(self, index: int | slice) -> Passage | Sequence[Passage]:
        return self._passages[index]

    def __iter__(self) -> Iterator[Passage]:
        return iter(self._passages)

    def __repr__(self) -> str:
        return f"Corpus(name={self.name!r}, passages={len(self)})"

    def row(self, passage_id: str) -> int:
        """The row (index position) of a passage id."""
        try:
            return self._row[passage_id]
        except KeyError:
            raise KeyError(f"no passage with id {passage_id!r} in corpus {self.name!r}") from None

    def get(self, passage_id: str) -> Passage:
        """The passage with id ``passage_id``."""
        return self._passages[self.row(passage_id)]

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Passage):
            return self._row.get(item.id) is not None and self._passages[self._row[item.id]] == item
        return isinstance(item, str) and item in self._row

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 (hex) over ids and contents in order: the key of every cached index."""
        digest = hashlib.sha256()
        for p in self._passages:
            digest.update(p.id.encode())
            digest.update(b"\x00")
            digest.update(p.contents.encode())
            digest.update(b"\x01")
        return digest.hexdigest()


# -------------------------------------------------------------------------------------------- questions
@dataclass(frozen=True, eq=True)
class QARecord:
    """One question with its gold answers.

    Attributes:
        id: the question id.
        question: the question text.
        golden_answers: the accepted answers (EM against any of them).
        data_source: the dataset name (Search-R1's ``data_source``).
        metadata: anything else; generated questions carry ``type`` (``single``/``bridge``/
            ``comparison``), ``hops``, ``supporting_ids``, ``entity_ids``, ``min_steps`` and ``plan``.
    """

    id: str
    question: str
    golden_answers: tuple[str, ...]
    data_source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def question_type(self) -> str:
        """``metadata["type"]`` or ``"unknown"``."""
        return str(self.metadata.get("type", "unknown"))

    @property
    def supporting_ids(self) -> tuple[str, ...]:
        """Ids of the passages that hold the evidence (empty where unknown)."""
        return tuple(str(x) for x in self.metadata.get("supporting_ids", ()))

    @property
    def min_steps(self) -> int:
        """The fewest agent turns that can answer it (searches + the answer); 1 where unknown."""
        return int(self.metadata.get("min_steps", 1))

    def to_json(self) -> dict[str, Any]:
        """The FlashRAG question-JSONL record."""
        record: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "golden_answers": list(self.golden_answers),
        }
        if self.data_source:
            record["data_source"] = self.data_source
        if self.metadata:
            record["metadata"] = self.metadata
        return record

    @classmethod
    def from_json(cls, record: Mapping[str, Any], index: int = 0) -> QARecord:
        """Build from a FlashRAG JSONL record or a Search-R1 parquet row.

        Args:
            record: the row.
            index: the row number, used as id where the row has none.

        Raises:
            CorpusFormatError: if the question or the gold answers cannot be found.
        """
        question = record.get("question")
        if not question:
            question = _question_from_prompt(record.get("prompt"))
        if not question:
            raise CorpusFormatError(
                f"question row {index} has no 'question' column and no chat 'prompt' with 'Question: ...'"
            )
        answers = record.get("golden_answers")
        if answers is None:
            answers = _nested(record, "reward_model", "ground_truth", "target")
        if answers is None:
            raise CorpusFormatError(
                f"question row {index} has neither 'golden_answers' nor 'reward_model.ground_truth.target'"
            )
        if isinstance(answers, str):
            answers = [answers]
        qid = record.get("id")
        if qid is None:
            qid = _nested(record, "extra_info", "index")
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, dict):
            metadata = {"raw": metadata}
        return cls(
            id=str(qid if qid is not None else index),
            question=str(question).strip(),
            golden_answers=tuple(str(a) for a in answers),
            data_source=str(record.get("data_source") or ""),
            metadata=metadata,
        )


def _nested(record: Mapping[str, Any], *keys: str) -> Any:
    value: Any = record
    for key in keys:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _question_from_prompt(prompt: Any) -> str | None:
    if not isinstance(prompt, Sequence) or isinstance(prompt, str) or not prompt:
        return None
    content = prompt[-1].get("content", "") if isinstance(prompt[-1], Mapping) else ""
    marker = content.rfind("Question:")
    if marker < 0:
        return None
    return content[marker + len("Question:") :].strip().split("\n", 1)[0].strip() or None


# ------------------------------------------------------------------------------------------------ files
def _open_text(path: Path, mode: str) -> Any:
    if path.suffix == ".gz":
        if "w" in mode:  # reproducible bytes: no file name and no time stamp in the gzip header
            raw = open(path, "wb")
            return _GzipText(raw)
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


class _GzipText:
    """A text writer over a gzip stream without file name or time stamp in its header."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9)

    def write(self, text: str) -> None:
        self._gz.write(text.encode("utf-8"))

    def __enter__(self) -> _GzipText:
        return self

    def __exit__(self, *exc: object) -> None:
        self._gz.close()
        self._raw.close()


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of a ``.jsonl`` or ``.jsonl.gz`` file, skipping blank lines.

    Raises:
        CorpusFormatError: on a line that is not a JSON object (the message names file and line).
    """
    path = Path(path)
    with _open_text(path, "r") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusFormatError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise CorpusFormatError(
                    f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}"
                )
            yield record


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Write records as JSON lines (gzip-compressed, reproducibly, when the name ends in ``.gz``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open_text(path, "w") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


def _file_key(path: str | os.PathLike[str]) -> tuple[str, int, int]:
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise DataNotFoundError(f"no such file: {resolved}")
    stat = resolved.stat()
    return str(resolved), stat.st_mtime_ns, stat.st_size


def load_corpus(path: str | os.PathLike[str] | None = None) -> Corpus:
    """Load a JSONL corpus (once per process and file version).

    Args:
        path: a ``.jsonl`` / ``.jsonl.gz`` corpus; ``None`` for the corpus shipped with the package.

    Returns:
        The corpus, named after the file.
    """
    return _load_corpus_cached(*_file_key(path or default_corpus_path()))


@functools.lru_cache(maxsize=8)
def _load_corpus_cached(path: str, mtime_ns: int, size: int) -> Corpus:
    del mtime_ns, size  # part of the cache key only
    name = Path(path).name.split(".")[0]
    return Corpus((Passage.from_json(r) for r in read_jsonl(path)), name=name)


def load_questions(path: str | os.PathLike[str]) -> tuple[QARecord, ...]:
    """Load questions from FlashRAG JSONL (``.jsonl``, ``.jsonl.gz``) or Search-R1 parquet (once per file).

    Raises:
        CorpusFormatError: on rows without question or answers, or duplicate ids.
    """
    return _load_questions_cached(*_file_key(path))


@functools.lru_cache(maxsize=16)
def _load_questions_cached(path: str, mtime_ns: int, size: int) -> tuple[QARecord, ...]:
    del mtime_ns, size
    if path.endswith(".parquet"):
        records = load_search_r1_parquet(path)
    else:
        records = tuple(QARecord.from_json(r, i) for i, r in enumerate(read_jsonl(path)))
    ids = [r.id for r in records]
    if len(set(ids)) != len(ids):
        raise CorpusFormatError(f"{path}: question ids are not unique")
    if not records:
        raise CorpusFormatError(f"{path}: holds no questions")
    return records


def load_search_r1_parquet(path: str | os.PathLike[str]) -> tuple[QARecord, ...]:
    """Read a Search-R1 question parquet file (flat or nested ``reward_model`` form).

    Needs ``pyarrow``.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError("reading parquet question files needs pyarrow: `pip install pyarrow`") from exc
    rows = pq.read_table(path).to_pylist()
    return tuple(QARecord.from_json(row, i) for i, row in enumerate(rows))


def load_faiss_index(path: str | os.PathLike[str], expected_size: int | None = None) -> Any:
    """Read a prebuilt FAISS index (``faiss.write_index`` output).

    Args:
        path: the index file.
        expected_size: the corpus size the index must cover (checked when given).

    Raises:
        CorpusFormatError: if the index does not hold ``expected_size`` vectors.
    """
    import faiss

    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no FAISS index at {path}")
    index = faiss.read_index(str(path))
    if expected_size is not None and index.ntotal != expected_size:
        raise CorpusFormatError(
            f"FAISS index {path} holds {index.ntotal} vectors but the corpus has {expected_size} passages; "
            "the index rows must follow the corpus order"
        )
    return index


# ---------------------------------------------------------------------------------------- shipped data
def default_data_dir() -> Path:
    """The folder of the data shipped with the package."""
    return Path(__file__).resolve().parent / "data"


def default_corpus_path() -> Path:
    """The shipped fictional-encyclopedia corpus (``corpus.jsonl.gz``)."""
    return default_data_dir() / "corpus.jsonl.gz"


def default_questions_path(split: str) -> Path:
    """The shipped question file of ``split`` (``"train"`` or ``"test"``)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return default_data_dir() / f"questions_{split}.jsonl.gz"
