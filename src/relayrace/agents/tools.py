"""Tools: typed Python functions the model can call, with schemas and validated arguments."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import from_json, to_json

from ..core._lazy import lazy_names
from ..core.exceptions import UserError
from ..models._strict import strict_schema
from ..models.interface import ToolDefinition
from .context import RunContext

__all__ = [
    "FunctionTool",
    "RateLimit",
    "Tool",
    "ToolRetry",
    "Toolset",
    "ask_user",
    "parse_arguments",
    "render_tool_output",
    "tool",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class ToolRetry(Exception):  # noqa: N818 - a signal to the model, not an error of the program
    """Raise inside a tool to tell the model what was wrong; it gets the message and may retry.

    Unlike any other exception, no traceback is kept: the model erred, not the tool.
    """


@dataclass(slots=True)
class RateLimit:
    """At most ``max_calls`` calls to one tool in any ``window_s`` seconds (a sliding window)."""

    max_calls: int
    """Calls allowed within the window."""
    window_s: float
    """The window's length in seconds."""

    def __post_init__(self) -> None:
        if self.max_calls < 1 or self.window_s <= 0:
            raise UserError(
                f"RateLimit(max_calls={self.max_calls}, window_s={self.window_s}) needs "
                "max_calls >= 1 and window_s > 0."
            )


class _RateWindow:
    """The timestamps of recent calls of one tool."""

    __slots__ = ("calls", "limit")

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.calls: deque[float] = deque()

    def acquire(self) -> float:
        """Record a call and return 0, or return the seconds until a call is allowed again."""
        now = time.monotonic()
        calls, limit = self.calls, self.limit
        while calls and now - calls[0] >= limit.window_s:
            calls.popleft()
        if len(calls) >= limit.max_calls:
            return limit.window_s - (now - calls[0])
        calls.append(now)
        return 0.0


class Tool(ABC):
    """Something the model can call. Subclass it for tools that are not plain functions."""

    name: str
    """The name the model calls the tool by."""
    description: str
    """What the tool does, shown to the model."""
    parameters: dict[str, Any]
    """The JSON Schema of its arguments."""
    sequential: bool = False
    """Never run this tool concurrently with any other call of the same turn."""
    requires_approval: bool = False
    """Pause the run for a human decision before each call."""
    idempotent: bool = False
    """Whether running a call twice has the effect of running it once. A call whose outcome a
    crash left unknown is run again on resume only if so; otherwise the model is told (or a
    person asked, for a tool that requires approval). ``RunContext.call_key`` gives a tool a
    stable key to pass to the systems it calls, so it can make itself idempotent."""
    rate_limit: RateLimit | None = None
    """Calls allowed per time window, across every run in this process."""
    delegates: bool = False
    """Whether calling the tool runs other agents (agent tools, meta-tools)."""
    max_result_tokens: int | None = None
    """The longest result the model sees (estimated tokens, see ``usage.estimate_tokens``);
    a longer one is cut with a note saying how to read the rest. ``None``: the agent's
    ``max_result_tokens``."""
    protected: bool = False
    """Compression never clears this tool's results (a write, an artifact, a memory)."""
    compactable: bool = False
    """Compression clears this tool's old results first (a search, a page fetched)."""
    strict: bool = False
    """Offer the tool with a strict schema (OpenAI-compatible servers: ``"strict": true``, so
    the model's arguments always match it), whatever the agent's ``strict_tools``."""
    is_enabled: bool | Callable[[RunContext[Any]], bool | Awaitable[bool]] = True
    """Whether the tool is offered: a bool, or a (sync or async) function of the run context
    asked each turn; a call to a tool not offered is refused with a tool error."""

    _window: _RateWindow | None = None
    _definition: ToolDefinition | None = None

    @property
    def definition(self) -> ToolDefinition:
        """The tool as offered to a model."""
        if self._definition is None:
            self._definition = ToolDefinition(
                name=self.name, description=self.description, parameters=self.parameters,
                strict=True if self.strict else None,
            )
        return self._definition

    def acquire_rate(self) -> float:
        """Count a call against ``rate_limit``: 0 if allowed, else the seconds to wait."""
        if self.rate_limit is None:
            return 0.0
        if self._window is None or self._window.limit is not self.rate_limit:
            self._window = _RateWindow(self.rate_limit)
        return self._window.acquire()

    @abstractmethod
    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        """Run the tool on the model's raw JSON ``arguments``.

        Raise :class:`ToolRetry` for a mistake the model should fix; any other exception is
        reported to the model as a failure, with the traceback kept in the event log.
        """


