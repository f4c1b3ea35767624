"""The Anthropic Messages API adapter.

Anthropic is stricter than chat completions: roles must alternate, the first message must be
the user's, text blocks may not be empty, and tool blocks need tools and matching pairs. The
mapping below repairs any normalized history (including one written by another provider's
agent) into a request the API accepts.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypeAlias

from ..core.exceptions import ModelBehaviorError, UserError
from ..core.messages import Message, ToolCall
from ..core.usage import Usage
from ._common import (
    UNREADABLE,
    BadResponse,
    LoopClients,
    arguments_object,
    bounded,
    deadline_at,
    gave_up,
    retrying,
    tool_ids,
)
from ._errors import Provider, mapped_errors
from .interface import Model, ModelRequest, ModelResponse, ModelSettings, OutputDelta

try:
    import anthropic
    from anthropic.types import (
        InputJSONDelta,
        MessageParam,
        RawContentBlockDeltaEvent,
        RawContentBlockStartEvent,
        RawMessageDeltaEvent,
        RawMessageStartEvent,
        RawMessageStopEvent,
        RawMessageStreamEvent,
        TextBlock,
        TextBlockParam,
        TextDelta,
        ToolParam,
        ToolResultBlockParam,
        ToolUseBlock,
        ToolUseBlockParam,
        message_create_params,
    )
    from anthropic.types import Message as AnthropicMessage
    from anthropic.types import Usage as AnthropicUsage
except ImportError as _e:  # pragma: no cover - depends on the installed extras
    raise UserError(
        "The Anthropic adapter needs the 'anthropic' package: pip install 'relayrace[anthropic]'"
    ) from _e

__all__ = ["AnthropicModel"]

_Block: TypeAlias = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam

# Stand-in user turn: the API wants the first turn (and the turn we answer) to be the user's.
_CONTINUES = "(conversation continues)"
# The only API version that still accepts temperature and top_p.
_SAMPLING_API_VERSION = "2023-06-01"
_TOOL_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")

_STATUS_HINTS = {
    400: "the API rejected the request; the detail above says which part",
    401: "the API key was rejected: check ANTHROPIC_API_KEY or pass api_key=",
    403: "the API key may not use this model",
    404: "check the model name (and base_url, if set)",
    413: "the request is too large: shorten the conversation or the tool results",
    429: "rate limited: retry later, lower concurrency or raise max_retries",
    529: "Anthropic is overloaded: retry later",
}
_ERROR_TYPE_STATUS = {"rate_limit_error": 429, "api_error": 500, "overloaded_error": 529}


class AnthropicModel(Model):
    """A Claude model behind the Anthropic Messages API.

    ``api_key`` falls back to ``ANTHROPIC_API_KEY``; the client is built on first use, so
    constructing the model never needs a key. Each event loop gets its own client, closed as
    the loop shuts down, so the model works across ``asyncio.run`` calls. Pass ``client`` to
    reuse a configured ``anthropic.AsyncAnthropic`` (then yours to close, on its one loop);
    ``max_retries`` and ``timeout`` then come from that client.

    ``max_retries`` also bounds new tries of a response that arrived unreadable or cut short.
    A refusal (``stop_reason`` ``"refusal"``) is returned in ``ModelResponse.refusal``, with
    the text the model gave (or a note saying it declined) as the message's text.
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        settings: ModelSettings | None = None,
        max_tokens: int = 4096,
        max_retries: int = 2,
        timeout: float | None = None,
    ) -> None:
        self.model = model
        self.name = f"anthropic:{model}"
        self.settings = settings
        self.max_tokens = max_tokens
        self._api_key = api_key
        self._base_url = base_url
        self._max_retries = max_retries
        self._timeout = timeout
        self._client = client
        self._clients = LoopClients(self._build_client)
        self._warned_sampling = False

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The SDK client: the one passed in, else the running loop's own (built on first use;
        outside a loop a new one)."""
        return self._client if self._client is not None else self._clients.current()

    async def _loop_client(self) -> anthropic.AsyncAnthropic:
        return self._client if self._client is not None else await self._clients.get()

    def _build_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self._base_url,
            max_retries=self._max_retries,
            timeout=self._timeout if self._timeout is not None else anthropic.NOT_GIVEN,
        )

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send one turn and return the assistant message and its usage."""
        client = await self._loop_client()
        params, extra_body, timeout, settings = self._params(request, client)
        when = deadline_at(settings)

        async def attempt() -> ModelResponse:
            async with asyncio.timeout_at(when):
                reply = await client.messages.create(
                    **params, timeout=timeout, extra_body=extra_body
                )
            return _parse(reply, self.name, params["max_tokens"])

        with self._mapped_errors(client, settings):
            return await retrying(attempt, client.max_retries)

    async def stream(
        self, request: ModelRequest
    ) -> AsyncIterator[str | OutputDelta | ModelResponse]:
        """Yield text deltas as they arrive, then the complete ``ModelResponse``.

        A stream that breaks or ends early is asked again while no text has been yielded;
        after that a new try would repeat text already passed on, so it fails at once.
        """
        client = await self._loop_client()
        params, extra_body, timeout, settings = self._params(request, client)
        when = deadline_at(settings)
        with self._mapped_errors(client, settings):
            for retry in range(client.max_retries + 1):
                output = request.output
                state = _StreamState(self.model, output.tool_name if output is not None and
                                     output.mode == "tool" else None)
                try:
                    async with asyncio.timeout_at(when):
                        events = await client.messages.create(
                            **params, stream=True, timeout=timeout, extra_body=extra_body
                        )
                    async with events:
                        async for event in bounded(events, when):
                            if piece := state.feed(event):
                                yield piece
                    response = state.response(self.name, params["max_tokens"])
                except UNREADABLE as e:
                    if error := gave_up(e, retry, client.max_retries, state.streamed):
                        raise error from e
                    continue
                yield response
                return

    def _params(
        self, request: ModelRequest, client: anthropic.AsyncAnthropic
    ) -> tuple[
        message_create_params.MessageCreateParamsBase,
        dict[str, Any] | None,
        float | anthropic.NotGiven,
        ModelSettings,
    ]:
        settings = ModelSettings.merge(self.settings, request.settings)
        system, messages = _to_anthropic_messages(
            request.instructions, request.messages, tools=bool(request.tools)
        )
        params: message_create_params.MessageCreateParamsBase = {
            "model": self.model,
            "max_tokens": settings.max_tokens or self.max_tokens,
            "messages": messages,
        }
        if system:
            params["system"] = system
        if request.tools:
            tools: list[ToolParam] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": {"type": "object", **t.parameters},
                }
                for t in request.tools
            ]
            params["tools"] = tools
        output = request.output
        if output is not None and output.mode == "native":
            raise UserError(f"{self.name}: Anthropic models take structured output through a "
                            "forced tool; use output_mode='tool' (the default here) or "
                            "'prompted'.")
        if output is not None and output.mode == "tool":
            # Some tool must be called: the final-output tool, or one the model needs first.
            params["tool_choice"] = {"type": "any"}
        sampling = {
            k: v
            for k, v in (("temperature", settings.temperature), ("top_p", settings.top_p))
            if v is not None
        }
        # The current API version (SDK 2.x default) rejects temperature/top_p with a 400, so they
        # are sent only to a client pinned to the old version; put them in `extra` to force it.
        if sampling and client.default_headers.get("anthropic-version") != _SAMPLING_API_VERSION:
            if not self._warned_sampling:
                self._warned_sampling = True
                warnings.warn(
                    f"{self.name}: temperature/top_p are not sent, because the Anthropic API "
                    f"version in use rejects them; pin 'anthropic-version: "
                    f"{_SAMPLING_API_VERSION}' on your client or pass them in settings.extra.",
                    stacklevel=3,
                )
            sampling = {}
        extra_body = {**sampling, **settings.extra} or None
        timeout = settings.timeout if settings.timeout is not None else anthropic.NOT_GIVEN
        return params, extra_body, timeout, settings

    @contextmanager
    def _mapped_errors(
        self, client: anthropic.AsyncAnthropic, settings: ModelSettings
    ) -> Iterator[None]:
        """Turn SDK and transport failures into relayrace errors that say what to do."""
        try:
            with mapped_errors(_PROVIDER, f"{self.name} at {client.base_url}",
                               client.max_retries, settings):
                yield
        except TypeError as e:
            # The SDK reports missing credentials as a TypeError while building the request.
            if "authentication method" not in str(e):
                raise
            raise UserError(
                f"{self.name} needs an API key: set ANTHROPIC_API_KEY or pass api_key=."
            ) from e


