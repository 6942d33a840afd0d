"""The inspector's HTML: a thread page that groups turns and links calls, and styles that
win inside JupyterLab and the classic Notebook (checked in headless Chromium with their own
stylesheets, as nbconvert's `lab` and `classic` templates ship them)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.helpers.browser import computed, needs_chromium
from tests.helpers.inspect import CONFIG, ScriptedAgent, raw_saver, write_thread
from threadlog import inspect


@pytest.fixture
def forked(tmp_path: Path) -> inspect.Thread:
    """t-1: two turns (the first with two parallel calls), then a fork by update_state."""
    url = write_thread(f"sqlite:///{tmp_path / 'forked.db'}")
    return inspect.thread(url, "t-1")


def test_the_page_groups_turns_per_branch_and_links_each_call_to_its_result(
    forked: inspect.Thread,
) -> None:
    html = forked._repr_html_()

    branches = re.findall(r'<section class="tl-branch" data-branch="(\d+)"', html)
    assert branches == ["0", "1"]  # the fork is its own section, not interleaved
    main, fork = html.split('data-branch="1"')
    assert main.count('<details class="tl-turn"') == 2
    assert "turn 1 · Weather in Paris and Rome?" in main
    assert "turn 2 · thanks" in main
    assert "and Berlin?" in fork and "thanks" not in fork
    for cid in ("c-paris", "c-rome"):  # full ids in the markup, linked both ways
        assert f'id="call-{cid}" href="#result-{cid}" data-call-id="{cid}"' in html
        assert f'id="result-{cid}" href="#call-{cid}"' in html
    assert "__" not in "".join(re.findall(r"<td>([^<]*)</td>", html))  # no internal writers
    assert "waterfall" in main  # the parallel step


def test_long_content_is_complete_in_the_page(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'long.db'}"
    with raw_saver(url) as saver:
        graph = ScriptedAgent().build(saver)
        for q in ("Weather in Paris and Rome?", "thanks", "北京呢？"):
            graph.invoke({"messages": [("user", q)]}, CONFIG)  # type: ignore[arg-type]
    t = inspect.thread(url, "t-1")
    answer = t.head.messages[-1].text
    assert len(answer) > 100

    html = t._repr_html_()
    assert f"<pre>{answer}</pre>" in html  # expandable, whole
    assert html.count("<details class=\"tl-turn\" open>") == 3


@needs_chromium
@pytest.mark.parametrize(
    ("template", "output_class"),
    [("lab", "jp-RenderedHTMLCommon"), ("classic", "rendered_html")],  # JupyterLab, Notebook 6
)
def test_notebook_stylesheets_do_not_right_align_the_inspector_tables(
    forked: inspect.Thread, template: str, output_class: str
) -> None:
    from nbconvert import HTMLExporter

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("t")
    views = [forked.timeline(), forked.pairs(), forked.forks(), forked]
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": v._repr_html_()})
        for v in views
    ]
    # A plain table next to ours: JupyterLab's rule must be in force for the check to mean
    # anything.
    cell.outputs.append(
        nbformat.v4.new_output(
            "display_data", data={"text/html": '<table class="control"><tr><td>x</td></tr></table>'}
        )
    )
    nb.cells = [cell]
    page, _ = HTMLExporter(template_name=template).from_notebook_node(nb)

    aligns = computed(
        page,
        """
        function of(sel){return Array.from(document.querySelectorAll(sel)).map(
          function(e){return getComputedStyle(e).textAlign;});}
        return {ours: of('.threadlog-inspect td:not(.num), .threadlog-inspect th'),
                numbers: of('.threadlog-inspect td.num'),
                control: of('table.control td'),
                inside: document.querySelectorAll('.OUTPUT .threadlog-inspect').length};
        """.replace("OUTPUT", output_class),
    )
    assert aligns["control"] == ["right"]  # the notebook right-aligns a plain table...
    assert aligns["inside"] >= 4
    assert len(aligns["ours"]) > 20 and set(aligns["ours"]) == {"left"}  # ...but not ours
    assert set(aligns["numbers"]) == {"right"}


@needs_chromium
def test_the_page_of_a_forked_thread_screenshots_with_content(
    forked: inspect.Thread, tmp_path: Path
) -> None:
    import matplotlib.image

    from tests.helpers.browser import screenshot

    png = screenshot(forked.html(), tmp_path / "page.png", width=1000, height=900)

    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (900, 1000)
    # Not a blank page: text, the waterfall's coloured bars, the turn boxes.
    colours = {tuple(p) for p in (pixels[::7, ::7, :3] * 255).astype(int).reshape(-1, 3)}
    assert len(colours) > 20
    purple = ((pixels[..., 0] > 0.4) & (pixels[..., 1] < 0.45) & (pixels[..., 2] > 0.75)).sum()
    assert purple > 1500  # the two parallel tool calls' bars (~3500; the text alone ~100)