class Toolset(ABC):
    """Tools known only once a run needs them, such as an MCP server's: an agent takes a
    toolset in ``tools=[...]`` beside its tools, and each of its turns offers what the toolset
    lists then."""

    label: str
    """What the toolset is, for error messages (e.g. ``MCP server 'time'``)."""

    @abstractmethod
    async def list_tools(self) -> Sequence[Tool]:
        """The tools offered now.

        Called before each turn of an agent that has the toolset, so it must be cheap once
        listed: return the same sequence object while the list is unchanged (the engine
        rebuilds the agent's offer, and checks it for clashing names, only on a new one).
        """


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\*{0,2}\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?)\s*:\s*$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-argument texts."""
    description: list[str] = []
    params: dict[str, str] = {}
    section = ""
    current = ""
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1)
            current = ""
            continue
        if section in ("Args", "Arguments", "Parameters"):
            arg = _ARG_LINE.match(line)
            if arg and len(line) - len(line.lstrip()) <= 4:
                current = arg.group(1)
                params[current] = arg.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
        elif not section:
            description.append(line)
    return "\n".join(description).strip(), params


def _is_run_context(annotation: Any) -> bool:
    return annotation is RunContext or get_origin(annotation) is RunContext


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


def parse_arguments(raw: str, tool_name: str, example: str = "") -> dict[str, Any]:
    """A call's arguments as a JSON object, or ``ToolRetry`` telling the model what is wrong.

    Parsed as function tools parse theirs (``pydantic_core``): any text, however deeply nested
    or long its numbers, is either an object or an error the model is told about.
    """
    text = raw.strip()
    if not text or text == "{}":
        return {}
    try:
        value = from_json(text)
    except ValueError as exc:
        hint = f" Send a JSON object such as {example}." if example else ""
        raise ToolRetry(f"Invalid arguments for {tool_name}: not valid JSON ({exc}).{hint}") \
            from None
    if not isinstance(value, dict):
        raise ToolRetry(f"Invalid arguments for {tool_name}: expected a JSON object, got "
                        f"{type(value).__name__}.")
    return value


def describe_validation_error(exc: ValidationError) -> str:
    """A short account of what was wrong with a call's arguments."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "json_invalid":
            return f"the arguments are not valid JSON ({err['msg']})"
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


class FunctionTool(Tool):
    """A tool made from a typed Python function (see :func:`tool`)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        sequential: bool = False,
        requires_approval: bool = False,
        idempotent: bool = False,
        rate_limit: RateLimit | None = None,
        max_result_tokens: int | None = None,
        protected: bool = False,
        compactable: bool = False,
        strict: bool = False,
        confirm: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not _TOOL_NAME.fullmatch(self.name):
            raise UserError(f"Tool name {self.name!r} is not valid for model APIs; use 1-64 "
                            "characters of [A-Za-z0-9_-], e.g. @tool(name='lookup_invoice').")
        self.sequential = sequential
        self.requires_approval = requires_approval or confirm
        self.idempotent = idempotent
        self.rate_limit = rate_limit
        if max_result_tokens is not None and max_result_tokens < 1:
            raise UserError(f"Tool {self.name!r}: max_result_tokens must be at least 1, got "
                            f"{max_result_tokens} (None uses the agent's limit).")
        if protected and compactable:
            raise UserError(f"Tool {self.name!r} cannot be both protected (never cleared) and "
                            "compactable (cleared first); choose one.")
        self.max_result_tokens = max_result_tokens
        self.protected = protected
        self.compactable = compactable
        doc_text, doc_params = _parse_docstring(fn.__doc__ or "")
        self.description = description or doc_text or self.name
        try:
            hints = get_type_hints(fn)
        except NameError as exc:
            raise UserError(f"Tool {self.name!r}: cannot resolve a type hint ({exc}).") from exc
        fields: dict[str, Any] = {}
        self._context_param: str | None = None
        for param in inspect.signature(fn).parameters.values():
            annotation = hints.get(param.name, Any)
            if _is_run_context(annotation):
                self._context_param = param.name
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UserError(
                    f"Tool {self.name!r}: *args/**kwargs cannot be described to a model; "
                    "declare each parameter with a type."
                )
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (
                annotation,
                Field(default, description=doc_params.get(param.name)),
            )
        self._args_model: type[BaseModel] = create_model(
            f"{self.name}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        # The validator itself: the model's classmethod wrapper doubles the cost of a call.
        self._validate_json = self._args_model.__pydantic_validator__.validate_json
        self.parameters = _schema(self._args_model)
        self.strict = strict
        if strict and strict_schema(self.parameters) is None:
            raise UserError(f"Tool {self.name!r}: strict=True, but its arguments cannot be "
                            "described in strict mode (a dict open to any keys, or an outside "
                            "reference); type them as a pydantic model or TypedDict, or drop "
                            "strict.")
        self._is_async = inspect.iscoroutinefunction(fn)

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        try:
            parsed = self._validate_json(arguments if arguments and not arguments.isspace()
                                         else "{}")
        except ValidationError as exc:
            raise ToolRetry(
                f"Invalid arguments for {self.name}: {describe_validation_error(exc)}. "
                f"Expected a JSON object matching: {json.dumps(self.parameters)}"
            ) from None
        # The instance is thrown away: its field dict can serve as the call's keywords.
        kwargs: dict[str, Any] = parsed.__dict__
        if self._context_param is not None:
            kwargs[self._context_param] = ctx
        if self._is_async:
            return await self.fn(**kwargs)
        # Sync tools may block (I/O, CPU): run them off the event loop.
        return await asyncio.to_thread(self.fn, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly, as if undecorated."""
        return self.fn(*args, **kwargs)


