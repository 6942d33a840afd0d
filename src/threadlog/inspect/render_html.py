"""HTML rendering of a `Table` for Jupyter (`_repr_html_`).

Contract: one self-contained `<div class="threadlog-inspect">` with its own small style
block (class-scoped, so it does not restyle the notebook), the title and summary above a
table, notes below. All text is escaped. Lines that start with a role name, a compaction or
an error marker get a colour, so a reader can follow the conversation down the rows.
"""

from __future__ import annotations

from html import escape

from threadlog.inspect.table import Cell, Table

__all__ = ["render_html", "render_page"]

_STYLE = """<style>
.threadlog-inspect{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
 font-size:12px;color:#1f2328}
.threadlog-inspect .tl-title{font-weight:600;font-size:13px;margin:4px 0}
.threadlog-inspect .tl-summary{color:#57606a;margin:0 0 6px 0}
.threadlog-inspect table{border-collapse:collapse}
.threadlog-inspect th{background:#f6f8fa;text-align:left;padding:3px 8px;
 border-bottom:2px solid #d0d7de;white-space:nowrap}
.threadlog-inspect td{padding:3px 8px;border-bottom:1px solid #eaeef2;vertical-align:top;
 text-align:left}
.threadlog-inspect td.num{text-align:right;white-space:nowrap}
.threadlog-inspect .r-user{color:#0550ae}.threadlog-inspect .r-assistant{color:#116329}
.threadlog-inspect .r-tool{color:#8250df}.threadlog-inspect .r-system{color:#6e7781}
.threadlog-inspect .r-developer{color:#6e7781}.threadlog-inspect .r-compaction{color:#9a6700}
.threadlog-inspect .r-error{color:#cf222e;font-weight:600}
.threadlog-inspect .tl-notes{color:#57606a;margin-top:6px}
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
    parts = [_STYLE, '<div class="threadlog-inspect">']
    if table.title:
        parts.append(f'<div class="tl-title">{escape(table.title)}</div>')
    for s in table.summary():
        parts.append(f'<div class="tl-summary">{escape(s)}</div>')
    parts.append("<table><thead><tr>")
    parts.extend(f"<th>{escape(c.header)}</th>" for c in table.columns)
    parts.append("</tr></thead><tbody>")
    for row in table.display_rows():
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


def render_page(tables: list[Table], title: str = "threadlog inspect") -> str:
    """A standalone HTML document holding `tables`, one after another (for a file)."""
    body = "<br>".join(render_html(t) for t in tables)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
        # A page is read on its own, not inside a notebook: a larger type size.
        "<style>body .threadlog-inspect{font-size:15px}</style>"
        f'</head><body style="background:#fff;margin:16px">{body}</body></html>'
    )
