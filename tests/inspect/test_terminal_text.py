"""`threadlog.terminal`: which characters print as escapes, and widths after escaping."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.terminal import raw_controls
from threadlog.inspect.table import Cell, Column, Table, render_text
from threadlog.terminal import display_width, fit, safe, safe_line

_C0 = [chr(c) for c in range(0x20)]
_C1 = [chr(c) for c in range(0x80, 0xA0)]
_BIDI = [chr(c) for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))]


@pytest.mark.parametrize("ch", [*_C0, "\x7f", *_C1, *_BIDI], ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_a_terminal_obeys_prints_as_its_visible_escape(ch: str) -> None:
    expected = f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"

    assert safe(f"a{ch}b") == f"a{expected}b"


def test_the_escapes_read_as_the_sequences_they_replace() -> None:
    assert safe("\x1b[2J\x1b]0;title\x07") == r"\x1b[2J\x1b]0;title\x07"
    assert safe("\x9b31m\u202eexe.txt") == r"\x9b31m\u202eexe.txt"
    assert safe("a\rb\x08") == r"a\x0db\x08"


def test_printable_text_is_left_as_it_is() -> None:
    text = "北京：小雨 ☂ café e\u0301 \\x1b already a backslash \u200b zero-width \xa0 nbsp"
    assert safe(text) == text
    assert safe(safe("\x1b[2J")) == safe("\x1b[2J")  # escaping twice changes nothing more


def test_a_view_that_lays_out_newlines_and_tabs_keeps_them_and_escapes_the_rest() -> None:
    assert safe("one\ntwo\tthree\r", keep="\n\t") == "one\ntwo\tthree\\x0d"
    assert safe("one\ntwo\t") == r"one\x0atwo\x09"


def test_one_line_turns_newlines_and_tabs_into_one_space_and_escapes_the_rest() -> None:
    assert safe_line(" a\n\n b\tc\x1b[1A ") == r"a b c\x1b[1A"


def test_fit_measures_the_width_after_escaping() -> None:
    cut = fit("\x1b[2J" * 10, 20)
    assert display_width(cut) == 20 and cut.startswith(r"\x1b[2J\x1b[2J") and cut.endswith("…")
    assert raw_controls(cut) == []
    assert fit("\x1b", 4) == r"\x1b"  # exactly its width: not cut
    assert fit("雨\x1b", 5) == "雨\\x…"  # a wide character counts two columns


class _Rows(Table):
    title = "t\x1b]0;title\x07"
    columns = (Column("a", "a", 10), Column("b", "b", 6, ">"), Column("c", "c"))

    def __init__(self, rows: list[dict[str, Cell]]) -> None:
        self._rows = rows

    def rows(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._rows]

    def display_rows(self) -> list[dict[str, Cell]]:
        return self._rows

    def notes(self) -> list[str]:
        return ["a note \x1b[2K that\nwraps " + "x " * 60]


def test_a_row_with_control_characters_still_fits_its_columns() -> None:
    table = _Rows(
        [
            {"a": "\x1b[2J", "b": "\x9b", "c": "after"},
            {"a": "plain", "b": "1", "c": ["after", "\x1b]8;;http://x/\x1b\\" * 20]},
        ]
    )
    lines = render_text(table, width=60).splitlines()

    assert raw_controls("\n".join(lines)) == []
    assert all(display_width(x) <= 60 for x in lines)
    assert r"\x1b]0;title\x07" in lines[0] and any(r"\x1b[2K" in x for x in lines)
    assert any("that wraps" in x for x in lines)  # a note's newline is a space, as a cell's
    rows = [x for x in lines if x.endswith("after")]
    # Each row's third column starts where the header's does: escapes are padded as text.
    header = next(x for x in lines if x.startswith("a "))
    assert [x.index("after") for x in rows] == [header.index("c")] * 2
    assert rows[0].startswith(r"\x1b[2J") and r"   \x9b " in rows[0]
