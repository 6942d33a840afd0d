"""A turn printed as a paired transcript for `threadlog demo`, and the thread as JSON.

Everything printed is terminal-safe; a message's text keeps its newlines and tabs, other
fields are one line. The JSON carries the exact text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from threadlog.log.messages import role_of
from threadlog.terminal import safe

# What a message's text keeps as it is: its own line breaks and tabs.
_PROSE = "\n\t"

__all__ = ["Transcript", "history_json", "messages_in"]


def messages_in(update: Any) -> list[BaseMessage]:
    if not isinstance(update, dict):
        return []
    found = update.get("messages") or []
    found = found if isinstance(found, list) else [found]
    return [m for m in found if isinstance(m, BaseMessage)]


class Transcript:
    """Prints a turn line by line: `role  text`, streaming the answer token by token."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._streaming = self._streamed = False
        self.usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        # Model calls, and those whose reply carried token usage.
        self.model_calls = self.usage_reported = 0

    def line(self, label: str, text: str, *, prose: bool = False) -> None:
        """`label  text`; `prose`: `text` is a message's text (keeps newlines and tabs)."""
        shown = safe(text, keep=_PROSE if prose else "")
        print(f"{safe(label):<11}{shown}", file=self.out, flush=True)

    def token(self, text: str) -> None:
        if not text:
            return
        if not self._streaming:
            self.out.write(f"{'assistant':<11}")
            self._streaming = self._streamed = True
        # Escaped one character at a time, so a sequence split across tokens is too.
        self.out.write(safe(text, keep=_PROSE))
        self.out.flush()

    def end_stream(self) -> None:
        if self._streaming:
            self.out.write("\n")
            self.out.flush()
            self._streaming = False

    def message(self, m: BaseMessage) -> None:
        self.end_stream()
        if isinstance(m, AIMessage):
            # The step cap's stop message is written by threadlog, not by the model.
            self.model_calls += 0 if m.response_metadata.get("threadlog_stop") else 1
            if m.usage_metadata:
                self.usage_reported += 1
                self.usage["input_tokens"] += m.usage_metadata["input_tokens"]
                self.usage["output_tokens"] += m.usage_metadata["output_tokens"]
                self.usage["total_tokens"] += m.usage_metadata["total_tokens"]
            if m.text and not self._streamed:
                self.line("assistant", m.text, prose=True)
            for call in [*m.tool_calls, *m.invalid_tool_calls]:
                args = call.get("args")
                shown = (
                    ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
                    if isinstance(args, dict)
                    else str(args)
                )
                self.line("assistant", f"→ {call.get('name')}({shown})  [{call.get('id')}]")
            self._streamed = False
        elif isinstance(m, ToolMessage):
            status = "  (error)" if m.status == "error" else ""
            # How long the tool ran (ToolNode records it): parallel calls finish out of order.
            ms = m.response_metadata.get("threadlog_duration_ms")
            took = f"  {ms:.0f} ms" if isinstance(ms, (int, float)) else ""
            self.line("tool", f"← [{m.tool_call_id}] {' '.join(m.text.split())}{status}{took}")
        else:
            self.line(role_of(m), m.text, prose=True)

    def usage_summary(self) -> str:
        # A server that reports no usage gets no made-up zeros.
        calls = f"{self.model_calls} model call{'s' if self.model_calls != 1 else ''}"
        if self.model_calls and not self.usage_reported:
            return f"usage not reported by the server ({calls})"
        u = self.usage
        partial = ""
        if self.usage_reported < self.model_calls:
            partial = f", usage reported for {self.usage_reported} of them"
        return (
            f"{u['input_tokens']} in · {u['output_tokens']} out · {u['total_tokens']} total "
            f"({calls}{partial})"
        )


def history_json(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Each message as `{"role": ..., **its LangChain fields}` (JSON-safe)."""
    return [{"role": role_of(m), **m.model_dump(mode="json")} for m in messages]
