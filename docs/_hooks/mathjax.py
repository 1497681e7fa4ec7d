"""MkDocs hook: serve MathJax from the site itself, so the formulas render offline.

The pages write math as ``\\( … \\)`` and ``\\[ … \\]``, which ``pymdownx.arithmatex`` (generic mode) wraps in
``arithmatex`` elements; MathJax 3 typesets them in the browser. Its files come from the ``docs`` extra's
``django-static-mathjax`` wheel (MathJax 3.2.2's own distribution as package data, Apache-2.0; Django is not
needed). After the build this hook copies the one component the site loads, ``es5/tex-chtml.js``, and the
CommonHTML fonts it fetches relative to itself into ``<site>/javascripts/mathjax/``; ``mkdocs.yml`` lists the
configuration (``javascripts/mathjax.js``) and that component under ``extra_javascript``.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

FONTS = Path("output") / "chtml" / "fonts" / "woff-v2"


def mathjax_dist() -> Path:
    """MathJax's ``es5`` folder inside the installed ``django-static-mathjax`` package."""
    spec = importlib.util.find_spec("mathjax")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("MathJax's files are missing: install the docs extra (pip install -e '.[docs]')")
    dist = Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5"
    if not (dist / "tex-chtml.js").is_file():
        raise RuntimeError(f"{dist} holds no tex-chtml.js: reinstall django-static-mathjax==3.2.2.1")
    return dist


def on_post_build(config, **kwargs):  # noqa: ANN001,ANN003,ANN201 - MkDocs hook signature
    dist = mathjax_dist()
    target = Path(config["site_dir"]) / "javascripts" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(dist / "tex-chtml.js", target / "tex-chtml.js")
    shutil.copytree(dist / FONTS, target / FONTS, dirs_exist_ok=True)
    shutil.copy2(dist.parent / "LICENSE", target / "LICENSE")
