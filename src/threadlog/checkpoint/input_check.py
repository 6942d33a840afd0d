"""Input checks at the storage edge: a bad turn input is refused before anything is stored.

LangGraph stores a turn's input before any reducer sees it, so `InputCheck` dry-runs the
`message_keys` of an input checkpoint's `__start__` value, of the `__start__` task's writes
and of `update_state`'s writes on the log at the checkpoint the input lands on (the history
cache's, when it holds it: O(the input)), raising the log's own error (each message's text
at most `max_chars` when set). `refused_flow`: the tasks whose stored writes the log would
refuse, so `get_state` shows the last good state with the error on the task.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.serde.types import ERROR

from threadlog._upstream import PREGEL, achannels_from_checkpoint, channels_from_checkpoint
from threadlog.channel import MessageLogChannel
from threadlog.checkpoint.cache import history_cache_of
from threadlog.errors import InvalidMessageError, MessageLogError
from threadlog.flows import Flow, Io, call
from threadlog.log.edits import is_edit, is_update
from threadlog.log.message_log import MessageLog, flatten_write
from threadlog.log.messages import coerce_message, role_of
from threadlog.log.removals import is_removal

__all__ = ["InputCheck"]


@dataclass(frozen=True)
class InputCheck:
    message_keys: tuple[str, ...] = ("messages",)
    max_chars: int | None = None

    def from_input_checkpoint(self, start_value: Any) -> dict[str, Any]:
        start = start_value if isinstance(start_value, Mapping) else {}
        return {k: start[k] for k in self.message_keys if k in start}

    def from_start_writes(self, writes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
        return {c: v for c, v in writes if c in self.message_keys}

    def check_flow(
        self,
        saver: BaseCheckpointSaver[Any],
        at: RunnableConfig | None,
        values: dict[str, Any],
        base: str | None = None,
    ) -> Flow[None]:
        """Dry-run `values` onto the logs at `at` (`base`: the same logs' checkpoint id, cached)."""
        if values:
            logs = _cached_logs(saver, at, base, list(values))
            if logs is None:
                logs = yield from _logs_at(saver, at, list(values))
            self._check_against(logs, values)

    def _check_against(self, logs: dict[str, MessageLog], values: dict[str, Any]) -> None:
        for key, value in values.items():
            if key not in logs:
                continue  # stored as a plain list: not a threadlog log (add_messages)
            log = logs[key]  # checked with dry_run=True: never changed, so never copied
            items = flatten_write(value)
            for i, raw in enumerate(items):
                if is_edit(raw) or is_removal(raw):
                    continue  # the log's dry run below checks an edit or a removal
                if is_update(raw):  # update_state's message (`threadlog.log.edits.update_item`)
                    raw = raw.get("message")
                msg = _coerce(raw, len(log) + i)
                if self.max_chars is not None:
                    self._check_size(msg, len(log) + i)
            log.extend_writes([items], dry_run=True)  # raises the log's own error

    def refused_flow(
        self,
        saver: BaseCheckpointSaver[Any],
        saved: CheckpointTuple,
        keys: Collection[str] | None = None,
    ) -> Flow[dict[str, MessageLogError]]:
        """Tasks whose stored writes on `saved` the log refuses; `keys`: threadlog's log keys."""
        log_keys = tuple(k for k in self.message_keys if keys is None or k in keys)
        by_task = _message_writes(saved, log_keys)
        if not by_task:
            return {}
        keys = list({k for ws in by_task.values() for k in ws})
        logs = yield from _loaded_logs(saver, saved, keys)
        return _refused(logs, by_task)

    def _check_size(self, msg: BaseMessage, position: int) -> None:
        assert self.max_chars is not None
        size = len(msg.text) if isinstance(msg.content, list) else len(str(msg.content))
        if size > self.max_chars:
            raise InvalidMessageError(
                f"content is {size} characters, over the limit of {self.max_chars}",
                message_id=msg.id,
                role=role_of(msg),
                position=position,
                fix="send a shorter message, or raise max_input_chars of threadlog.checkpointer()",
            )


def _coerce(raw: Any, position: int) -> BaseMessage:
    try:
        return coerce_message(raw, position=position, rekeyable=True)
    except MessageLogError:
        raise
    except (ValueError, TypeError) as exc:
        # e.g. pydantic's ValidationError for content=42: name the message and field.
        detail = " ".join(line.strip() for line in str(exc).strip().splitlines()[:3])
        raise InvalidMessageError(
            f"malformed message: {detail}",
            message_id=raw.get("id") if isinstance(raw, Mapping) else None,
            position=position,
            fix="content is a string or a list of content blocks",
        ) from exc


def _logs_at(
    saver: BaseCheckpointSaver[Any], at: RunnableConfig | None, keys: list[str]
) -> Flow[dict[str, MessageLog]]:
    """The logs of checkpoint `at` as LangGraph reads them, other reducers' keys left out."""
    saved = (yield from call(saver, "get_tuple", at)) if at is not None else None
    if saved is None and at is not None and at["configurable"].get("checkpoint_id"):
        # The `__start__` writes can reach the saver before their checkpoint (both saved
        # in the background); that checkpoint holds the head's log.
        head = {k: v for k, v in at["configurable"].items() if k != "checkpoint_id"}
        saved = yield from call(saver, "get_tuple", {"configurable": head})
    if saved is None:
        return {k: MessageLog() for k in keys}
    return (yield from _loaded_logs(saver, saved, keys))


def _cached_logs(
    saver: BaseCheckpointSaver[Any], at: RunnableConfig | None, base: str | None, keys: list[str]
) -> dict[str, MessageLog] | None:
    """The logs at `base` straight from the history cache, when it holds exactly them."""
    if at is None or base is None:
        return None
    cache = history_cache_of(saver)  # through wrappers that delegate attributes
    if cache is None:
        return None
    conf = at["configurable"]
    out: dict[str, MessageLog] = {}
    for key in keys:
        entry = cache.get((str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")), key))
        if entry is None or entry[0] != base:
            return None  # not cached, or cached at another checkpoint
        # Past `base` the live log holds only this run's writes: the input among them replays.
        out[key] = entry[1]
    return out


def _loaded_logs(
    saver: BaseCheckpointSaver[Any], saved: CheckpointTuple, keys: list[str]
) -> Flow[dict[str, MessageLog]]:
    stored = saved.checkpoint["channel_values"]
    ours = [k for k in keys if not isinstance(stored.get(k), list)]
    specs = {k: MessageLogChannel() for k in ours}
    kwargs = {"saver": saver, "config": saved.config}
    channels, _ = yield Io(
        channels_from_checkpoint, achannels_from_checkpoint, (specs, saved.checkpoint), kwargs
    )
    # The log itself, not an O(history) copy: the check is a dry run that only reads it.
    return {k: ch.log if (ch := channels[k]).is_available() else MessageLog() for k in ours}


def _message_writes(
    saved: CheckpointTuple, keys: tuple[str, ...]
) -> dict[str, dict[str, list[Any]]]:
    """task id -> key -> its stored writes there (tasks that failed or wrote none left out)."""
    failed = {t for t, c, _ in saved.pending_writes or () if c == ERROR}
    out: dict[str, dict[str, list[Any]]] = {}
    for task_id, channel, value in saved.pending_writes or ():
        if channel in keys and task_id != PREGEL.null_task_id and task_id not in failed:
            out.setdefault(task_id, {}).setdefault(channel, []).append(value)
    return out


def _refused(
    logs: dict[str, MessageLog], by_task: dict[str, dict[str, list[Any]]]
) -> dict[str, MessageLogError]:
    """The tasks whose own writes the log refuses, or every writer when only all together fail."""

    def attempt(tasks: list[str]) -> MessageLogError | None:
        for key, log in logs.items():
            writes = [[m for v in by_task[t].get(key, ()) for m in flatten_write(v)] for t in tasks]
            try:
                log.extend_writes([w for w in writes if w], single_writer=True, dry_run=True)
            except MessageLogError as exc:
                return exc
        return None

    tasks = list(by_task)
    together = attempt(tasks)
    if together is None:
        return {}
    alone = {t: err for t in tasks if (err := attempt([t])) is not None}
    return alone or dict.fromkeys(tasks, together)
