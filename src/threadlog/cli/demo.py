"""`threadlog demo`: one turn of the weather agent, printed as a paired transcript.

* Runs `threadlog.examples.weather.build_graph` with `OfflineChatModel` unless `--model
  openai:MODEL`, on `threadlog.checkpointer(--db)` (default `threadlog-demo.db`); without
  `--thread` a new thread starts. `--json` prints the thread's whole history instead.
* Bad input is one line on stderr, exit 2; an unreachable endpoint, a failing database or a
  server failure is one line, exit 1 (`threadlog.models.servers.explain_failure`).
* An answer whose text reads as a call to one of the agent's tools gets one hint line on
  stderr naming the server's chat template; the exit status does not change.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, Literal, TextIO

from threadlog.cli.errors import CommandError, CommandFailed, one_line, positive, run_command
from threadlog.terminal import safe_line

if TYPE_CHECKING:  # imported when a turn runs: `threadlog --help` loads no LangChain
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig

    from threadlog.providers.profiles import Profile

__all__ = ["DEFAULT_DB", "DEFAULT_QUESTION", "register", "run", "text_call_hint"]

DEFAULT_QUESTION = "北京今天适合带伞吗？"
DEFAULT_DB = "sqlite:///threadlog-demo.db"
# Each step is stored before the next starts: Ctrl-C mid-turn keeps every finished step.
DURABILITY: Literal["sync"] = "sync"
# A small model that keeps calling tools stops here, not at LangGraph's recursion limit.
DEMO_MAX_MODEL_CALLS = 6
# ChatOpenAI's settings for `--model openai:…`: a small local model can ramble.
DEMO_MAX_TOKENS = 512
DEMO_TIMEOUT_S = 60.0
DEMO_MAX_RETRIES = 1

_EPILOG = """\
examples:
  threadlog demo                                   # offline model, ./threadlog-demo.db
  threadlog demo "Beijing and Shanghai: umbrella today?"
  threadlog demo "那上海呢？" --thread demo-1a2b3c4d   # continue a conversation
  threadlog demo --json --thread demo-1a2b3c4d     # the thread's history as JSON (no new turn)
  threadlog demo --db postgresql://user:pw@localhost/db
  OPENAI_API_KEY=sk-... threadlog demo --model openai:gpt-4o-mini
  OPENAI_API_KEY=sk-... threadlog demo --model openai:deepseek-chat \\
      --base-url https://api.deepseek.com/v1
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run one turn of the weather agent (offline model, SQLite) and print it",
        description=(
            "Ask the weather agent one question and print the turn: each message with its "
            "role, tool calls next to their results (matched by call id), the streamed "
            "answer, token usage and the checkpoint id. Works offline with nothing configured."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "question",
        nargs="?",
        help=f"what to ask (default: {DEFAULT_QUESTION}; with --json and --thread and no "
        "question, nothing is asked)",
    )
    p.add_argument(
        "--thread",
        metavar="ID",
        help="continue this conversation (default: start a new thread and print its id)",
    )
    p.add_argument(
        "--db",
        metavar="URL",
        default=DEFAULT_DB,
        help="checkpoint database: sqlite:///PATH, a plain file path, postgresql://..., or "
        f"memory:// (default: {DEFAULT_DB})",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the thread's whole message history as JSON instead of the transcript; "
        "without a question it only reads (--thread required)",
    )
    _add_model_flags(p)
    p.set_defaults(func=run)


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        metavar="SPEC",
        default="offline",
        help="'offline' (default) or openai:MODEL for any OpenAI-compatible endpoint; "
        "reads OPENAI_API_KEY and OPENAI_BASE_URL",
    )
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 "
        "(default: $OPENAI_BASE_URL, else OpenAI)",
    )
    p.add_argument(
        "--profile",
        metavar="NAME",
        help="the server's wire rules, e.g. llama-cpp-python, llama-server, ollama, vllm "
        "(default: detected from the endpoint's /v1/models, else its URL)",
    )
    p.add_argument(
        "--tool-choice",
        metavar="CHOICE",
        help="tool_choice of the turn's first model call: auto, required, none or a tool "
        "name (default: the profile's)",
    )
    p.add_argument(
        "--temperature",
        metavar="T",
        type=float,
        help="sampling temperature sent to the model (default: the server's); 0 makes a "
        "small local model's calls repeatable",
    )
    p.add_argument(
        "--max-tokens",
        metavar="N",
        type=_number(int, 1),
        default=DEMO_MAX_TOKENS,
        help=f"most tokens a model reply may have (default: {DEMO_MAX_TOKENS})",
    )
    p.add_argument(
        "--timeout",
        metavar="S",
        type=_number(float, 0, strict=True),
        default=DEMO_TIMEOUT_S,
        help=f"seconds one model request may take (default: {DEMO_TIMEOUT_S:g}); a small "
        "model on a slow CPU needs more",
    )
    p.add_argument(
        "--max-retries",
        metavar="K",
        type=_number(int, 0),
        default=DEMO_MAX_RETRIES,
        help=f"retries of a failed model request (default: {DEMO_MAX_RETRIES})",
    )
    p.add_argument(
        "--max-model-calls",
        metavar="N",
        type=positive("model calls"),
        default=DEMO_MAX_MODEL_CALLS,
        help=f"stop a turn after N model calls (default: {DEMO_MAX_MODEL_CALLS})",
    )


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    if isinstance(out, io.TextIOWrapper):
        # A console that cannot show Chinese must not crash the demo.
        out.reconfigure(errors="backslashreplace")
    return run_command("demo", lambda: _failures_explained(args, out))


