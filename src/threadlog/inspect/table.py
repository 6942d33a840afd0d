"""`Table`: the one shape every inspector object has.

A `Table` has a `title`, `columns`, `rows()` (JSON-ready dicts) and `display_rows()` (the
same rows as cells of text lines). `str(table)`: every line at most 100 terminal columns
(wide characters count two; a cell line too long is cut with "…"; control characters print
as visible escapes). `_repr_html_()`: one self-contained `<div class="threadlog-inspect">`,
all text escaped, ids whole (`html_rows`). `to_dataframe()`: `pandas.DataFrame(rows())`."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any

from threadlog.terminal import display_width, fit, safe

if TYPE_CHECKING:
    import pandas  # type: ignore[import-untyped]

__all__ = [
    "STYLE",
    "WIDTH",
    "Cell",
    "Column",
    "Table",
    "display_width",
    "fit",
    "render_html",
    "render_text",
]

Cell = str | list[str]


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    header: str
    width: int = 0  # 0: take the width the other columns leave
    align: str = "<"  # "<" left, ">" right
    below: bool = False  # in text: printed on its own indented lines under the row
    verbatim: bool = False  # below the row, spaces kept (a diff's columns mean something)


class Table:
    """Base of every view (module doc)."""

    title: str = ""
    columns: tuple[Column, ...] = ()
    _rows: list[dict[str, Any]]  # what `rows()` copies, unless a view overrides it

    def rows(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._rows]

    def display_rows(self) -> list[dict[str, Cell]]:
        raise NotImplementedError

    def html_rows(self) -> list[dict[str, Cell]]:
        """The display rows, with ids whole where the text shortens them."""
        return self.display_rows()

    def summary(self) -> list[str]:
        return []

    def notes(self) -> list[str]:
        return []

    def to_dataframe(self) -> pandas.DataFrame:
        try:
            import pandas
        except ImportError as exc:
            raise ImportError(
                f"{type(self).__name__}.to_dataframe() needs pandas, which is not installed; "
                "`pip install pandas`, or use .rows() (a list of dicts) without it"
            ) from exc
        return pandas.DataFrame(self.rows())

    def __str__(self) -> str:
        return render_text(self)

    def _repr_html_(self) -> str:
        return render_html(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {safe(self.title)}>"


WIDTH = 100


def _pad(text: str, width: int, align: str) -> str:
    gap = " " * max(0, width - display_width(text))
    return gap + text if align == ">" else text + gap


def _lines(cell: Cell) -> list[str]:
    return list(cell) if isinstance(cell, list) else [cell]


INDENT = 6


def render_text(table: Table, width: int = WIDTH) -> str:
    cols = tuple(c for c in table.columns if not c.below)
    below = [c for c in table.columns if c.below]
    rest = max(8, width - sum(c.width for c in cols) - (len(cols) - 1))  # the width-0 column's
    widths = [c.width or rest for c in cols]
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
            lines = _lines(row.get(c.key, ""))
            shown = [safe(x) if c.verbatim else fit(x, width - INDENT) for x in lines]
            out.extend(" " * INDENT + x for x in shown)
    if not rows:
        out.append("(nothing to show)")
    for note in table.notes():  # notes are prose: wrapped, not cut (escaped first)
        out.extend(fit(line, width) for line in textwrap.wrap(safe(note, keep="\n\t"), width))
    return "\n".join(out)


# Scoped to .threadlog-inspect; `!important` beats JupyterLab's more specific cell rules.
STYLE = """<style>
.threadlog-inspect{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
 font-size:12px;color:#1f2328;text-align:left}
.threadlog-inspect .tl-title{font-weight:600;font-size:13px;margin:4px 0}
.threadlog-inspect .tl-summary,.threadlog-inspect .tl-notes{color:#57606a;margin:0 0 6px 0}
.threadlog-inspect table{border-collapse:collapse;margin:4px 0;width:auto}
.threadlog-inspect table th,.threadlog-inspect table td,
.jp-RenderedHTMLCommon .threadlog-inspect table th,
.jp-RenderedHTMLCommon .threadlog-inspect table td{
 text-align:left !important;vertical-align:top !important;padding:3px 8px !important;
 white-space:normal;max-width:none}
.threadlog-inspect table th{background:#f6f8fa;border-bottom:2px solid #d0d7de;white-space:nowrap}
.threadlog-inspect table td{border-bottom:1px solid #eaeef2}
.threadlog-inspect table td.num,
.jp-RenderedHTMLCommon .threadlog-inspect table td.num{text-align:right !important;
 white-space:nowrap}
.threadlog-inspect tbody tr:nth-child(odd){background:transparent}
.threadlog-inspect pre{white-space:pre-wrap;margin:2px 0 4px 16px;padding:4px 6px;
 background:#f6f8fa;border-radius:4px;text-align:left !important}
.threadlog-inspect details.tl-turn{border:1px solid #d0d7de;border-radius:6px;margin:6px 0;
 padding:2px 8px}
.threadlog-inspect details.tl-turn>summary{cursor:pointer;font-weight:600;padding:3px 0}
.threadlog-inspect .tl-branch{margin:8px 0 8px 0;padding-left:8px;border-left:3px solid #d0d7de}
.threadlog-inspect .tl-branch-head{font-weight:600;margin:6px 0}
.threadlog-inspect .r-user{color:#0550ae}.threadlog-inspect .r-assistant{color:#116329}
.threadlog-inspect .r-tool{color:#8250df}.threadlog-inspect .r-system{color:#6e7781}
.threadlog-inspect .r-developer{color:#6e7781}.threadlog-inspect .r-compaction{color:#9a6700}
.threadlog-inspect .r-error{color:#cf222e;font-weight:600}
.threadlog-inspect .tl-meta{color:#57606a}
.threadlog-inspect a.tl-call{color:inherit;text-decoration:underline dotted}
.threadlog-inspect .tl-wf{margin:4px 0 8px 0;max-width:900px}
.threadlog-inspect .tl-wf-row{display:flex;align-items:center;margin:2px 0}
.threadlog-inspect .tl-wf-label{flex:0 0 300px;font-size:11px;white-space:nowrap;
 overflow:hidden;text-overflow:ellipsis;padding-right:8px}
.threadlog-inspect .tl-wf-track{position:relative;flex:1 1 auto;height:12px;background:#f6f8fa}
.threadlog-inspect .tl-wf-bar{position:absolute;top:1px;height:10px;border-radius:2px;
 background:#8250df;min-width:2px}
.threadlog-inspect .tl-wf-bar.model{background:#116329}
</style>"""

_MARKERS = {
    "user": "r-user",
    "assistant": "r-assistant",
    "tool": "r-tool",
    "system": "r-system",
    "developer": "r-developer",
    "✂": "r-compaction",
    "compaction": "r-compaction",
    "⚠": "r-error",
    "error": "r-error",
}


def _line(text: str) -> str:
    first = text.split(" ", 1)[0].lstrip("+-· ")
    cls = _MARKERS.get(first) or _MARKERS.get(text[:1])
    body = escape(text)
    return f'<span class="{cls}">{body}</span>' if cls else body


def _cell(cell: Cell) -> str:
    lines = cell if isinstance(cell, list) else [cell]
    return "<br>".join(_line(x) for x in lines)


def render_html(table: Table) -> str:
    parts = [STYLE, '<div class="threadlog-inspect">']
    if table.title:
        parts.append(f'<div class="tl-title">{escape(table.title)}</div>')
    for s in table.summary():
        parts.append(f'<div class="tl-summary">{escape(s)}</div>')
    parts.append("<table><thead><tr>")
    parts.extend(f"<th>{escape(c.header)}</th>" for c in table.columns)
    parts.append("</tr></thead><tbody>")
    for row in table.html_rows():
        parts.append("<tr>")
        for c in table.columns:
            cls = ' class="num"' if c.align == ">" else ""
            parts.append(f"<td{cls}>{_cell(row.get(c.key, ''))}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    for n in table.notes():
        parts.append(f'<div class="tl-notes">{escape(n)}</div>')
    parts.append("</div>")
    return "".join(parts)