class _StreamState:
    """Assembles a streamed reply: text, tool-use blocks by index, and usage."""

    def __init__(self, model: str, output_tool: str | None = None) -> None:
        self.model = model
        self.output_tool = output_tool
        """The structured-output tool, whose arguments are passed on as they stream."""
        self.usage = Usage(requests=1)
        self.text: list[str] = []
        self.tools: dict[int, tuple[ToolUseBlock, list[str]]] = {}  # start block, JSON pieces
        self.stop_reason: str | None = None
        self.stopped = False
        self.streamed = False
        """Whether text has been passed on (so a new try would repeat it)."""

    def feed(self, event: RawMessageStreamEvent) -> str | OutputDelta:
        """Take one event; return the text it adds (``""`` if none), or the piece of the
        structured output's arguments it adds."""
        if isinstance(event, RawMessageStartEvent):
            self.model = event.message.model or self.model
            self.usage = _usage(event.message.usage)
        elif isinstance(event, RawContentBlockStartEvent):
            start = event.content_block
            if isinstance(start, ToolUseBlock):
                self.tools[event.index] = (start, [])
            elif isinstance(start, TextBlock):
                self.text.append(start.text)
                self.streamed = self.streamed or bool(start.text)
                return start.text
        elif isinstance(event, RawContentBlockDeltaEvent):
            if isinstance(event.delta, TextDelta):
                self.text.append(event.delta.text)
                self.streamed = self.streamed or bool(event.delta.text)
                return event.delta.text
            if isinstance(event.delta, InputJSONDelta) and event.index in self.tools:
                start, pieces = self.tools[event.index]
                pieces.append(event.delta.partial_json)
                if start.name == self.output_tool and event.delta.partial_json:
                    self.streamed = True  # passed on: a new try would repeat it
                    return OutputDelta(event.delta.partial_json)
        elif isinstance(event, RawMessageStopEvent):
            self.stopped = True
        elif isinstance(event, RawMessageDeltaEvent):
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            # Counts here are cumulative; input and cache counts appear only on some API
            # versions, and then replace those of message_start.
            delta, usage = event.usage, self.usage
            usage.output_tokens = delta.output_tokens
            if delta.cache_read_input_tokens is not None:
                usage.cache_read_tokens = delta.cache_read_input_tokens
            if delta.cache_creation_input_tokens is not None:
                usage.cache_write_tokens = delta.cache_creation_input_tokens
            if delta.input_tokens is not None:
                usage.input_tokens = (delta.input_tokens + usage.cache_read_tokens
                                      + usage.cache_write_tokens)
        return ""

    def response(self, name: str, max_tokens: int) -> ModelResponse:
        """The complete reply, once the stream has ended; an error if it is not complete."""
        if not self.stopped:
            raise BadResponse("the stream ended before the answer was complete: no message_stop")
        if self.stop_reason == "max_tokens":
            raise _output_limit(name, max_tokens)
        calls = tuple(
            # The streamed JSON is kept verbatim; with no deltas the start block holds it all.
            ToolCall(start.id, start.name, "".join(pieces) or json.dumps(start.input))
            for start, pieces in (self.tools[i] for i in sorted(self.tools))
        )
        return _response("".join(self.text), calls, self.usage, self.model, self.stop_reason)


