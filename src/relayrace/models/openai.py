"""The OpenAI Chat Completions adapter, for OpenAI and every OpenAI-compatible server.

One adapter covers OpenAI itself and local or hosted servers that speak the same API (Ollama,
vLLM, llama.cpp, LM Studio): point ``base_url`` at them.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..exceptions import ModelProviderError, UserError
from ..messages import Message, ToolCall
from ..usage import Usage
from .interface import Model, ModelRequest, ModelResponse, ModelSettings

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
    Pass ``client`` to reuse a configured ``openai.AsyncOpenAI``; ``max_retries`` and
    ``timeout`` then come from that client.
    """

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
    ) -> None:
        self.model = model
        self.name = f"openai:{model}"
        self.settings = settings
        self._base_url = base_url
        self._api_key = api_key
        self._max_retries = max_retries
        self._timeout = timeout
        self._client = client

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client, built on first use; raises ``UserError`` if no key is available."""
        if self._client is None:
            base_url = self._base_url or os.environ.get("OPENAI_BASE_URL") or None
            api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
            if not api_key:
                if base_url is None:
                    raise UserError(
                        f"{self.name} needs an API key: set OPENAI_API_KEY or pass api_key= "
                        "(or base_url= for a local server that needs none)."
                    )
                api_key = _PLACEHOLDER_KEY
            self._client = openai.AsyncOpenAI(
                api_key=api_key,
                base_url=base_url,
                max_retries=self._max_retries,
                timeout=self._timeout if self._timeout is not None else openai.NOT_GIVEN,
            )
        return self._client

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send one turn and return the assistant message and its usage."""
        client = self.client
        params, settings = self._params(request)
        with self._mapped_errors():
            completion = await client.chat.completions.create(
                **params,
                timeout=_or_not_given(settings.timeout),
                extra_body=settings.extra or None,
            )
        return self._parse(completion)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        """Yield text deltas as they arrive, then the complete ``ModelResponse``."""
        client = self.client
        params, settings = self._params(request)
        state = _StreamState(self.model)
        # Without include_usage the stream carries no token counts at all.
        params["stream_options"] = {"include_usage": True}
        with self._mapped_errors():
            chunks = await client.chat.completions.create(
                **params,
                stream=True,
                timeout=_or_not_given(settings.timeout),
                extra_body=settings.extra or None,
            )
            async with chunks:
                async for chunk in chunks:
                    if piece := state.feed(chunk):
                        yield piece
        yield state.response()

    def _params(
        self, request: ModelRequest
    ) -> tuple[completion_create_params.CompletionCreateParamsBase, ModelSettings]:
        settings = ModelSettings.merge(self.settings, request.settings)
        params: completion_create_params.CompletionCreateParamsBase = {
            "model": self.model,
            "messages": _to_openai_messages(request),
        }
        tools: list[ChatCompletionToolParam] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
        if tools:
            params["tools"] = tools
            if settings.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = settings.parallel_tool_calls
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        if settings.top_p is not None:
            params["top_p"] = settings.top_p
        if settings.max_tokens is not None:
            # `max_tokens`, not `max_completion_tokens`: every compatible server knows it.
            params["max_tokens"] = settings.max_tokens
        return params, settings

    def _parse(self, completion: ChatCompletion) -> ModelResponse:
        usage = _usage(completion.usage) if completion.usage is not None else Usage(requests=1)
        model_name = completion.model or self.model
        if not completion.choices:
            return ModelResponse(message=Message.assistant(""), usage=usage, model=model_name)
        msg = completion.choices[0].message
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
            tool_calls.append(
                ToolCall(
                    id=getattr(tc, "id", None) or _new_call_id(),
                    name=getattr(source, "name", "") or "",
                    arguments=_arguments_text(raw),
                )
            )
        content = msg.content or msg.refusal or ""
        message = Message.assistant(content, tuple(tool_calls))
        return ModelResponse(message=message, usage=usage, model=model_name)

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """Turn SDK failures into relayrace errors that say what to do."""
        try:
            yield
        except openai.APIError as e:
            raise self._provider_error(e) from e

    def _provider_error(self, e: openai.APIError) -> ModelProviderError:
        where = self.name if self._client is None else f"{self.name} at {self._client.base_url}"
        retries = self._client.max_retries if self._client is not None else self._max_retries
        if isinstance(e, openai.APITimeoutError):
            return ModelProviderError(
                f"{where} timed out (after {retries} retries): raise the timeout "
                "(ModelSettings.timeout or timeout=) or retry later.",
                provider="openai",
            )
        if isinstance(e, openai.APIConnectionError):
            return ModelProviderError(
                f"Could not connect to {where}: check the network, the base_url, and that "
                "the server is running.",
                provider="openai",
            )
        status = e.status_code if isinstance(e, openai.APIStatusError) else None
        detail = _error_detail(e)
        if status is None:
            return ModelProviderError(f"{where} failed: {detail}", provider="openai")
        if status >= 500:
            hint = f"a server error (after {retries} retries), usually transient: retry later"
        else:
            hint = _STATUS_HINTS.get(status, "the server refused the request")
        if status == 429:
            hint += f" (gave up after {retries} retries)"
        return ModelProviderError(
            f"{where} returned HTTP {status}: {detail} - {hint}.",
            status_code=status,
            provider="openai",
        )


