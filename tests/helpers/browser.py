"""Headless Chromium for the HTML tests: computed styles and screenshots of real pages.

`CHROMIUM` is the browser binary when one is installed (`chromium`, `chromium-browser`,
`google-chrome`), else None. Tests that need it are marked `needs_chromium`: skipped, with
the reason, on a machine without one — except where `THREADLOG_REQUIRE_CHROMIUM` is set
(`.ci/run` sets it once it has installed Debian's chromium), where they run and fail.
`computed(html)` loads a page, runs `script` (JavaScript returning a JSON-able value) after
load, and returns that value, read back from the DOM Chromium dumps.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("THREADLOG_REQUIRE_CHROMIUM"),
    reason="needs a headless Chromium (apt install chromium)",
)
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]


def computed(html: str, script: str) -> Any:
    """The value of `script` evaluated in the loaded page."""
    probe = (
        "<script>window.addEventListener('load',function(){var out=document.createElement('pre');"
        f"out.id='tl-probe';out.textContent=JSON.stringify((function(){{{script}}})());"
        "document.body.appendChild(out);});</script>"
    )
    page = html.replace("</body>", probe + "</body>") if "</body>" in html else html + probe
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "page.html"
        path.write_text(page, encoding="utf-8")
        assert CHROMIUM is not None, (
            "no headless Chromium on PATH (chromium, chromium-browser, google-chrome); "
            "THREADLOG_REQUIRE_CHROMIUM is set, so this fails instead of skipping"
        )
        dom = subprocess.run(
            [CHROMIUM, *_FLAGS, "--dump-dom", path.as_uri()],
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout
    m = re.search(r'<pre id="tl-probe">(.*?)</pre>', dom, re.S)
    assert m, f"the probe did not run; Chromium printed:\n{dom[-2000:]}"
    import html as html_mod

    return json.loads(html_mod.unescape(m.group(1)))


def screenshot(html: str, out: Path, width: int = 1200, height: int = 1400) -> Path:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "page.html"
        path.write_text(html, encoding="utf-8")
        assert CHROMIUM is not None, (
            "no headless Chromium on PATH (chromium, chromium-browser, google-chrome); "
            "THREADLOG_REQUIRE_CHROMIUM is set, so this fails instead of skipping"
        )
        subprocess.run(
            [CHROMIUM, *_FLAGS, f"--screenshot={out}", f"--window-size={width},{height}",
             path.as_uri()],
            capture_output=True, timeout=120, check=True,
        )
    return out