def _to_anthropic_messages(
    instructions: str, messages: Sequence[Message], *, tools: bool
) -> tuple[str, list[MessageParam]]:
    """Normalized messages -> (``system``, alternating Anthropic messages).

    System messages join the instructions. Consecutive same-role messages merge, tool results
    first. Tool calls and results become ``tool_use``/``tool_result`` blocks only when ``tools``
    is true and each call is answered in the next user turn; otherwise they are rendered as text
    so the API accepts the history. Repeated call ids (servers that number calls per response)
    are paired by position within their turn and renamed so each is unique in the request.
    """
    system = "\n\n".join(
        s for s in [instructions, *(m.content for m in messages if m.role == "system")] if s.strip()
    )
    convo = [m for m in messages if m.role != "system" and not _renders_empty(m)]
    ids = tool_ids(convo, _safe_id)
    paired = ids.paired if tools else set()
    names = {tc.id: tc.name for m in convo for tc in m.tool_calls}
    turns: list[tuple[Literal["user", "assistant"], list[_Block]]] = []
    for i, m in enumerate(convo):
        role: Literal["user", "assistant"] = "assistant" if m.role == "assistant" else "user"
        blocks: list[_Block] = []
        if m.role == "tool":
            call_id = m.tool_call_id or ""
            if ids.results[i] in paired:
                result: ToolResultBlockParam = {
                    "type": "tool_result",
                    "tool_use_id": ids.results[i],
                }
                if m.content.strip():  # an empty result is sent without content
                    result["content"] = m.content
                blocks.append(result)
            else:
                tool = m.name or names.get(call_id, "a tool")
                blocks.append(_text(f"[result of {tool}: {m.content}]"))
        else:
            if m.content.strip():
                blocks.append(_text(m.content))
            for j, tc in enumerate(m.tool_calls):
                if ids.calls[(i, j)] in paired:
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": ids.calls[(i, j)],
                            "name": tc.name,
                            "input": _tool_input(tc.arguments),
                        }
                    )
                else:
                    blocks.append(_text(f"[called tool {tc.name} with {tc.arguments or '{}'}]"))
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    if not turns or turns[0][0] == "assistant":
        turns.insert(0, ("user", [_text(_CONTINUES)]))
    if turns[-1][0] == "assistant":
        # Ending on an assistant turn would be a prefill, which newer models reject.
        turns.append(("user", [_text(_CONTINUES)]))
    out: list[MessageParam] = []
    for role, blocks in turns:
        if role == "user":
            # The API wants a user turn's tool results before any other block.
            blocks.sort(key=lambda b: b["type"] != "tool_result")
            out.append({"role": "user", "content": blocks})
        else:
            out.append({"role": "assistant", "content": blocks})
    return system, out


