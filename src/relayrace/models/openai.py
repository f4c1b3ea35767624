"""The OpenAI Chat Completions adapter, for OpenAI and every OpenAI-compatible server.

One adapter covers OpenAI itself and local or hosted servers that speak the same API (Ollama,
vLLM, llama.cpp, LM Studio): point ``base_url`` at them.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal

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
from ._strict import drop_added_nulls, strict_schema
from .interface import (
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputDelta,
    OutputMode,
    OutputSchema,
    ToolDefinition,
)

try:
    import openai
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionAssistantMessageParam,
        ChatCompletionChunk,
        ChatCompletionMessageParam,
        ChatCompletionToolParam,
        completion_create_params,
    )
    from openai.types.completion_usage import CompletionUsage
    from openai.types.shared_params import ResponseFormatJSONSchema
except ImportError as _e:  # pragma: no cover - depends on the installed extras
    raise UserError(
        "The OpenAI adapter needs the 'openai' package: pip install 'relayrace[openai]'"
    ) from _e

__all__ = ["OpenAIChatModel"]

# Local servers ignore the key, but the SDK refuses to build a client without one.
_PLACEHOLDER_KEY = "not-needed"

_STATUS_HINTS = {
    400: "the server rejected the request; the detail above says which part",
    401: "the API key was rejected: check OPENAI_API_KEY or pass api_key=",
    403: "the API key may not use this model or endpoint",
    404: "check the model name and base_url",
    408: "the server timed out the request: retry later or raise the timeout",
    413: "the request is too large: shorten the conversation or the tool results",
    422: "the server could not process the request; the detail above says why",
    429: "rate limited or out of quota: retry later, lower concurrency or raise max_retries",
}


class OpenAIChatModel(Model):
    """A chat model behind the OpenAI Chat Completions API, at OpenAI or any compatible server.

    The client is built on first use, so constructing the model never needs a key or a network:
    ``api_key`` falls back to ``OPENAI_API_KEY``, and when neither is set a placeholder key is
    used if a ``base_url`` (or ``OPENAI_BASE_URL``) points at a server that does not need one.
    Each event loop gets its own client, closed as the loop shuts down, so the model works
    across ``asyncio.run`` calls. Pass ``client`` to reuse a configured ``openai.AsyncOpenAI``
    (then yours to close, on its one loop); ``max_retries`` and ``timeout`` then come from it.

    ``max_retries`` also bounds new tries of a response that arrived unreadable or cut short.
    ``ModelSettings.max_tokens`` is sent as ``max_completion_tokens`` (reasoning models refuse
    ``max_tokens``); ``max_tokens_field="max_tokens"`` sends the older field instead, for
    servers that know only that one (``infer_model`` does so for ollama, lmstudio and vllm).
    A refusal (the message's ``refusal`` field) is returned in ``ModelResponse.refusal`` and
    as the message's text; when streaming it is not passed on as text deltas but comes whole
    with the response, so a ``FallbackModel`` can still move on from it.
    """

    output_mode: OutputMode = "native"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        settings: ModelSettings | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
    ) -> None:
        if max_tokens_field not in ("max_completion_tokens", "max_tokens"):
            raise UserError(f"OpenAIChatModel(max_tokens_field={max_tokens_field!r}): use "
                            "'max_completion_tokens' or 'max_tokens'.")
        self.model = model
        self.name = f"openai:{model}"
        self.settings = settings
        self.max_tokens_field = max_tokens_field
        """The request field ``ModelSettings.max_tokens`` is sent in."""
        self._base_url = base_url
        self._api_key = api_key
        self._max_retries = max_retries
        self._timeout = timeout
        self._client = client
        self._clients = LoopClients(self._build_client)

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client: the one passed in, else the running loop's own (built on first use;
        outside a loop a new one). Raises ``UserError`` if no key is available."""
        return self._client if self._client is not None else self._clients.current()

    async def _loop_client(self) -> openai.AsyncOpenAI:
        return self._client if self._client is not None else await self._clients.get()

    def _build_client(self) -> openai.AsyncOpenAI:
        base_url = self._base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            if base_url is None:
                raise UserError(
                    f"{self.name} needs an API key: set OPENAI_API_KEY or pass api_key= "
                    "(or base_url= for a local server that needs none)."
                )
            api_key = _PLACEHOLDER_KEY
        return openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=self._max_retries,
            timeout=self._timeout if self._timeout is not None else openai.NOT_GIVEN,
        )

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send one turn and return the assistant message and its usage."""
        client = await self._loop_client()
        params, settings = self._params(request)
        when = deadline_at(settings)

        async def attempt() -> ModelResponse:
            async with asyncio.timeout_at(when):
                completion = await client.chat.completions.create(
                    **params,
                    timeout=_or_not_given(settings.timeout),
                    extra_body=settings.extra or None,
                )
            return self._parse(completion, settings, request.tools, request.output)

        with self._mapped_errors(client, settings):
            return await retrying(attempt, client.max_retries)

    async def stream(
        self, request: ModelRequest
    ) -> AsyncIterator[str | OutputDelta | ModelResponse]:
        """Yield text deltas as they arrive (and the pieces of a structured output's tool
        arguments), then the complete ``ModelResponse``.

        A stream that breaks or ends early is asked again while no text has been yielded;
        after that a new try would repeat text already passed on, so it fails at once.
        """
        client = await self._loop_client()
        params, settings = self._params(request)
        # Without include_usage the stream carries no token counts at all.
        params["stream_options"] = {"include_usage": True}
        when = deadline_at(settings)
        with self._mapped_errors(client, settings):
            for retry in range(client.max_retries + 1):
                state = _StreamState(self.model, settings, request.tools, request.output)
                try:
                    async with asyncio.timeout_at(when):
                        chunks = await client.chat.completions.create(
                            **params,
                            stream=True,
                            timeout=_or_not_given(settings.timeout),
                            extra_body=settings.extra or None,
                        )
                    async with chunks:
                        try:
                            async for chunk in bounded(chunks, when):
                                for piece in state.feed(chunk):
                                    yield piece
                        except openai.APIConnectionError as e:  # only the request is retried
                            raise BadResponse(f"the stream broke off: {e.__cause__ or e}") from e
                    response = state.response(self.name)
                except UNREADABLE as e:
                    if error := gave_up(e, retry, client.max_retries, state.streamed):
                        raise error from e
                    continue
                yield response
                return

    def _params(
        self, request: ModelRequest
    ) -> tuple[completion_create_params.CompletionCreateParamsBase, ModelSettings]:
        settings = ModelSettings.merge(self.settings, request.settings)
        params: completion_create_params.CompletionCreateParamsBase = {
            "model": self.model,
            "messages": _to_openai_messages(request),
        }
        tools = [_tool_param(t, strict=_strict(t, settings)) for t in request.tools]
        if tools:
            params["tools"] = tools
            if settings.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = settings.parallel_tool_calls
        output = request.output
        if output is not None:
            if output.mode == "native":
                params["response_format"] = _response_format(output)
            elif output.mode == "tool":  # the final-output tool is in ``tools``
                params["tool_choice"] = "required"
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        if settings.top_p is not None:
            params["top_p"] = settings.top_p
        if settings.max_tokens is not None:
            params[self.max_tokens_field] = settings.max_tokens
        return params, settings

    def _parse(
        self, completion: ChatCompletion, settings: ModelSettings,
        tools: Sequence[ToolDefinition], output: OutputSchema | None = None,
    ) -> ModelResponse:
        # A body that is not a completion (an HTML page, a proxy's JSON) comes back as is, or
        # as a completion without choices: the SDK does not validate what it reads.
        if not isinstance(completion, ChatCompletion) or not isinstance(completion.choices, list):
            raise BadResponse(f"not a chat completion: {str(completion)[:200]!r}")
        try:
            return self._parse_completion(completion, settings, tools, output)
        except (AttributeError, TypeError) as e:  # JSON of another shape, read unvalidated
            raise BadResponse(f"not a chat completion ({e})") from e

    def _parse_completion(
        self, completion: ChatCompletion, settings: ModelSettings,
        tools: Sequence[ToolDefinition], output: OutputSchema | None,
    ) -> ModelResponse:
        usage = _usage(completion.usage) if completion.usage is not None else Usage(requests=1)
        model_name = completion.model or self.model
        if not completion.choices:
            return ModelResponse(message=Message.assistant(""), usage=usage, model=model_name)
        choice = completion.choices[0]
        if choice.finish_reason == "length":
            raise _output_limit(self.name, settings)
        msg = choice.message
        tool_calls: list[ToolCall] = []
        for tc in msg.tool_calls or ():
            # Read defensively: compatible servers may omit the id or send a custom tool call.
            function = getattr(tc, "function", None)
            custom = getattr(tc, "custom", None)
            source = function if function is not None else custom
            if source is None:
                continue
            raw = getattr(source, "arguments", None)
            if raw is None:
                raw = getattr(source, "input", "")
            name = getattr(source, "name", "") or ""
            tool_calls.append(
                ToolCall(
                    id=getattr(tc, "id", None) or _new_call_id(),
                    name=name,
                    arguments=_own_arguments(_arguments_text(raw), name, tools, settings),
                )
            )
        refusal = msg.refusal or None
        content = _own_content(msg.content, output) or refusal or ""
        message = Message.assistant(content, tuple(tool_calls))
        return ModelResponse(message=message, usage=usage, model=model_name, refusal=refusal)

    def _mapped_errors(self, client: openai.AsyncOpenAI, settings: ModelSettings
                       ) -> AbstractContextManager[None]:
        """Turn SDK and transport failures into relayrace errors that say what to do."""
        return mapped_errors(_PROVIDER, f"{self.name} at {client.base_url}", client.max_retries,
                             settings)


@dataclass(slots=True)
class _PartialCall:
    """A tool call being assembled from streamed deltas."""

    id: str = ""
    name: str = ""
    arguments: str = ""


class _StreamState:
    """Assembles a streamed reply: text, tool calls by ``index``, and usage."""

    def __init__(
        self, model: str, settings: ModelSettings, tools: Sequence[ToolDefinition],
        output: OutputSchema | None,
    ) -> None:
        self.model = model
        self.settings = settings
        self.tools = tools
        self.output = output
        self.usage = Usage(requests=1)
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish_reason: str | None = None
        self.streamed = False
        """Whether text has been passed on (so a new try would repeat it)."""

    def feed(self, chunk: ChatCompletionChunk) -> list[str | OutputDelta]:
        """Take one chunk; return what it adds to pass on: its text, and the piece of a
        structured output's tool arguments (none, one or both)."""
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        if not chunk.choices:  # the final usage chunk has none
            return []
        passed: list[str | OutputDelta] = []
        output_tool = self.output.tool_name if self.output is not None and \
            self.output.mode == "tool" else None
        choice = chunk.choices[0]
        self.finish_reason = choice.finish_reason or self.finish_reason
        delta = choice.delta
        for position, tc in enumerate(delta.tool_calls or ()):
            # Id and name come in a call's first delta, arguments in pieces after it. Some
            # servers send each call whole and without `index`: fall back to its position.
            index = getattr(tc, "index", None)
            key = index if isinstance(index, int) else len(self.calls) + position
            call = self.calls.setdefault(key, _PartialCall())
            call.id = call.id or (tc.id or "")
            if tc.function is not None:
                call.name = call.name or (tc.function.name or "")
                more = _arguments_text(tc.function.arguments)
                call.arguments += more
                if more and call.name == output_tool:
                    passed.append(OutputDelta(more))
        if delta.refusal:  # kept back: a FallbackModel may still move on from it
            self.refusal.append(delta.refusal)
        piece = delta.content or ""
        self.text.append(piece)
        if piece:
            passed.insert(0, piece)
        self.streamed = self.streamed or bool(passed)  # a new try would repeat them
        return passed

    def response(self, name: str) -> ModelResponse:
        """The complete reply, once the stream has ended; an error if it is not complete."""
        if self.finish_reason is None:
            raise BadResponse("the stream ended before the answer was complete: no finish_reason")
        if self.finish_reason == "length":
            raise _output_limit(name, self.settings)
        calls = tuple(
            ToolCall(c.id or _new_call_id(), c.name,
                     _own_arguments(c.arguments, c.name, self.tools, self.settings))
            for _, c in sorted(self.calls.items())
        )
        refusal = "".join(self.refusal) or None
        text = _own_content("".join(self.text), self.output)
        message = Message.assistant(text or refusal or "", calls)
        return ModelResponse(message=message, usage=self.usage, model=self.model,
                             refusal=refusal)