def _failures_explained(args: argparse.Namespace, out: TextIO) -> int:
    """`_run`, with a database or model-side failure mid-turn one line of exit 1."""
    from threadlog.inspect.readonly import SourceError

    try:
        return _run(args, out)
    except (CommandError, CommandFailed, SourceError, LookupError, BrokenPipeError):
        raise
    except Exception as e:
        if os.environ.get("THREADLOG_DEBUG"):
            raise
        if isinstance(e, OSError) or _module_root(e) in _DB_DRIVERS:
            text = f"the checkpoint database {db_url(args.db)} failed: {one_line(e)}"
            raise CommandFailed(text) from None
        if isinstance(e, ValueError):
            text = f"{type(e).__name__}: {one_line(e)} (THREADLOG_DEBUG=1 shows the traceback)"
            raise CommandFailed(text) from None
        raise


def _run(args: argparse.Namespace, out: TextIO) -> int:
    if args.json and args.question is None:
        if not args.thread:
            raise CommandError(
                "--json without a question prints a thread's history: give --thread ID "
                "(or a question to ask on a new thread)"
            )
        _print_stored_json(args.thread, args.db, out)
        return 0
    question = (DEFAULT_QUESTION if args.question is None else args.question).strip()
    if not question:
        raise CommandError("the question is empty; ask something, e.g. 北京今天适合带伞吗？")
    model = chat_model(
        args.model,
        args.base_url,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        max_retries=args.max_retries,
    )
    _ask(args, model, question, args.thread or f"demo-{uuid.uuid4().hex[:8]}", out)
    return 0


def _ask(args: argparse.Namespace, model: Any, question: str, thread_id: str, out: Any) -> None:
    profile = server_profile(args)
    with _errors_explained(args, profile, thread_id), _open_db(args.db) as saver:
        from langchain_core.messages import HumanMessage

        from threadlog.examples.weather import build_graph

        graph = build_graph(
            model,
            saver,
            profile=profile,
            tool_choice=args.tool_choice,
            max_model_calls=args.max_model_calls,
        )
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        turn = HumanMessage(content=question)
        if args.json:
            graph.invoke({"messages": [turn]}, config, durability=DURABILITY)
            state = graph.get_state(config)
            head = state.config["configurable"]["checkpoint_id"]
            _write_json(out, thread_id, head, args.db, state.values.get("messages", []))
        else:
            _print_turn(graph, config, turn, args, out, profile)
        hint = text_call_hint(graph.get_state(config).values.get("messages", []))
        if hint is not None:
            print(hint, file=sys.stderr)