def _renders_empty(m: Message) -> bool:
    return m.role in ("user", "assistant") and not m.content.strip() and not m.tool_calls


def _text(text: str) -> TextBlockParam:
    return {"type": "text", "text": text}


def _safe_id(call_id: str) -> str:
    """Tool ids from other providers may hold characters Anthropic rejects."""
    return _TOOL_ID_UNSAFE.sub("_", call_id)


def _tool_input(arguments: str) -> dict[str, object]:
    """The stored arguments as an object; malformed text is kept under ``_raw_arguments``."""
    parsed = arguments_object(arguments)
    return parsed if parsed is not None else {"_raw_arguments": arguments}


def _output_limit(name: str, max_tokens: int) -> ModelBehaviorError:
    return ModelBehaviorError(
        f"{name} stopped at max_tokens={max_tokens} before its answer was complete "
        "(stop_reason 'max_tokens'); the cut answer is not used: raise ModelSettings.max_tokens "
        "(or the model's max_tokens=) or ask for shorter output."
    )


def _parse(reply: AnthropicMessage, name: str, max_tokens: int) -> ModelResponse:
    # A body that is not a message (an HTML page, a proxy's JSON) comes back as is, or as a
    # message without content: the SDK does not validate what it reads.
    if not isinstance(reply, AnthropicMessage) or not isinstance(reply.content, list):
        raise BadResponse(f"not a message: {str(reply)[:200]!r}")
    try:
        return _parse_message(reply, name, max_tokens)
    except (AttributeError, TypeError) as e:  # JSON of another shape, read unvalidated
        raise BadResponse(f"not a message ({e})") from e


def _parse_message(reply: AnthropicMessage, name: str, max_tokens: int) -> ModelResponse:
    if reply.stop_reason == "max_tokens":
        raise _output_limit(name, max_tokens)
    text = "".join(b.text for b in reply.content if isinstance(b, TextBlock))
    calls = tuple(
        ToolCall(b.id, b.name, json.dumps(b.input))
        for b in reply.content
        if isinstance(b, ToolUseBlock)
    )
    model = reply.model or name.removeprefix("anthropic:")
    return _response(text, calls, _usage(reply.usage), model, reply.stop_reason)


def _response(
    text: str, calls: tuple[ToolCall, ...], usage: Usage, model: str, stop_reason: str | None
) -> ModelResponse:
    refusal = None
    if stop_reason == "refusal":
        refusal = text or "(the model declined to answer: stop_reason 'refusal')"
    message = Message.assistant(refusal or text, calls)
    return ModelResponse(message=message, usage=usage, model=model, refusal=refusal)


def _usage(usage: AnthropicUsage) -> Usage:
    # Cached tokens are reported apart from input_tokens; count them, they were sent.
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    return Usage(
        requests=1,
        input_tokens=(usage.input_tokens or 0) + cache_write + cache_read,
        output_tokens=usage.output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def _error_detail(e: anthropic.APIError) -> tuple[str, str]:
    """The API's own error message and type, without the SDK's 'Error code: ...' wrapping."""
    body: Any = e.body
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"]), str(inner.get("type", ""))
    return e.message, ""


def _status(e: anthropic.APIError) -> tuple[int | None, str, str]:
    """An API error's status, message and place; an ``error`` event inside a 200 stream
    takes the status its type stands for."""
    status = e.status_code if isinstance(e, anthropic.APIStatusError) else None
    detail, kind = _error_detail(e)
    if status is not None and status < 400:
        return _ERROR_TYPE_STATUS.get(kind), detail, " (mid-stream)"
    return status, detail, ""


_PROVIDER = Provider(
    name="anthropic", api_error=anthropic.APIError, timeout_error=anthropic.APITimeoutError,
    connection_error=anthropic.APIConnectionError, status=_status, hints=_STATUS_HINTS,
    refused="the API refused the request",
    connect="check the network (and base_url, if set).",
    unusable="the API or a proxy in between is failing; retry later.")