def _output_limit(name: str, settings: ModelSettings) -> ModelBehaviorError:
    limit = f"max_tokens={settings.max_tokens}" if settings.max_tokens else "its output limit"
    return ModelBehaviorError(
        f"{name} stopped at {limit} before its answer was complete (finish_reason 'length'); "
        "the cut answer is not used: raise ModelSettings.max_tokens or ask for shorter output."
    )


def _to_openai_messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    """Normalized messages -> chat-completions messages, instructions first as a system one.

    Tool call ids are made unique in the request, each result sent with its call's id.
    """
    out: list[ChatCompletionMessageParam] = []
    if request.instructions.strip():
        out.append({"role": "system", "content": request.instructions})
    ids = tool_ids(request.messages)
    for i, m in enumerate(request.messages):
        if m.role == "system":
            out.append({"role": "system", "content": m.content})
        elif m.role == "user":
            out.append({"role": "user", "content": m.content})
        elif m.role == "assistant":
            assistant: ChatCompletionAssistantMessageParam = {"role": "assistant"}
            if m.tool_calls:
                assistant["tool_calls"] = [
                    {
                        "id": ids.calls[(i, j)],
                        "type": "function",
                        "function": {"name": tc.name, "arguments": _wire_arguments(tc.arguments)},
                    }
                    for j, tc in enumerate(m.tool_calls)
                ]
                assistant["content"] = m.content or None
            else:
                assistant["content"] = m.content
            out.append(assistant)
        else:
            out.append({"role": "tool", "tool_call_id": ids.results[i], "content": m.content})
    return out


