"""`Thread.plot()`: a thread's growth at a glance — messages, context, storage, tool latency.

`.series` holds the numbers along the path to the head; `.figure` draws them with
matplotlib (the `notebooks` extra), shown inline in Jupyter; `.save(path)` writes it.
"""

from __future__ import annotations

import io
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage
from langchain_core.messages.utils import count_tokens_approximately

from threadlog.inspect.pairs import ToolPairs

if TYPE_CHECKING:
    from threadlog.inspect.thread import Thread

__all__ = ["ThreadPlot"]


class ThreadPlot:
    def __init__(self, thread: Thread) -> None:
        self.thread = thread
        path = thread.path()
        self.series: dict[str, list[Any]] = {
            "step": [r.step for r in path],
            "messages": [len(r.messages) for r in path],
            "stored_bytes": list(accumulate(r.stored_bytes or 0 for r in path))
            if thread.bytes_known
            else [],
            "context_tokens": [],
            "log_tokens": [],
            "tool_ms": [],
        }
        log = thread.head.messages
        for i, m in enumerate(log):
            if isinstance(m, AIMessage) and m.usage_metadata:
                self.series["context_tokens"].append(int(m.usage_metadata["input_tokens"]))
                self.series["log_tokens"].append(count_tokens_approximately(log[:i]))
        for row in ToolPairs(thread).rows():
            if row["duration_s"] is not None:
                self.series["tool_ms"].append(round(row["duration_s"] * 1000, 1))
        self._figure: Any = None

    @property
    def figure(self) -> Any:
        if self._figure is None:
            self._figure = self._draw()
        return self._figure

    def _draw(self) -> Any:
        try:
            from matplotlib.figure import Figure
        except ImportError as exc:
            raise ImportError(
                "Thread.plot() needs matplotlib: pip install 'threadlog[notebooks]'"
            ) from exc
        s = self.series
        fig = Figure(figsize=(10, 6), layout="constrained")
        (a, b), (c, d) = fig.subplots(2, 2)
        a.plot(s["step"], s["messages"], marker=".")
        a.set(title="messages in the log", xlabel="step")
        calls = list(range(1, len(s["context_tokens"]) + 1))
        b.plot(calls, s["context_tokens"], marker=".", label="context (provider's input tokens)")
        b.plot(calls, s["log_tokens"], linestyle="--", label="whole log (≈ tokens)")
        b.set(title="tokens per model call", xlabel="model call")
        b.legend(fontsize=8)
        if s["stored_bytes"]:
            c.plot(s["step"], [x / 1024 for x in s["stored_bytes"]], marker=".")
        c.set(title="stored kB along the path", xlabel="step")
        d.bar(range(1, len(s["tool_ms"]) + 1), s["tool_ms"])
        d.set(title="tool call duration (ms)", xlabel="tool call")
        fig.suptitle(f"thread {self.thread.thread_id}")
        return fig

    def save(self, path: str) -> None:
        self.figure.savefig(path, dpi=100)

    def _repr_png_(self) -> bytes:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        buf = io.BytesIO()
        FigureCanvasAgg(self.figure).print_png(buf)  # type: ignore[no-untyped-call]
        return buf.getvalue()

    def __repr__(self) -> str:
        s = self.series
        return (
            f"<ThreadPlot {self.thread.thread_id!r}: {len(s['step'])} steps, "
            f"{len(s['context_tokens'])} model calls, {len(s['tool_ms'])} tool calls>"
        )