@overload
def tool(fn: _F, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    sequential: bool = False,
    requires_approval: bool = False,
    idempotent: bool = False,
    rate_limit: RateLimit | None = None,
    max_result_tokens: int | None = None,
    protected: bool = False,
    compactable: bool = False,
    strict: bool = False,
    confirm: bool = False,
) -> Callable[[_F], FunctionTool]: ...


def tool(
    fn: _F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    sequential: bool = False,
    requires_approval: bool = False,
    idempotent: bool = False,
    rate_limit: RateLimit | None = None,
    max_result_tokens: int | None = None,
    protected: bool = False,
    compactable: bool = False,
    strict: bool = False,
    confirm: bool = False,
) -> FunctionTool | Callable[[_F], FunctionTool]:
    """Turn a typed function, sync or async, into a tool.

    The JSON schema comes from the type hints and the docstring's ``Args:`` section; arguments
    are validated before the call. A parameter typed ``RunContext`` receives the run's context
    and is hidden from the schema. ``sequential=True`` keeps the tool from running concurrently
    with other calls of the same turn. ``idempotent=True`` lets a resumed run call it again
    when a crash left a call's outcome unknown (see ``Tool.idempotent``).
    ``max_result_tokens`` cuts longer results (default: the agent's limit); ``protected`` and
    ``compactable`` tell an agent's compression which results it must keep or clear first.
    ``strict=True`` offers the tool with a strict schema (see ``Tool.strict``).
    ``confirm=True`` (Astromesh's name) is a confirmation gate: the same as
    ``requires_approval=True``, which only a person's decision passes (``Runner.resume``), never
    a model, a parent or a delegated child.
    """

    def wrap(f: _F) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            sequential=sequential,
            requires_approval=requires_approval,
            idempotent=idempotent,
            rate_limit=rate_limit,
            max_result_tokens=max_result_tokens,
            protected=protected,
            compactable=compactable,
            strict=strict,
            confirm=confirm,
        )

    return wrap(fn) if fn is not None else wrap


def render_tool_output(value: Any) -> str:
    """The text a model receives for a tool's return value."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return to_json(value, fallback=str).decode()



def _ask_user(ctx: RunContext[Any], question: str, choices: list[str] | None = None) -> str:
    """Ask the user a question and wait for the answer, when you cannot go on without it.

    Args:
        question: The question, complete and on its own: the user sees only this.
        choices: The only answers allowed, if the user must pick one.
    """
    if not question.strip():
        raise ToolRetry("ask_user needs a question: say what you need to know.")
    if choices is not None and (not choices or not all(c.strip() for c in choices)):
        raise ToolRetry("ask_user's choices, if given, are a non-empty list of non-empty "
                        "answers; leave them out for a free-text answer.")
    return ctx.ask_user(question, choices=choices)


# ``ask_user``: a built-in tool that lets a model ask the person behind the run a question:
# ``Agent(..., tools=[ask_user])``. The run stops with the question pending (see
# ``RunContext.ask_user``) and the answer becomes the call's result when it resumes. Asking
# again changes nothing, so a call a crash cut short simply asks again. Made when first
# named, like every built-in tool: its argument model is pydantic's first schema to build.
if TYPE_CHECKING:
    ask_user: FunctionTool
__getattr__ = lazy_names(__name__, {
    "ask_user": lambda: FunctionTool(_ask_user, name="ask_user", idempotent=True)})
