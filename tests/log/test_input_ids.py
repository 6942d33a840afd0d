"""A run's input is stored with the ids its messages get in the log.

LangGraph stores the input checkpoint (`__start__` holds the caller's input) from a
background thread while step 0 writes the same message objects, and stamps a missing id on
each of them in place as it does: the stored input got the id or not by timing (seen as a
flake of LangGraph's own tool-node suite, `MemorySaverAssertImmutable`). threadlog stamps
the ids before the run's loop enters (`_upstream.on_run_input`), so what is stored is
settled before anything is stored. The saver below serializes the input checkpoint the
moment `put` is called, as every real saver does, and sleeps there to hold the race open;
it also notes the ids of the caller's messages when the run's loop reads the thread (before
step 0 exists), which tells a settled id from a lucky one whatever the timing.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from pydantic import BaseModel

import threadlog
from threadlog import MessagesState


class InputRecordingSaver(InMemorySaver):
    """Keeps the serialized `__start__` value of each input checkpoint as `put` sees it."""

    def __init__(self, watch: list[Any]) -> None:
        super().__init__()
        self.inputs: list[tuple[str, bytes]] = []
        self.watch = watch  # the caller's message objects
        self.ids_when_read: list[list[str | None]] = []

    def get_tuple(self, config: Any) -> Any:
        self.ids_when_read.append([m.id for m in self.watch])
        return super().get_tuple(config)

    async def aget_tuple(self, config: Any) -> Any:
        self.ids_when_read.append([m.id for m in self.watch])
        return await super().aget_tuple(config)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if metadata.get("source") == "input":
            self.inputs.append(self.serde.dumps_typed(checkpoint["channel_values"]["__start__"]))
            time.sleep(0.05)  # step 0 runs meanwhile under durability="async"
        return super().put(config, checkpoint, metadata, new_versions)

    def stored_inputs(self) -> list[Any]:
        return [self.serde.loads_typed(blob) for blob in self.inputs]


def _answer(state: MessagesState) -> dict[str, list[AnyMessage]]:
    return {"messages": [AIMessage("ok", id=f"ai-{len(state['messages'])}")]}


def _graph(saver: InMemorySaver, schema: Any = MessagesState) -> Any:
    return StateGraph(schema).add_node("answer", _answer).add_edge(START, "answer").compile(
        checkpointer=saver
    )


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_the_stored_input_carries_the_id_the_log_gave_the_message(durability: str) -> None:
    sent = HumanMessage("hi")  # no id: LangGraph gives it one
    saver = InputRecordingSaver([sent])
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}

    out = graph.invoke({"messages": [sent]}, config, durability=durability)

    [stored] = saver.stored_inputs()
    logged = out["messages"][0]
    assert logged.id and sent.id == logged.id
    assert saver.ids_when_read[0] == [logged.id]
    assert [m.id for m in stored["messages"]] == [logged.id]
    # A fork from the input checkpoint replays the input with the same id, not a new one.
    first = list(graph.get_state_history(config))[-1]
    assert first.metadata["source"] == "input"
    fork = graph.invoke(None, first.config, durability=durability)
    assert fork["messages"][0].id == logged.id


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_the_stored_input_carries_the_ids_under_ainvoke(durability: str) -> None:
    sent = [HumanMessage("a"), HumanMessage("b", id="given")]
    saver = InputRecordingSaver(sent)
    graph = _graph(saver)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}

    out = await graph.ainvoke({"messages": sent}, config, durability=durability)

    [stored] = saver.stored_inputs()
    ids = [m.id for m in out["messages"][:2]]
    assert ids[1] == "given" and ids[0]
    assert saver.ids_when_read[0] == ids
    assert [m.id for m in stored["messages"]] == ids


class PydanticState(BaseModel):
    messages: threadlog.Messages = []


def test_a_pydantic_state_input_is_stored_with_its_ids() -> None:
    sent = HumanMessage("hi")
    saver = InputRecordingSaver([sent])
    graph = _graph(saver, PydanticState)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}

    out = graph.invoke(PydanticState(messages=[sent]), config)

    [stored] = saver.stored_inputs()
    logged = out["messages"][0]
    assert logged.id
    assert saver.ids_when_read[0] == [logged.id]
    assert [m.id for m in stored.messages] == [logged.id]


def test_a_message_dict_in_the_input_is_not_changed_and_gets_an_id_in_the_log() -> None:
    saver = InputRecordingSaver([])
    graph = _graph(saver)
    sent = {"role": "user", "content": "hi"}

    out = graph.invoke({"messages": [sent]}, {"configurable": {"thread_id": "t"}})

    assert sent == {"role": "user", "content": "hi"}  # the caller's dict is left alone
    assert out["messages"][0].id and out["messages"][0].content == "hi"


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_the_shipped_sqlite_checkpointer_stores_the_input_with_the_logs_ids(
    tmp_path: Any, durability: str
) -> None:
    url = f"sqlite:///{tmp_path / 'threads.db'}"
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    with threadlog.checkpointer(url) as saver:
        out = _graph(saver).invoke(
            {"messages": [HumanMessage("hi")]}, config, durability=durability
        )
    logged = out["messages"][0].id
    with threadlog.checkpointer(url) as reader:  # read back from the file
        first = list(reader.list(config))[-1]
        assert first.metadata["source"] == "input"
        stored = first.checkpoint["channel_values"]["__start__"]["messages"]
    assert logged and [m.id for m in stored] == [logged]
