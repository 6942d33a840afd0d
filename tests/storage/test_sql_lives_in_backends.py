"""SQL on LangGraph's tables, backend dispatch and saver unwrapping live in one package.

Issue 20 found SQL against LangGraph's tables in seven files, twelve sites choosing the
backend by `isinstance(conn, sqlite3.Connection)` or a module-name prefix, and four
helpers unwrapping a saver's `.inner` chain. Now `checkpoint/backends/` holds them all.
"""

from __future__ import annotations

from pathlib import Path

import threadlog
from tests.storage.sql_scan import scan

SRC = Path(threadlog.__file__).parent
BACKENDS = "checkpoint/backends/"


def test_sql_naming_langgraphs_tables_is_in_at_most_three_files_all_in_backends() -> None:
    found = scan(SRC)
    assert found["table_sql"], "the scan finds the backends' own SQL (it can fail)"
    assert len(found["table_sql"]) <= 3, found["table_sql"]
    assert [f for f in found["table_sql"] if not f.startswith(BACKENDS)] == []


def test_no_sql_at_all_outside_backends() -> None:
    assert [f for f in scan(SRC)["sql"] if not f.startswith(BACKENDS)] == []


def test_no_backend_dispatch_on_a_connection_class_or_module_name_outside_backends() -> None:
    assert [f for f in scan(SRC)["dispatch"] if not f.startswith(BACKENDS)] == []


def test_one_helper_unwraps_a_saver() -> None:
    assert scan(SRC)["unwrap"] == [BACKENDS + "base.py"]


def test_the_scan_flags_what_issue_20_found(tmp_path: Path) -> None:
    """The patterns catch the shapes the old modules had (so the tests above can fail)."""
    (tmp_path / "old.py").write_text(
        '"""A docstring may say SELECT from checkpoints."""\n'
        "import sqlite3\n"
        "def heads(saver, conn):\n"
        "    raw = vars(saver).get('inner')\n"
        "    if isinstance(conn, sqlite3.Connection):\n"
        "        return conn.execute(\n"
        "            'SELECT thread_id, count(*) '\n"
        "            'FROM checkpoints GROUP BY thread_id')\n"
        "    if type(raw).__module__.startswith('langgraph.checkpoint.postgres'):\n"
        "        return f\"SELECT {1} FROM writes\"\n"
    )
    (tmp_path / "prose.py").write_text('"""Reads from checkpoints."""\nX = "select a model"\n')
    found = scan(tmp_path)
    assert found == {
        "sql": ["old.py"], "table_sql": ["old.py"], "dispatch": ["old.py"], "unwrap": ["old.py"]
    }