def _tool_param(tool: ToolDefinition, *, strict: bool) -> ChatCompletionToolParam:
    param: ChatCompletionToolParam = {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }
    schema = strict_schema(tool.parameters) if strict else None
    if schema is not None:  # a schema strict mode cannot express goes as it is, not strict
        param["function"]["parameters"] = schema
        param["function"]["strict"] = True
    return param


def _response_format(output: OutputSchema) -> ResponseFormatJSONSchema:
    """``response_format`` for a native structured output: strict when the schema allows."""
    schema = strict_schema(output.schema)
    return {"type": "json_schema", "json_schema": {
        "name": output.name, "schema": schema or output.schema, "strict": schema is not None}}


def _own_content(content: str | None, output: OutputSchema | None) -> str | None:
    """A native structured answer without the nulls strict mode added for optional fields."""
    if not content or output is None or output.mode != "native":
        return content
    return drop_added_nulls(content, output.schema)


def _own_arguments(
    arguments: str, name: str, tools: Sequence[ToolDefinition], settings: ModelSettings
) -> str:
    """A strict tool's arguments without the nulls strict mode added for optional ones."""
    for tool in tools:
        if tool.name == name:
            return drop_added_nulls(arguments, tool.parameters) if _strict(tool, settings) \
                else arguments
    return arguments