def chat_model(
    spec: str,
    base_url: str | None = None,
    *,
    temperature: float | None = None,
    max_tokens: int = DEMO_MAX_TOKENS,
    timeout: float = DEMO_TIMEOUT_S,
    max_retries: int = DEMO_MAX_RETRIES,
) -> BaseChatModel:
    """`offline` → `OfflineChatModel`; `openai:MODEL` → `ChatOpenAI` (key from the env)."""
    from threadlog import OfflineChatModel

    if spec == "offline":
        return OfflineChatModel()
    provider, _, name = spec.partition(":")
    if provider != "openai" or not name:
        raise CommandError(
            f"--model {spec!r} is not supported; use 'offline' or openai:MODEL "
            "(e.g. openai:gpt-4o-mini) for any OpenAI-compatible endpoint"
        )
    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key:
        raise CommandError(
            f"--model {spec} needs an API key: set OPENAI_API_KEY (any non-empty value for a "
            "local server that does not check keys)"
        )
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=name,
        api_key=api_key,
        base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
        max_retries=max_retries,
        timeout=timeout,
        stream_usage=True,
        max_tokens=max_tokens,
        **({} if temperature is None else {"temperature": temperature}),
    )


def server_profile(args: argparse.Namespace) -> Profile | None:
    """`--profile`, else the endpoint's (asked once, via `/v1/models`); None offline."""
    from threadlog.providers.profiles import get_profile

    if args.profile:
        try:
            return get_profile(args.profile)
        except ValueError as e:  # names the known profiles
            raise CommandError(f"--profile: {e}") from None
    if args.model == "offline":
        return None
    base = args.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base:
        return get_profile("openai")
    from threadlog.models.servers import detect_profile

    return detect_profile(base, api_key=os.environ.get("OPENAI_API_KEY"))


def _number(kind: type[int] | type[float], least: float, strict: bool = False) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (value > least if strict else value >= least):
            raise argparse.ArgumentTypeError(
                f"must be {'more than' if strict else 'at least'} {least:g}, not {text}"
            )
        return value

    return parse


def db_url(value: str) -> str:
    return value if "://" in value else f"sqlite:///{value}"


@contextmanager
def _open_db(value: str) -> Iterator[Any]:
    from threadlog import checkpointer
    from threadlog.cli.errors import writable_database

    try:
        url = writable_database(value, "demo", create=True)
    except Exception as e:
        raise CommandError(one_line(e)) from None
    with ExitStack() as stack:
        try:
            saver = stack.enter_context(checkpointer(url))
        except ImportError as e:
            raise CommandError(
                f"cannot open {url}: {e.name or e} is not installed; for Postgres install "
                "threadlog[postgres]"
            ) from None
        except Exception as e:
            # The drivers raise their own error types; anything else is a bug to show whole.
            if isinstance(e, (OSError, ValueError)) or _module_root(e) in _DB_DRIVERS:
                raise CommandError(
                    f"cannot open the checkpoint database {url}: {one_line(e)}"
                ) from None
            raise
        yield saver


_DB_DRIVERS = frozenset({"sqlite3", "psycopg", "psycopg_pool"})


def _module_root(e: BaseException) -> str:
    return type(e).__module__.split(".")[0]


