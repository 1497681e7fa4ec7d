"""MkDocs hook: the committed leaderboard report, served with the site.

``agc leaderboard`` writes its report to ``benchmarks/results/leaderboard/``, outside ``docs/``; its HTML page is
one self-contained file (tables and plots embedded), so the site serves that file as
``leaderboard/leaderboard.html`` and the pages link it like any other page of the site.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "benchmarks" / "results" / "leaderboard" / "leaderboard.html"
#: where the report is in the site (and what the pages link)
SITE_PATH = "leaderboard/leaderboard.html"


def on_files(files, config):  # noqa: ANN001,ANN201 - MkDocs hook signature
    if REPORT.is_file():  # without it, the pages' links to it fail the strict build
        files.append(File.generated(config, SITE_PATH, abs_src_path=str(REPORT)))
    return files
