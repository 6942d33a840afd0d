"""Headless Chromium for the HTML tests: computed styles and screenshots of real pages.

`CHROMIUM` is the browser binary when one is installed (`chromium`, `chromium-browser`,
`google-chrome`), else None — the tests that need it say so in their skip reason.
`computed(html)` loads a page, runs `script` (JavaScript returning a JSON-able value) after
load, and returns that value, read back from the DOM Chromium dumps.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
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
        assert CHROMIUM is not None
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
        assert CHROMIUM is not None
        subprocess.run(
            [CHROMIUM, *_FLAGS, f"--screenshot={out}", f"--window-size={width},{height}",
             path.as_uri()],
            capture_output=True, timeout=120, check=True,
        )
    return out
