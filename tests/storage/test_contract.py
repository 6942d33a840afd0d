"""The saver's contract (the table in `threadlog.checkpoint`'s docstring) stays true to the
code: every layer it names is one the saver is built from, every layer has a promise, and
every test file it names exists."""

from __future__ import annotations

from pathlib import Path

import threadlog
import threadlog.checkpoint

TESTS = Path(__file__).resolve().parents[1]


def _rows() -> list[tuple[str, str, list[str]]]:
    doc = threadlog.checkpoint.__doc__ or ""
    lines = doc.splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("promise"))
    layer_at = lines[header].index("layer")
    tests_at = lines[header].index("proved by")
    rows: list[tuple[str, str, list[str]]] = []
    for line in lines[header + 2 :]:
        if not line.strip():
            break
        promise, layer = line[:layer_at].strip(), line[layer_at:tests_at].strip()
        files = [f.strip() for f in line[tests_at:].split(",") if f.strip()]
        if layer:
            rows.append((promise, layer, files))
        elif rows:  # a continuation line: more of the promise, more test files
            rows[-1][2].extend(files)
    return rows


def test_every_layer_of_the_saver_keeps_a_promise_of_the_contract(tmp_path: Path) -> None:
    with threadlog.checkpointer(f"sqlite:///{tmp_path / 'c.db'}") as saver:
        built = [layer.name for layer in saver.layers]  # type: ignore[attr-defined]
    named = {layer for _, layer, _ in _rows()}
    assert set(built) <= named, f"layers without a promise: {set(built) - named}"
    assert named - set(built) <= {"(all)", "(serde.py)", "(_upstream)", "(lifecycle.py)"}, (
        named - set(built)
    )


def test_every_test_file_the_contract_names_exists() -> None:
    rows = _rows()
    assert len(rows) >= 10
    present = {p.name for p in TESTS.rglob("test_*.py")}
    for promise, _, files in rows:
        assert files, f"no test named for {promise!r}"
        for name in files:
            assert name in present, f"{name} (for {promise!r}) is not a test file"
