"""``bm25s`` without JAX's grip on the GPU.

``bm25s.selection`` imports ``jax.lax`` where JAX is installed and runs a top-k on JAX's default device at
import. On a GPU machine JAX then preallocates 75 % of the GPU's memory in every process that imports
bm25s: twenty SearchQA training workers sharing one H200 ran out of GPU memory that way. The environments
(SearchQA's retriever, WebShop's search engine) import bm25s through :func:`import_bm25s`, which hides JAX
for the duration of the import, so bm25s falls back to numpy selection; a process that imported JAX itself
keeps it (bm25s then finds the JAX the process configured).
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["import_bm25s"]

_HIDDEN = ("jax", "jax.lax")


def import_bm25s() -> ModuleType:
    """The ``bm25s`` module, imported with JAX hidden unless this process already imported JAX."""
    if "bm25s" in sys.modules or "jax" in sys.modules:
        import bm25s

        return bm25s
    saved = {name: sys.modules[name] for name in _HIDDEN if name in sys.modules}
    sys.modules.update(dict.fromkeys(_HIDDEN))  # None in sys.modules: `import jax` raises ImportError
    try:
        import bm25s
    finally:
        for name in _HIDDEN:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
    return bm25s
