"""Input checks at the storage edge: a bad turn input is refused before anything is stored.

Why here. LangGraph stores a turn's input twice before any reducer sees it: in the
*input checkpoint* (the raw value of the `__start__` channel) and as the `__start__`
task's writes on it. The message log's own checks run only afterwards, when the writes
are applied — so a malformed message, an unknown role or a forged `ToolMessage` used to
leave a stored checkpoint whose pending writes fail on every later read (the thread
could not even be shown). `InputCheck` runs the same checks first: it rebuilds the
thread's log at the checkpoint the input lands on (through LangGraph's own loader and
`MessageLogChannel`), dry-runs the append, and raises the log's own error — naming the
message, role and field — so the saver stores nothing.

Checked: the keys in `message_keys` of a `source="input"` checkpoint's `__start__`
value, and of the `__start__` task's writes; each message's text is at most
`max_chars` characters when that is set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.pregel._checkpoint import achannels_from_checkpoint, channels_from_checkpoint

from threadlog.channel import MessageLogChannel
from threadlog.errors import InvalidMessageError, MessageLogError
from threadlog.log import MessageLog, flatten_write
from threadlog.messages import coerce_message, role_of

__all__ = ["InputCheck"]


@dataclass(frozen=True)
class InputCheck:
    message_keys: tuple[str, ...] = ("messages",)
    max_chars: int | None = None

    def from_input_checkpoint(self, start_value: Any) -> dict[str, Any]:
        """The values to check in a new input checkpoint's `__start__` channel value."""
        if not isinstance(start_value, Mapping):
            return {}
        return {k: start_value[k] for k in self.message_keys if k in start_value}

    def from_start_writes(self, writes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
        """The values to check in the `__start__` task's writes."""
        return {c: v for c, v in writes if c in self.message_keys}

    def check(
        self, saver: BaseCheckpointSaver[Any], at: RunnableConfig | None, values: dict[str, Any]
    ) -> None:
        """Dry-run `values` onto the logs of checkpoint `at`; raise the log's error."""
        if values:
            self._check_against(_logs_at(saver, at, list(values)), values)

    async def acheck(
        self, saver: BaseCheckpointSaver[Any], at: RunnableConfig | None, values: dict[str, Any]
    ) -> None:
        if values:
            self._check_against(await _alogs_at(saver, at, list(values)), values)

    def _check_against(self, logs: dict[str, MessageLog], values: dict[str, Any]) -> None:
        for key, value in values.items():
            if key not in logs:
                continue  # stored as a plain list: not a threadlog log (add_messages)
            log = logs[key]  # a private copy (see _collect): the dry run may change it
            items = flatten_write(value)
            for i, raw in enumerate(items):
                msg = _coerce(raw, len(log) + i)
                if self.max_chars is not None:
                    self._check_size(msg, len(log) + i)
            log.extend(items)  # raises the log's own error; `log` is a throwaway copy

    def _check_size(self, msg: BaseMessage, position: int) -> None:
        assert self.max_chars is not None
        size = len(msg.text) if isinstance(msg.content, list) else len(str(msg.content))
        if size > self.max_chars:
            raise InvalidMessageError(
                f"content is {size} characters, over the limit of {self.max_chars}",
                message_id=msg.id,
                role=role_of(msg),
                position=position,
                fix="send a shorter message, or raise max_input_chars of "
                "threadlog.checkpointer()",
            )


def _coerce(raw: Any, position: int) -> BaseMessage:
    try:
        return coerce_message(raw, position=position)
    except MessageLogError:
        raise
    except (ValueError, TypeError) as exc:
        # e.g. pydantic's ValidationError for content=42: name the message and field.
        first = str(exc).strip().splitlines()
        detail = " ".join(line.strip() for line in first[:3])
        raise InvalidMessageError(
            f"malformed message: {detail}",
            message_id=raw.get("id") if isinstance(raw, Mapping) else None,
            position=position,
            fix="content is a string or a list of content blocks",
        ) from exc


def _logs_at(
    saver: BaseCheckpointSaver[Any], at: RunnableConfig | None, keys: list[str]
) -> dict[str, MessageLog]:
    """The message logs of checkpoint `at` as LangGraph reads them (empty on a new thread).

    A key whose checkpoint holds a plain list is some other reducer's (`add_messages`
    stores the whole list); it is left out, and its input is not checked here.
    """
    saved = saver.get_tuple(at) if at is not None else None
    if saved is None and at is not None and at["configurable"].get("checkpoint_id"):
        saved = saver.get_tuple(_latest(at))
    if saved is None:
        return {k: MessageLog() for k in keys}
    ours = _ours(saved, keys)
    channels, _ = channels_from_checkpoint(
        {k: MessageLogChannel() for k in ours}, saved.checkpoint, saver=saver, config=saved.config
    )
    return _collect(channels, ours)


async def _alogs_at(
    saver: BaseCheckpointSaver[Any], at: RunnableConfig | None, keys: list[str]
) -> dict[str, MessageLog]:
    saved = await saver.aget_tuple(at) if at is not None else None
    if saved is None and at is not None and at["configurable"].get("checkpoint_id"):
        saved = await saver.aget_tuple(_latest(at))
    if saved is None:
        return {k: MessageLog() for k in keys}
    ours = _ours(saved, keys)
    channels, _ = await achannels_from_checkpoint(
        {k: MessageLogChannel() for k in ours}, saved.checkpoint, saver=saver, config=saved.config
    )
    return _collect(channels, ours)


def _latest(at: RunnableConfig) -> RunnableConfig:
    # The `__start__` writes can reach the saver before their checkpoint does
    # (LangGraph saves both in the background); that checkpoint holds the same log as
    # the thread's head, so read the head.
    return {"configurable": {k: v for k, v in at["configurable"].items() if k != "checkpoint_id"}}


def _ours(saved: CheckpointTuple, keys: list[str]) -> list[str]:
    stored = saved.checkpoint["channel_values"]
    return [k for k in keys if not isinstance(stored.get(k), list)]


def _collect(channels: Mapping[str, Any], keys: list[str]) -> dict[str, MessageLog]:
    out: dict[str, MessageLog] = {}
    for k in keys:
        ch = channels[k]
        assert isinstance(ch, MessageLogChannel)
        # A private copy, taken under the channel's write lock: the log may be shared
        # with the run's own channel, which keeps appending while this check runs.
        out[k] = ch.snapshot() if ch.is_available() else MessageLog()
    return out
