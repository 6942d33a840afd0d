"""Text for a terminal: stored text made safe to print, then measured and cut.

Contract:

* `safe(text, keep="")`: every C0 control except those in `keep`, DEL, every C1 control
  and the bidi controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069) shown
  as visible escapes — `\\xNN` below U+0100, `\\uNNNN` above (`ESC [ 2 J` prints as
  `\\x1b[2J`). Nothing else changes.
* `safe_line(text)`: `safe`, then every run of whitespace one space.
* `display_width(text)`: the terminal columns `text` takes (East Asian wide two,
  combining marks none).
* `fit(text, width)`: `safe_line(text)` cut to `width` columns with "…".
"""

from __future__ import annotations

import unicodedata
from functools import cache

__all__ = ["CONTROLS", "display_width", "fit", "safe", "safe_line"]

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
CONTROLS: frozenset[int] = frozenset((*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI))


@cache
def _table(keep: str) -> dict[int, str]:
    kept = {ord(ch) for ch in keep}
    return {
        cp: f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}" for cp in CONTROLS if cp not in kept
    }


def safe(text: str, keep: str = "") -> str:
    return str(text).translate(_table(keep))


def safe_line(text: str) -> str:
    return " ".join(safe(str(text), keep="\n\t").split())


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    return sum(_char_width(ch) for ch in text)


def fit(text: str, width: int) -> str:
    text = safe_line(text)
    if width <= 0:
        return ""
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = _char_width(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"
