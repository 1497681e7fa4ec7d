"""Headless Chromium for the tests that look at a page as a reader would (the leaderboard, the docs site)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def run_chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on ``page`` with ``args`` (a fresh profile each time): its stdout and its logs."""
    profile = tempfile.mkdtemp(prefix="chromium-profile-")  # a new, empty profile each time
    try:
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                               *args, page.as_uri()], capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def browser_check(page: Path, screenshot: Path) -> str:
    """Load ``page`` in headless Chromium: fail on console messages, return the DOM after load."""
    shot = run_chromium(page, "--window-size=1280,2400", f"--screenshot={screenshot}", "--hide-scrollbars")
    dom = run_chromium(page, "--virtual-time-budget=5000", "--dump-dom")
    console = [line for line in (shot.stderr + dom.stderr).splitlines() if ":CONSOLE" in line]
    assert not console, console
    assert screenshot.exists() and screenshot.stat().st_size > 1000, shot.stderr[-2000:]
    return dom.stdout
