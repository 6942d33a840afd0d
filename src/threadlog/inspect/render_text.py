"""Plain-text rendering of a `Table`, readable in a 100-column terminal.

Contract: every output line is at most `width` terminal columns wide (default 100), counting
East Asian wide characters (Chinese text) as two columns, as terminals draw them.
Fixed-width columns keep their width; the one column of width 0 takes what is left. A cell
is a list of lines; a line longer than its column is cut with "…", never wrapped into the
next column. A column marked `below` is not a column in text: its lines follow the row,
indented, with nearly the whole width to themselves.
"""

from __future__ import annotations

import textwrap
import unicodedata

from threadlog.inspect.table import Cell, Column, Table

__all__ = ["WIDTH", "display_width", "fit", "render_text"]

WIDTH = 100


def _char_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Terminal columns `text` occupies (wide CJK characters count two)."""
    return sum(_char_width(ch) for ch in text)


def fit(text: str, width: int) -> str:
    """`text` on one line, cut to `width` terminal columns with an ellipsis."""
    text = " ".join(str(text).split())
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


def _pad(text: str, width: int, align: str) -> str:
    gap = " " * max(0, width - display_width(text))
    return gap + text if align == ">" else text + gap


def _widths(columns: tuple[Column, ...], width: int) -> list[int]:
    gaps = len(columns) - 1
    fixed = sum(c.width for c in columns)
    rest = max(8, width - fixed - gaps)
    return [c.width or rest for c in columns]


def _lines(cell: Cell) -> list[str]:
    return list(cell) if isinstance(cell, list) else [cell]


INDENT = 6


def render_text(table: Table, width: int = WIDTH) -> str:
    cols = tuple(c for c in table.columns if not c.below)
    below = [c for c in table.columns if c.below]
    widths = _widths(cols, width)
    out = [fit(line, width) for line in [table.title, *table.summary()] if line]

    def line(cells: list[str]) -> str:
        parts = [
            _pad(fit(text, w), w, c.align) for text, w, c in zip(cells, widths, cols, strict=True)
        ]
        return " ".join(parts).rstrip()

    out.append(line([c.header for c in cols]))
    for c in below:
        out.append(" " * INDENT + c.header)
    out.append("─" * width)
    rows = table.display_rows()
    for row in rows:
        cells = [_lines(row.get(c.key, "")) for c in cols]
        height = max(len(c) for c in cells) or 1
        for i in range(height):
            out.append(line([c[i] if i < len(c) else "" for c in cells]))
        for c in below:
            out.extend(" " * INDENT + fit(x, width - INDENT) for x in _lines(row.get(c.key, "")))
    if not rows:
        out.append("(nothing to show)")
    for note in table.notes():  # notes are prose: wrapped, not cut
        out.extend(fit(line, width) for line in textwrap.wrap(note, width))
    return "\n".join(out)