def _strict(tool: ToolDefinition, settings: ModelSettings) -> bool:
    """Whether ``tool`` goes strict: its own say, else the request's ``strict_tools``."""
    return tool.strict if tool.strict is not None else bool(settings.strict_tools)


def _usage(usage: CompletionUsage) -> Usage:
    # Read defensively: compatible servers omit the details or send other shapes.
    prompt = getattr(usage, "prompt_tokens_details", None)
    completion = getattr(usage, "completion_tokens_details", None)
    return Usage(
        requests=1,
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=_count(getattr(prompt, "cached_tokens", None)),
        reasoning_tokens=_count(getattr(completion, "reasoning_tokens", None)),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _arguments_text(raw: object) -> str:
    """Arguments as raw text; a few servers send an object instead of a JSON string."""
    if raw is None:
        return ""
    return raw if isinstance(raw, str) else json.dumps(raw)


def _wire_arguments(arguments: str) -> str:
    """Past arguments as a JSON object, which vLLM and llama.cpp require (else HTTP 400).

    Same rule as the Anthropic adapter: blank is ``{}``, an object goes back as sent, anything
    else is kept as text under ``_raw_arguments``.
    """
    if not arguments.strip():
        return "{}"
    if arguments_object(arguments) is not None:
        return arguments
    return json.dumps({"_raw_arguments": arguments})


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _or_not_given(timeout: float | None) -> float | openai.NotGiven:
    return timeout if timeout is not None else openai.NOT_GIVEN


def _error_detail(e: openai.APIError) -> str:
    """The provider's own error message, without the SDK's 'Error code: ...' wrapping."""
    body: Any = e.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return e.message


def _status(e: openai.APIError) -> tuple[int | None, str, str]:
    """An API error's status and the provider's own message."""
    return e.status_code if isinstance(e, openai.APIStatusError) else None, _error_detail(e), ""


_PROVIDER = Provider(
    name="openai", api_error=openai.APIError, timeout_error=openai.APITimeoutError,
    connection_error=openai.APIConnectionError, status=_status, hints=_STATUS_HINTS,
    refused="the server refused the request",
    connect="check the network, the base_url, and that the server is running.",
    unusable="the server or a proxy in between is failing; retry later or check the base_url.")
