"""A real headless browser for tests that read pages as a person would: Debian's
``chromium`` (scripts/bootstrap installs it), which runs a page's scripts before its text
is read."""

from __future__ import annotations

import html
import re
import shutil
import subprocess

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> str | None:
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def rendered_text(url: str, timeout_s: float = 60) -> str:
    """The page's visible text once its scripts ran (Chromium's ``--dump-dom``), with
    white space collapsed."""
    binary = browser()
    if binary is None:
        raise RuntimeError(f"no headless browser ({', '.join(BROWSERS)}): run scripts/bootstrap")
    dom = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", url],
        capture_output=True, text=True, timeout=timeout_s, check=True).stdout
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", dom))).strip()
