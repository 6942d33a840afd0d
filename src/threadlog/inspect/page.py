"""One self-contained HTML page for a thread: turns, full content, call links, a waterfall.

`thread_html(thread)` is the fragment Jupyter shows; `thread_page(thread)` the document.

* Each branch (`ForkTree`) is its own section from its fork point.
* Checkpoints are grouped into turns (from each `input` checkpoint), each a `<details>`
  (the newest three open) summarizing the user's words, steps, tokens and time.
* A step row: step, checkpoint, the node(s) that wrote it (`__…__` writers hidden), time
  since its parent, its messages (a long one expands to full content). A tool call
  (`data-call-id`, `id="call-…"`) and its result (`id="result-…"`) link to each other.
* A model call shows model, latency and tokens when `ModelNode` recorded them; a turn with
  parallel tool calls or timed model calls gets a waterfall.
* A subgraph's namespace shows its own steps only; the messages it received from the
  enclosing graph are one line, "input from the enclosing graph: N messages".
* Per step, the other state keys that changed (`• key = value`) and messages appended
  under other message keys (`↳ key: …`).
* With `thread(..., calls=True)`, the recorded model calls (`threadlog.inspect.calls`)
  and the `BaseStore` items (`threadlog.inspect.store_items`) under their step.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from threadlog._upstream import PREGEL
from threadlog.inspect.calls import RecordedCall, calls_text, content_text
from threadlog.inspect.forks import ForkTree
from threadlog.inspect.pairs import ToolPairs
from threadlog.inspect.records import CheckpointRecord, parse_time, short
from threadlog.inspect.steps import (
    appended,
    compactions_added,
    describe_compaction,
    message_line,
    removed_since,
    short_id,
    text_of,
)
from threadlog.inspect.table import STYLE, Table, render_html
from threadlog.inspect.timeline import Timeline
from threadlog.log.messages import role_of
from threadlog.nodes.trace import record_of

if TYPE_CHECKING:
    from threadlog.inspect.thread import Thread

__all__ = ["thread_html", "thread_page"]


_OPEN_TURNS = 3  # the newest turns start expanded; older ones are one click away
_PREVIEW = 100


def _took(earlier: CheckpointRecord | None, later: CheckpointRecord) -> float | None:
    a, b = parse_time(earlier.created_at) if earlier else None, parse_time(later.created_at)
    return (b - a).total_seconds() if a and b else None


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def _content(m: BaseMessage) -> str:
    full = text_of(m)
    one = " ".join(full.split())
    if len(one) <= _PREVIEW and "\n" not in full.strip():
        return escape(one)
    return (
        f"<details><summary>{escape(one[: _PREVIEW - 1])}…</summary>"
        f"<pre>{escape(full)}</pre></details>"
    )


def _message(m: BaseMessage) -> str:
    role = role_of(m)
    mid = escape(m.id or "", quote=True)
    head = (
        f'<span class="r-{role}">{role}</span> '
        f'<span class="tl-meta" title="{mid}">{escape(short_id(m.id))}</span>'
    )
    parts = [f'<div class="tl-msg" id="msg-{mid}">{head} ']
    if isinstance(m, ToolMessage):
        cid = escape(m.tool_call_id, quote=True)
        err = ' <span class="r-error">⚠error</span>' if m.status == "error" else ""
        parts.append(
            f'<a class="tl-call" id="result-{cid}" href="#call-{cid}" data-call-id="{cid}" '
            f'title="{cid}">← [{escape(m.tool_call_id)}]</a>{err} '
        )
    parts.append(_content(m))
    if isinstance(m, AIMessage):
        for c in m.tool_calls:
            cid = escape(str(c.get("id")), quote=True)
            args = ", ".join(f"{k}={v!r}" for k, v in (c.get("args") or {}).items())
            parts.append(
                f'<div>→ <a class="tl-call" id="call-{cid}" href="#result-{cid}" '
                f'data-call-id="{cid}" title="{cid}">{escape(str(c.get("name")))}'
                f"({escape(args)}) [{escape(str(c.get('id')))}]</a></div>"
            )
        timing, u = record_of(m), m.usage_metadata
        cached = (u.get("input_token_details") or {}).get("cache_read") if u else None
        facts = [
            str(timing.get("model") or ""),
            f"{float(timing['latency_ms']):.0f} ms" if timing.get("latency_ms") is not None else "",
            f"{u['input_tokens']} in · {u['output_tokens']} out" if u else "",
            f"{cached} cached" if cached else "",
        ]
        if facts := [f for f in facts if f]:
            parts.append(f'<div class="tl-meta">model call: {escape(" · ".join(facts))}</div>')
    parts.append("</div>")
    return "".join(parts)


def _writers(rec: CheckpointRecord) -> str:
    names = [w for w in rec.writers if not (w.startswith("__") and w.endswith("__"))]
    return escape(", ".join(names) or rec.source)


def _turns(records: list[CheckpointRecord]) -> list[list[CheckpointRecord]]:
    turns: list[list[CheckpointRecord]] = []
    for r in records:
        if r.source == "input" or not turns:
            turns.append([])
        turns[-1].append(r)
    return turns


def _waterfall(thread: Thread, turn: list[CheckpointRecord]) -> str:
    t0 = parse_time(turn[0].created_at)
    if t0 is None:
        return ""
    inherited = thread.inherited_ids()
    bars: list[tuple[str, str, float, float]] = []  # kind, label, start s, duration s
    durations = {
        r["call_id"]: r["duration_s"]
        for r in ToolPairs(thread, turn[-1].checkpoint_id).rows()
        if r["duration_s"] is not None
    }
    for rec in turn:
        parent = thread.parent(rec)
        start = parse_time(parent.created_at) if parent else None
        for m in appended(rec, parent) if parent else []:
            if m.id in inherited:
                continue
            timing = record_of(m)
            began = parse_time(str(timing.get("started_at") or ""))
            if isinstance(m, AIMessage) and began and timing.get("latency_ms") is not None:
                secs = float(timing["latency_ms"]) / 1000
                bars.append(("model", "model", (began - t0).total_seconds(), secs))
            if isinstance(m, ToolMessage) and start and m.tool_call_id in durations:
                label = f"{m.name or 'tool'} [{m.tool_call_id}]"
                took = float(durations[m.tool_call_id])
                bars.append(("tool", label, (start - t0).total_seconds(), took))
    tools = sum(1 for b in bars if b[0] == "tool")
    if not bars or (tools < 2 and not any(b[0] == "model" for b in bars)):
        return ""
    span = max(s + d for _, _, s, d in bars) or 1.0
    rows = []
    for kind, label, s, d in bars:
        left, width = 100 * max(s, 0) / span, max(100 * d / span, 0.3)
        rows.append(
            f'<div class="tl-wf-row"><span class="tl-wf-label" title="{escape(label, quote=True)}">'
            f"{escape(label)} · {_ms(d)}"
            f'</span><div class="tl-wf-track"><div class="tl-wf-bar {kind}" '
            f'style="left:{left:.2f}%;width:{width:.2f}%"></div></div></div>'
        )
    return (
        f'<div class="tl-wf" data-span-s="{span:.3f}"><div class="tl-meta">waterfall · '
        f"{_ms(span)} from the turn's input</div>{''.join(rows)}</div>"
    )


def _during(
    thread: Thread, rec: CheckpointRecord, parent: CheckpointRecord | None, entries: Any
) -> list[Any]:
    """The recorded entries (model calls, store operations) that started while `rec`'s step
    ran, in this namespace or below it."""
    if not entries or parent is None or rec.source != "loop":
        return []
    a, b = parse_time(parent.created_at), parse_time(rec.created_at)
    if a is None or b is None:
        return []
    lo, hi = a.timestamp(), b.timestamp()
    inside = thread.namespace + PREGEL.ns_sep if thread.namespace else ""
    return [e for e in entries if lo <= e.started <= hi and e.ns.startswith(inside)]


def _store(ops: list[Any]) -> str:
    if not ops:
        return ""
    reads = sum(not o.written for o in ops)
    return (
        f'<details class="tl-store"><summary>store · {reads} read(s), '
        f"{len(ops) - reads} write(s)</summary><ul>{''.join(o.html() for o in ops)}</ul>"
        "</details>"
    )


def _call(c: RecordedCall) -> str:
    where = f"{c.namespace} > {c.node}" if c.namespace else c.node
    lines = [
        f'<div class="tl-meta">{escape(m.get("role") or "?")}: '
        f"<pre>{escape(content_text(m.get('content')) + calls_text(m))}</pre></div>"
        for m in c.messages
    ]
    tools = f" · tools: {escape(', '.join(c.tools))}" if c.tools else ""
    system = c.system_prompt
    shown = f" · system: {escape(' '.join(system.split())[:80])}" if system else ""
    return (
        f'<details class="tl-model-call"><summary>model call · {escape(where)} · '
        f"{escape(c.model)}{tools} · {len(c.messages)} message(s) sent{shown}</summary>"
        f"{''.join(lines)}</details>"
    )


def _turn(
    thread: Thread, turn: list[CheckpointRecord], number: int, open_: bool, timeline: Timeline
) -> str:
    first_parent = thread.parent(turn[0])
    head = turn[-1]
    # With `last=N` the turn's parent may not be loaded.
    known = first_parent or (turn[0] if turn[0].parent_id else None)
    before = {m.id for m in known.messages} if known else set()
    inherited = thread.inherited_ids()  # a subgraph's input from the enclosing graph
    got = [m for m in head.messages if m.id not in before and m.id in inherited]
    new = [m for m in head.messages if m.id not in before and m.id not in inherited]
    users = [m for m in new if isinstance(m, HumanMessage)]
    said = " ".join(text_of(users[0]).split())[:80] if users else f"({turn[0].source})"
    if got and not users:
        said = f"{len(got)} message(s) from the enclosing graph"
    tokens = sum(
        int(m.usage_metadata["total_tokens"])
        for m in new
        if isinstance(m, AIMessage) and m.usage_metadata
    )
    took = _took(turn[0], head)
    rows = []
    for rec in turn:
        parent = thread.parent(rec)
        msgs = appended(rec, parent) if (parent or rec.parent_id is None) else []
        events = []
        if given := [m for m in msgs if m.id in inherited]:
            events.append(
                f'<div class="tl-meta tl-input">input from the enclosing graph: '
                f"{len(given)} message(s)</div>"
            )
        events += [_message(m) for m in msgs if m.id not in inherited]
        events += [
            f'<div class="r-compaction">{escape(describe_compaction(e))}</div>'
            for e in compactions_added(rec, parent)
        ]
        events += [  # hidden from the state by this step's RemoveMessage; the log keeps it
            f'<div class="r-removed">removed {escape(message_line(m))} (RemoveMessage by '
            f"{escape(', '.join(rec.writers) or '?')})</div>"
            for m in removed_since(rec, parent)
        ]
        events += [_call(c) for c in _during(thread, rec, parent, thread.recorded)]
        if store := _store(_during(thread, rec, parent, thread.store_used)):
            events.append(store)
        events += [
            f'<div class="tl-state">{escape(line)}</div>'
            for line in timeline.state_lines[rec.checkpoint_id]
        ]
        events += [
            f'<div class="r-error">⚠ {escape(e.task)} failed: {escape(e.error)}</div>'
            for e in rec.errors
        ]
        events += [f'<div class="r-error">⚠ interrupt: {escape(i)}</div>' for i in rec.interrupts]
        if rec.paused:
            events.append(f'<div class="tl-meta tl-paused">⏸ {escape(rec.paused)}</div>')
        if not events:
            continue  # an input checkpoint: its message shows in the next step
        cid = escape(rec.checkpoint_id, quote=True)
        rows.append(
            f'<tr id="ckpt-{cid}"><td class="num">{rec.step}</td>'
            f'<td title="{cid}">{escape(short(rec.checkpoint_id))}</td>'
            f'<td>{_writers(rec)}</td><td class="num">{_ms(_took(parent, rec))}</td>'
            f"<td>{''.join(events)}</td></tr>"
        )
    table = (
        "<table><thead><tr><th>step</th><th>ckpt</th><th>wrote</th><th>took</th>"
        f"<th>messages · events</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    summary = (
        f"turn {number} · {escape(said)} · {len(turn)} checkpoints · {tokens} tokens · {_ms(took)}"
    )
    return (
        f'<details class="tl-turn"{" open" if open_ else ""}><summary>{summary}</summary>'
        f"{_waterfall(thread, turn)}{table}</details>"
    )


def thread_html(thread: Thread, extra: Sequence[Table] = ()) -> str:
    tree = ForkTree(thread)
    parts = [STYLE, '<div class="threadlog-inspect tl-page">']
    parts.append(f'<div class="tl-title">{escape(thread.label)}</div>')
    timeline = Timeline(thread, thread.records)
    parts.extend(f'<div class="tl-summary">{escape(s)}</div>' for s in timeline.summary())
    for branch in tree.branches:
        where = (
            "from the root"
            if branch.forked_from is None
            else f"forked from #{branch.parent_branch} at step {branch.forked_from.step} "
            f"({short(branch.forked_from.checkpoint_id)})"
        )
        parts.append(
            f'<section class="tl-branch" data-branch="{branch.number}" '
            f'style="margin-left:{16 * branch.depth}px">'
            f'<div class="tl-branch-head">branch #{branch.number} · {escape(where)} · '
            f"head {escape(short(branch.head.checkpoint_id))}</div>"
        )
        turns = _turns(branch.records)
        for i, turn in enumerate(turns):
            parts.append(_turn(thread, turn, i + 1, i >= len(turns) - _OPEN_TURNS, timeline))
        parts.append("</section>")
    parts.append(render_html(ToolPairs(thread)))
    parts.extend(render_html(t) for t in extra)  # e.g. what the model saw for one call
    parts.append("</div>")
    return "".join(parts)


def thread_page(thread: Thread, title: str | None = None, extra: Sequence[Table] = ()) -> str:
    name = title or thread.label
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{escape(name)}</title>'
        "<style>body .threadlog-inspect{font-size:14px}</style>"
        f'</head><body style="background:#fff;margin:16px">{thread_html(thread, extra)}'
        "</body></html>"
    )
