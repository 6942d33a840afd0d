"""`ContextSeen`: for one model call, the exact context it was given, next to the full log.

With recorded calls (`thread(..., calls=True)`) the context is what the call sent;
otherwise a rebuild by `ModelNode.context_for` (the graph's policy and prompt, else
`policy=` / `system_prompt=`) from the checkpoint where the AIMessage first appears.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from threadlog.context.policy import ContextPolicy
from threadlog.inspect.records import CheckpointRecord, short
from threadlog.inspect.steps import message_line, message_row
from threadlog.inspect.table import Cell, Column, Table
from threadlog.log.messages import digest
from threadlog.nodes.trace import prompt_text, record_of

if TYPE_CHECKING:
    from threadlog.inspect.thread import Thread
    from threadlog.nodes.model import ModelNode

__all__ = ["ContextSeen"]

_MARKS = {"kept": "✓", "changed": "✓", "added": "+", "hidden": "✂", "cut": "✂"}


def _as_messages(sent: list[dict[str, Any]]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for d in sent:
        kwargs: dict[str, Any] = {"id": d.get("id")}
        if d.get("name") is not None:
            kwargs["name"] = d["name"]
        content = d.get("content") if d.get("content") is not None else ""
        role = d.get("role")
        if role in ("system", "developer"):
            out.append(SystemMessage(content, **kwargs))
        elif role == "assistant":
            out.append(AIMessage(content, tool_calls=d.get("tool_calls") or [], **kwargs))
        elif role == "tool":
            status = d.get("status") or "success"
            out.append(
                ToolMessage(
                    content, tool_call_id=str(d.get("tool_call_id")), status=status, **kwargs
                )
            )
        else:
            out.append(HumanMessage(content, **kwargs))
    return out


def _find_call(thread: Thread, call: str | int, checkpoint: str | None) -> AIMessage:
    head = thread.get(checkpoint)
    calls = [m for m in head.messages if isinstance(m, AIMessage)]
    if isinstance(call, int):
        if not calls:
            raise LookupError(f"thread {thread.thread_id!r} has no model call to inspect yet")
        try:
            return calls[call]
        except IndexError:
            raise IndexError(
                f"model call {call} out of range: the log has {len(calls)} AIMessages"
            ) from None
    for m in calls:
        if m.id == call:
            return m
    raise LookupError(
        f"no AIMessage with id {call!r} in the log at {short(head.checkpoint_id)}; "
        f"model calls: {[m.id for m in calls]}"
    )


class ContextSeen(Table):
    columns = (
        Column("pos", "#", 4, ">"),
        Column("seen", "seen", 8),
        Column("ctx", "ctx#", 4, ">"),
        Column("message", "message (full log, in order; context-only messages first)"),
    )

    def __init__(
        self,
        thread: Thread,
        call: str | int = -1,
        *,
        policy: ContextPolicy | None = None,
        system_prompt: str | None = None,
        checkpoint: str | None = None,
    ) -> None:
        self.thread = thread
        self.call = _find_call(thread, call, checkpoint)
        self.at = self._made_at(thread, checkpoint)
        log = self.at.messages
        idx = next(i for i, m in enumerate(log) if m.id == self.call.id)
        self.log: list[BaseMessage] = log[:idx]
        graph_node = thread.model_node()
        self.sent = self._sent(thread) if policy is None and system_prompt is None else None
        prompt, self.prompt_source = self._prompt(graph_node, system_prompt)
        self.assumed_policy = policy is None and graph_node is None
        node = graph_node
        if node is None or policy is not None or node.choose_prompt or prompt != node.system_prompt:
            from threadlog.nodes.model import ModelNode

            node = ModelNode(
                None,
                system_prompt=prompt,
                context=policy or (graph_node.policy if graph_node is not None else None),
                repair=graph_node.repair if graph_node is not None else "error-result",
            )
        self.assumed = self.assumed_policy or self.prompt_source == "assumed"
        self.node = node
        self.view = node.plan_for(self.log, self.at.compactions)
        self.context: list[BaseMessage] = node.context_for(self.log, self.at.compactions)
        if self.sent is not None:
            self.context = _as_messages(self.sent.messages)
            self.prompt_source, self.assumed_policy, self.assumed = "call", False, False
        self.context_tokens = count_tokens_approximately(self.context)
        self.log_tokens = count_tokens_approximately(self.log)
        self._rows = self._build()
        self.title = (
            f"{thread.label} · what the model saw for {self.call.id} "
            f"(step {self.at.step}, {short(self.at.checkpoint_id)})"
        )

    def _sent(self, thread: Thread) -> Any:
        recorded = getattr(thread, "recorded", None)
        found = [c for c in recorded or () if c.reply_id == self.call.id]
        if not found or any(m.get("missing") for m in found[-1].messages):
            return None
        return found[-1]

    def _prompt(self, graph_node: ModelNode | None, given: str | None) -> tuple[str | None, str]:
        """The system prompt this call was sent, and where: "given", "recorded", "graph" or
        "assumed"."""
        if given is not None:
            return given, "given"
        rec = record_of(self.call)
        if "system_prompt_digest" in rec or (rec and rec.get("system_prompt") is None):
            text = prompt_text(self.log, rec)
            if text is not None or rec.get("system_prompt") is None:
                return text, "recorded"
        if graph_node is not None and graph_node.choose_prompt is None:
            fixed = graph_node.system_prompt
            return (fixed if isinstance(fixed, str) else None), "graph"
        return None, "assumed"

    def _made_at(self, thread: Thread, checkpoint: str | None) -> CheckpointRecord:
        for rec in thread.path(checkpoint):
            if any(m.id == self.call.id for m in rec.messages):
                return rec
        raise LookupError(f"AIMessage {self.call.id!r} not found on the path")  # unreachable

    def _build(self) -> list[dict[str, Any]]:
        in_ctx: dict[str | None, tuple[int, BaseMessage]] = {
            m.id: (i, m) for i, m in enumerate(self.context) if m.id is not None
        }
        log_ids = {m.id for m in self.log}
        hidden = set(self.view.hidden) if self.sent is None else set()
        rows: list[dict[str, Any]] = [
            {"part": "context-only", "log_index": None, "context_index": i, "seen": "added"}
            | message_row(m)
            for i, m in enumerate(self.context)
            if m.id is None or m.id not in log_ids
        ]
        for pos, m in enumerate(self.log):
            hit = in_ctx.get(m.id)
            seen = "hidden" if m.id in hidden else "cut"
            if hit is not None:
                seen = "kept" if digest(hit[1]) == digest(m) else "changed"
            rows.append(
                {
                    "part": "log",
                    "log_index": pos,
                    "context_index": hit[0] if hit else None,
                    "seen": seen,
                    **message_row(m),
                }
            )
        return rows

    @property
    def seen_ids(self) -> list[str | None]:
        return [m.id for m in self.context]

    def summary(self) -> list[str]:
        if self.sent is not None:
            where = self.sent.node + (f" in {self.sent.namespace}" if self.sent.namespace else "")
            return [
                f"sent {len(self.context)} messages ≈{self.context_tokens} tokens · full log "
                f"{len(self.log)} messages ≈{self.log_tokens} tokens",
                f"as the call recorded it: model {self.sent.model}, {where}",
                "system prompt: "
                + ("none sent" if self.sent.system_prompt is None else "in full below"),
            ]
        prompt = self.node._system
        out = [
            "rebuilt from the log by the context rules: no recorded call made this message",
            f"context {len(self.context)} messages ≈{self.context_tokens} tokens · "
            f"full log {len(self.log)} messages ≈{self.log_tokens} tokens · "
            f"{len(self.at.compactions)} compaction event(s) · cut_to {self.view.cut_to or '-'}",
            *self._prompt_lines(prompt.id if prompt is not None else None),
        ]
        if self.assumed_policy:
            out += [
                f"policy assumed: max_turns={self.node.policy.max_turns} "
                f"max_tokens={self.node.policy.max_tokens} (ModelNode's default;",
                "the app's own policy is not stored with the thread)",
            ]
        return out + self._recorded()

    def _prompt_lines(self, prompt_id: str | None) -> list[str]:
        model = self.recorded.get("model")
        lines = [f"model {model} (recorded)"] if model else []
        if self.prompt_source == "assumed":
            sent = self.recorded.get("system_prompt")
            if sent:  # a fixed prompt: its id is recorded, its text is the app's code
                return [
                    *lines,
                    f"system prompt {sent} sent (fixed: its text is the app's code)",
                    "its text is not stored with the thread: this rebuild sends none",
                ]
            return [
                *lines,
                "system prompt: the run recorded none; this rebuild sends none",
            ]
        where = {"given": "given", "recorded": "read from the run's record", "graph": "the graph's"}
        return [*lines, f"system prompt {prompt_id or 'none'} ({where[self.prompt_source]})"]

    @property
    def recorded(self) -> dict[str, Any]:
        return dict(record_of(self.call))

    @property
    def matches_record(self) -> bool | None:
        """Whether the rebuilt context is what the run recorded sending (None: no record, or
        the recorded call itself is shown)."""
        rec = self.recorded
        if "context_messages" not in rec or self.sent is not None:
            return None
        prompt = self.node._system.id if self.node._system is not None else None
        return rec["context_messages"] == len(self.context) and rec.get("system_prompt") == prompt

    def _recorded(self) -> list[str]:
        rec, ok = self.recorded, self.matches_record
        if ok is None:
            return []
        if ok:
            return [f"the run recorded sending {rec['context_messages']} messages: the same"]
        return [
            f"⚠ the run recorded sending {rec['context_messages']} messages (system prompt "
            f"{rec.get('system_prompt') or 'none'});",
            f"this rebuild has {len(self.context)}: the app's policy or prompt is not the one "
            "assumed",
        ]

    def notes(self) -> list[str]:
        out = [
            "kept: sent as logged · cut: before the compaction cut or the policy's turn "
            "limit · hidden: an older unit of the newest turn over the token budget · "
            "added: in the context only (system prompt, summary)"
        ]
        prompt = self.sent.system_prompt if self.sent is not None else None
        if prompt is not None:
            out.append(f"system prompt sent: {prompt}")
        return out

    def display_rows(self) -> list[dict[str, Cell]]:
        by_id = {m.id: m for m in [*self.context, *self.log]}
        out: list[dict[str, Cell]] = []
        for r in self._rows:
            m = self.context[r["context_index"]] if r["part"] == "context-only" else by_id[r["id"]]
            ctx = r["context_index"]
            out.append(
                {
                    "pos": "-" if r["log_index"] is None else str(r["log_index"]),
                    "seen": _MARKS[r["seen"]] + " " + r["seen"],
                    "ctx": "-" if ctx is None else str(ctx),
                    "message": message_line(m, 80),
                }
            )
        return out