@contextmanager
def _errors_explained(
    args: argparse.Namespace, profile: Profile | None = None, thread_id: str | None = None
) -> Iterator[None]:
    import openai

    from threadlog import ConcurrentRunError, MessageLogError
    from threadlog.models.servers import detect_profile, explain_failure

    endpoint = args.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    try:
        yield
    except (ConcurrentRunError, MessageLogError) as e:
        # Already a sentence naming the thread or the message and the fix.
        raise CommandFailed(one_line(e)) from None
    except openai.AuthenticationError:
        raise CommandFailed(
            f"{endpoint} rejected the API key (HTTP 401); set OPENAI_API_KEY to a valid key"
        ) from None
    except openai.NotFoundError:
        raise CommandFailed(
            f"{endpoint} has no model {args.model.partition(':')[2]!r} (HTTP 404); "
            "check --model and --base-url"
        ) from None
    except (openai.APIError, ValueError) as e:
        if profile is None:
            raise
        looks_like = None if isinstance(e, openai.APIConnectionError) else detect_profile(endpoint)
        line = explain_failure(
            e, profile=profile, endpoint=endpoint, thread_id=thread_id, suggest=looks_like
        )
        if line is None:
            raise
        raise CommandFailed(line) from None


def text_call_hint(messages: list[Any]) -> str | None:
    """A stderr hint when the answer is a tool call written as text (docs/profiles.md)."""
    from langchain_core.messages import AIMessage

    from threadlog.examples.weather import get_weather
    from threadlog.models.text_calls import call_in_text

    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.tool_calls or last.invalid_tool_calls:
        return None
    call = call_in_text(last.text, [get_weather.name])
    if call is None:
        return None
    return safe_line(
        f"threadlog demo: hint: the answer is a call to {call.name} written as text "
        f"({call.form}) that the server did not return as a tool call; the server's chat "
        "template likely renders tool calls in another form than the model writes them "
        '(docs/profiles.md, "The chat template decides whether calls parse"; '
        "scripts/qwen_json_tools.jinja parses ```json blocks)"
    )


def _print_turn(
    graph: Any,
    config: RunnableConfig,
    turn: HumanMessage,
    args: argparse.Namespace,
    out: TextIO,
    profile: Profile | None = None,
) -> None:
    earlier = len(graph.get_state(config).values.get("messages", []))
    model_name = args.model if args.model != "offline" else "offline (OfflineChatModel)"
    if profile is not None:
        model_name += f" · profile {profile.name}"
    tid = config["configurable"]["thread_id"]
    print(safe_line(f"thread {tid} · {db_url(args.db)} · model {model_name}"), file=out)
    if earlier:
        print(f"(continuing: {earlier} earlier messages on this thread)", file=out)
    from langchain_core.messages import AIMessageChunk

    from threadlog.cli.transcript import Transcript, messages_in

    transcript = Transcript(out)
    transcript.message(turn)
    for mode, payload in graph.stream(
        {"messages": [turn]}, config, stream_mode=["messages", "updates"], durability=DURABILITY
    ):
        if mode == "messages":
            chunk, meta = payload
            if isinstance(chunk, AIMessageChunk) and meta.get("langgraph_node") == "model":
                transcript.token(chunk.text)
        else:
            for update in payload.values():
                for m in messages_in(update):
                    transcript.message(m)
    transcript.end_stream()
    state = graph.get_state(config)
    transcript.line("tokens", transcript.usage_summary())
    transcript.line("checkpoint", state.config["configurable"]["checkpoint_id"])
    again = f'threadlog demo "…" --thread {tid}'
    transcript.line("continue", again + ("" if args.db == DEFAULT_DB else f" --db {args.db}"))


def _print_stored_json(thread_id: str, db: str, out: TextIO) -> None:
    from threadlog.cli.errors import resolve_thread
    from threadlog.inspect.export import messages_at

    thread_id = resolve_thread(db_url(db), thread_id)
    messages, checkpoint_id = messages_at(db_url(db), thread_id)
    _write_json(out, thread_id, checkpoint_id, db, messages)


def _write_json(out: TextIO, thread_id: str, checkpoint_id: str, db: str, messages: Any) -> None:
    from threadlog.cli.jsonout import dumps
    from threadlog.cli.transcript import history_json

    doc = {
        "thread_id": thread_id,
        "checkpoint_id": checkpoint_id,
        "db": db_url(db),
        "messages": history_json(messages),
    }
    out.write(dumps(doc, indent=2) + "\n")
