"""The `BaseStore` items each step read and wrote are stored with the step
(`threadlog.checkpoint.store_ops`) and shown by `threadlog inspect --store [--json]`, the
HTML page and the notebook view: a memory app written as langchain-ai/memory-agent writes
it (`get_store().search`, `runtime.store.put` / `get`), on SQLite and Postgres, with an
`InMemoryStore` and with a store in the same database."""

from __future__ import annotations

import json
from typing import Any

import pytest

import threadlog
from tests.helpers import store_apps as apps
from threadlog.cli import main
from threadlog.inspect.store_items import store_items


def store_json(capsys: pytest.CaptureFixture[str], url: str, thread_id: str) -> list[Any]:
    capsys.readouterr()
    assert main(["inspect", "--db", url, "--thread", thread_id, "--store", "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["memory", "database"])
def test_inspect_store_lists_what_each_step_searched_put_and_got(
    kind: str, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with threadlog.checkpointer(backend) as saver, apps.store_for(kind, backend) as store:
        graph = apps.memory_agent(saver, store)
        apps.turn(graph, "m", "I like tea")
        apps.turn(graph, "m", "I live in Oslo")
    ops = store_json(capsys, backend, "m")
    # Per turn: call_model searches, store_memory puts then gets, call_model searches.
    assert [(o["node"], o["op"]) for o in ops] == [
        ("call_model", "search"), ("store_memory", "put"), ("store_memory", "get"),
        ("call_model", "search"),
    ] * 2
    assert all(o["store_namespace"] == ["memories", "ada"] for o in ops)
    first = {"content": "user said I like tea", "context": "turn 1"}
    assert ops[0]["items"] == [] and ops[0]["query"] == "what matters"
    assert ops[1]["key"] == "mem-1" and ops[1]["value"] == first
    assert ops[2]["found"] is True and ops[2]["value"] == first
    assert ops[3]["items"] == [
        {"namespace": ["memories", "ada"], "key": "mem-1", "value": first}
    ]
    # The second turn's first search read the memory the first turn wrote.
    assert [i["key"] for i in ops[4]["items"]] == ["mem-1"]
    assert sorted(i["key"] for i in ops[7]["items"]) == ["mem-1", "mem-2"]
    steps = [o["step"] for o in ops[:4]]
    assert steps == sorted(steps) and len(set(steps)) == 3  # each with its own step
    text_code = main(["inspect", "--db", backend, "--thread", "m", "--store"])
    text = capsys.readouterr().out
    assert text_code == 0
    assert "store items of thread m (6 read(s), 2 write(s))" in text
    assert "put memories/ada [mem-2]" in text
    assert "user said I live in Oslo" in text


def test_a_memory_read_every_turn_is_stored_once(tmp_path: Any) -> None:
    from threadlog.checkpoint.call_records import CALLS_CHANNEL
    from threadlog.inspect.calls import thread_tuples

    url = f"sqlite:///{tmp_path / 'grow.db'}"
    with threadlog.checkpointer(url) as saver, apps.store_for("memory", url) as store:
        graph = apps.memory_agent(saver, store)
        for k in range(12):
            apps.turn(graph, "g", f"fact {k} " + "z" * 1500)
    values = [
        v for t in thread_tuples(url, "g") for _, ch, v in t.pending_writes or ()
        if ch == CALLS_CHANNEL
    ]
    stored_values = [
        json.dumps(b) for v in values for b in v["blobs"].values() if b["k"] == "store_value"
    ]
    records = [json.dumps(v.get("store", [])) for v in values]
    # 12 memories of ~1.5 KB, each read again by every later turn's searches: each value
    # stored once, a read of it is a reference.
    assert len(stored_values) == 12
    assert sum(map(len, stored_values)) < 12 * 1600
    assert sum(map(len, records)) < 12 * 4 * 1000
    ops = store_items(url, "g")
    assert len(ops) == 12 * 4
    assert len(ops[-1].items) == 10  # the app's limit
    assert not any(i["value"] == {"missing": True} for o in ops for i in o.items)


def test_store_items_are_escaped_in_the_terminal_json_and_html(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'esc.db'}"
    with threadlog.checkpointer(url) as saver, apps.store_for("memory", url) as store:
        graph = apps.memory_agent(saver, store)
        apps.turn(graph, "e", "<script>x</script> \x1b[2J\u202eevil\x85")
    assert main(["inspect", "--db", url, "--thread", "e", "--store"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\u202e" not in text and "\x85" not in text
    raw_ops = store_json(capsys, url, "e")
    assert raw_ops[1]["value"]["content"] == "user said <script>x</script> \x1b[2J\u202eevil\x85"
    html = store_items(url, "e")._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_a_graph_without_a_store_records_none_and_reads_as_before(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import recorded_apps

    url = f"sqlite:///{tmp_path / 'none.db'}"
    with threadlog.checkpointer(url) as saver:
        recorded_apps.one_turn(recorded_apps.own_node(saver), "n", "hi", user_name="Ada")
    assert store_json(capsys, url, "n") == []
    assert main(["inspect", "--db", url, "--thread", "n", "--store"]) == 0
    assert "none recorded" in capsys.readouterr().out


def test_the_html_page_and_the_notebook_show_the_items_under_each_step(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'page.db'}"
    with threadlog.checkpointer(url) as saver, apps.store_for("memory", url) as store:
        graph = apps.memory_agent(saver, store)
        apps.turn(graph, "p", "I like <b>tea</b>")
    page = tmp_path / "p.html"
    assert main(["inspect", "--db", url, "--thread", "p", "--html", str(page)]) == 0
    html = page.read_text()
    # Three steps used the store: a search; a put and a get; a search finding the memory.
    assert html.count('class="tl-store"') == 3
    assert html.count("class='tl-store-op'") == 4
    assert "store · 1 read(s), 1 write(s)" in html
    assert "user said I like &lt;b&gt;tea&lt;/b&gt;" in html and "<b>tea</b>" not in html
    notebook = threadlog.inspect.thread(url, "p", calls=True)._repr_html_()
    assert notebook.count('class="tl-store"') == 3


def test_an_async_app_with_an_injected_store_records_its_items(backend: str) -> None:
    import asyncio

    from langchain_core.messages import HumanMessage
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()

    async def run() -> None:
        async with threadlog.acheckpointer(backend) as saver:
            graph = apps.async_memory_agent(saver, store)
            for text in ("I like tea", "I live in Oslo"):
                await graph.ainvoke(
                    {"messages": [HumanMessage(text)]},
                    {"configurable": {"thread_id": "a"}}, context={"user_id": "ada"},
                )

    asyncio.run(run())
    ops = store_items(backend, "a")
    assert [(o.node, o.op) for o in ops] == [
        ("call_model", "search"), ("store_memory", "put"), ("call_model", "search"),
    ] * 2
    assert [i["key"] for i in ops[3].items] == ["mem-1"]
    assert ops[4].value == {"content": "user said I live in Oslo", "context": "turn 2"}