@dataclass(slots=True)
class _PartialCall:
    """A tool call being assembled from streamed deltas."""

    id: str = ""
    name: str = ""
    arguments: str = ""


class _StreamState:
    """Assembles a streamed reply: text, tool calls by ``index``, and usage."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.usage = Usage(requests=1)
        self.text: list[str] = []
        self.calls: dict[int, _PartialCall] = {}

    def feed(self, chunk: ChatCompletionChunk) -> str:
        """Take one chunk; return the text it adds (``""`` if none)."""
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        if not chunk.choices:  # the final usage chunk has none
            return ""
        delta = chunk.choices[0].delta
        for position, tc in enumerate(delta.tool_calls or ()):
            # Id and name come in a call's first delta, arguments in pieces after it. Some
            # servers send each call whole and without `index`: fall back to its position.
            index = getattr(tc, "index", None)
            key = index if isinstance(index, int) else len(self.calls) + position
            call = self.calls.setdefault(key, _PartialCall())
            call.id = call.id or (tc.id or "")
            if tc.function is not None:
                call.name = call.name or (tc.function.name or "")
                call.arguments += _arguments_text(tc.function.arguments)
        piece = delta.content or delta.refusal or ""
        self.text.append(piece)
        return piece

    def response(self) -> ModelResponse:
        """The complete reply, once the stream has ended."""
        calls = tuple(
            ToolCall(c.id or _new_call_id(), c.name, c.arguments)
            for _, c in sorted(self.calls.items())
        )
        message = Message.assistant("".join(self.text), calls)
        return ModelResponse(message=message, usage=self.usage, model=self.model)


def _to_openai_messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    """Normalized messages -> chat-completions messages, instructions first as a system one."""
    out: list[ChatCompletionMessageParam] = []
    if request.instructions.strip():
        out.append({"role": "system", "content": request.instructions})
    for m in request.messages:
        if m.role == "system":
            out.append({"role": "system", "content": m.content})
        elif m.role == "user":
            out.append({"role": "user", "content": m.content})
        elif m.role == "assistant":
            assistant: ChatCompletionAssistantMessageParam = {"role": "assistant"}
            if m.tool_calls:
                assistant["tool_calls"] = [
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {"name": tc.name, "arguments": _wire_arguments(tc.arguments)},
                    }
                    for tc in m.tool_calls
                ]
                assistant["content"] = m.content or None
            else:
                assistant["content"] = m.content
            out.append(assistant)
        else:
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
    return out


def _usage(usage: CompletionUsage) -> Usage:
    return Usage(
        requests=1,
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
    )


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
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        parsed = None
    return arguments if isinstance(parsed, dict) else json.dumps({"_raw_arguments": arguments})


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
