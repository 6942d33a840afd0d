"""`Table`: the one shape every inspector object has.

Contract: a `Table` has a `title`, `columns`, `rows()` (plain dicts of str/int/float/None and
lists/dicts of those — JSON-ready, for users' own analysis) and `display_rows()` (the same
rows as cells of text lines, for people). `str(table)` renders the display rows as plain text
that fits in 100 columns; `table._repr_html_()` renders them as an HTML table in Jupyter;
`table.to_dataframe()` is `pandas.DataFrame(table.rows())` when pandas is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas  # type: ignore[import-untyped]

__all__ = ["Cell", "Column", "Table"]

Cell = str | list[str]


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    header: str
    width: int = 0  # 0: take the width the other columns leave
    align: str = "<"  # "<" left, ">" right
    below: bool = False  # in text: printed on its own indented lines under the row


class Table:
    """Base of Timeline, ToolPairs, ContextSeen, CheckpointDiff and ForkTree."""

    title: str = ""
    columns: tuple[Column, ...] = ()

    def rows(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def display_rows(self) -> list[dict[str, Cell]]:
        raise NotImplementedError

    def summary(self) -> list[str]:
        """Lines shown above the table."""
        return []

    def notes(self) -> list[str]:
        """Lines shown below the table (caveats, how a figure was derived)."""
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
        from threadlog.inspect.render_text import render_text

        return render_text(self)

    def _repr_html_(self) -> str:
        from threadlog.inspect.render_html import render_html

        return render_html(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.title}>"
