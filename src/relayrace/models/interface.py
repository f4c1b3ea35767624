"""The small async interface every model provider implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ..core.exceptions import UserError
from ..core.messages import Message
from ..core.usage import Usage

__all__ = [
    "DEFAULT_DEADLINE",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputDelta",
    "OutputMode",
    "OutputSchema",
    "StatusUpdate",
    "ToolDefinition",
]

DEFAULT_DEADLINE = 600.0
"""Seconds a provider adapter's model request may take in all unless ``ModelSettings.deadline``
says otherwise."""


@dataclass(slots=True, kw_only=True)
class ToolDefinition:
    """A tool as offered to a model."""

    name: str
    """The name the model calls it by."""
    description: str
    """What it does and when to use it."""
    parameters: dict[str, Any]
    """A JSON Schema object for its arguments."""
    strict: bool | None = None
    """Offer it with a strict schema (``None``: as the request's ``strict_tools`` says)."""


OutputMode = Literal["native", "tool", "prompted"]
"""How a model is asked for structured output (see ``relayrace.agents.output``)."""


@dataclass(slots=True, kw_only=True, frozen=True)
class OutputSchema:
    """The structured final answer a request asks for, in a provider-neutral form.

    ``"native"``: the adapter constrains the answer's text to ``schema`` its provider's way.
    ``"tool"``: ``tools`` include ``tool_name`` with ``schema`` as its parameters, and the
    adapter makes the model call a tool (this one, or another it needs first).
    ``"prompted"``: the instructions carry the schema; nothing more is sent.
    """

    name: str
    """The schema's name (letters, digits, ``_`` and ``-``)."""
    schema: dict[str, Any]
    """A JSON Schema object for the answer."""
    mode: OutputMode
    """How the answer is asked for."""
    tool_name: str
    """The final-output tool's name (``"tool"`` mode)."""
    wrapper: str | None = None
    """The one property the value travels in, when it is not itself an object (providers
    want an object at the top): ``{"response": [1, 2]}`` for a ``list[int]``."""


@dataclass(slots=True, kw_only=True)
class ModelSettings:
    """Sampling and transport options; ``None`` leaves the provider's default."""

    temperature: float | None = None
    """Sampling temperature."""
    top_p: float | None = None
    """Nucleus sampling mass."""
    max_tokens: int | None = None
    """Most tokens to generate per request (sent to OpenAI as ``max_completion_tokens``)."""
    parallel_tool_calls: bool | None = None
    """Whether the model may emit several tool calls in one turn (OpenAI-compatible only)."""
    timeout: float | None = None
    """Seconds to wait for a connection or for each read before the SDK retries."""
    deadline: float | None = None
    """Seconds one model request may take in all (retries and the whole stream included)
    before it fails with ``ModelProviderError``; ``None`` is ``DEFAULT_DEADLINE`` (600)."""
    strict_tools: bool | None = None
    """Send tool schemas with ``"strict": true``, made strict-compatible (OpenAI-compatible
    only): the model's arguments then always match the schema. Optional parameters become
    nullable, and a ``null`` the model sends for one is dropped, so its default applies."""
    text_tool_calls: Literal["reask", "parse", "off"] | None = None
    """What a final answer that is only tool calls written as text becomes (small local
    models write ```` ```json {"name": ..., "arguments": ...} ``` ````, ``{{...}}`` or
    ``<tool_call>...</tool_call>`` instead of calling): ``"reask"`` (``None``, the default)
    tells the model once to call the tool, and a second time fails the run with
    ``ModelBehaviorError``; ``"parse"`` runs them as tool calls; ``"off"`` takes the text as
    the answer. Read by the run, never sent to a provider."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific options passed through unchanged."""

    def __post_init__(self) -> None:
        if self.text_tool_calls not in (None, "reask", "parse", "off"):
            raise UserError(f"ModelSettings(text_tool_calls={self.text_tool_calls!r}) is not "
                              "a choice: give 'reask', 'parse' or 'off'.")

    @staticmethod
    def merge(base: ModelSettings | None, override: ModelSettings | None) -> ModelSettings:
        """Field by field: a non-``None`` field of ``override`` wins; ``extra`` dicts merge."""
        merged = ModelSettings()
        for layer in (base, override):
            if layer is None:
                continue
            for f in fields(ModelSettings):
                value = getattr(layer, f.name)
                if f.name == "extra":
                    merged.extra = {**merged.extra, **value}
                elif value is not None:
                    setattr(merged, f.name, value)
        return merged


@dataclass(slots=True, kw_only=True)
class ModelRequest:
    """Everything a model is asked with on one turn."""

    instructions: str
    """The active agent's system prompt, already rendered."""
    messages: Sequence[Message]
    """The conversation as this agent sees it, oldest first."""
    tools: Sequence[ToolDefinition] = ()
    """The tools offered this turn (handoff tools included)."""
    settings: ModelSettings | None = None
    """Per-agent settings, if any."""
    agent: str = ""
    """The name of the agent asking; for traces and test doubles, never sent to a provider."""
    output: OutputSchema | None = None
    """The structured final answer asked for, if any."""
    conversation: str = ""
    """Names the conversation the request belongs to, the same on every turn and resume: the
    session's id, or for a delegated child's request, its parent session's id. A model that
    keeps state elsewhere per conversation (a remote A2A agent) keys it on this; never sent to
    a provider."""


@dataclass(slots=True, frozen=True)
class StatusUpdate:
    """Progress of a model that is itself an agent elsewhere (a remote A2A agent's task
    updates): ``Model.stream`` may yield it; the run shows it as a ``StatusEvent`` in
    ``Runner.stream``, never logs it, and it is no part of the answer."""

    text: str
    """What the remote agent reported."""
    state: str = "working"
    """The remote task's state (``working``, ``input-required``, ...)."""


@dataclass(slots=True, frozen=True)
class OutputDelta:
    """A piece of a structured output's JSON as it streams through the output tool's
    arguments (``output_mode="tool"``): ``Model.stream`` may yield it beside text deltas, so
    partial values stream in that mode too."""

    json: str
    """The next characters of the tool's arguments."""


@dataclass(slots=True)
class ModelResponse:
    """A model's answer: one assistant message and what it cost."""

    message: Message
    """The assistant message (text, tool calls or both)."""
    usage: Usage
    """Tokens used; ``requests`` is 1."""
    model: str = ""
    """The model that answered, as the provider named it."""
    refusal: str | None = None
    """Set when the model declined to answer, by its provider's own signal (OpenAI's
    ``refusal`` field, Anthropic's ``stop_reason`` ``"refusal"``): the refusal's text, which
    ``message`` also holds. ``FallbackModel`` moves on to its next model on it."""
    served: dict[str, Usage] = field(default_factory=dict)
    """For a model that asks other models (``FallbackModel``): what each of them used for this
    request, by model name (one request per response, a refusal moved on from included);
    ``usage`` is their sum. Empty when the model asked answered itself."""
    remote: Usage | None = None
    """For a model that stands for a whole agent run elsewhere (a relayrace agent reached over
    A2A): what that run used. Its requests past this one and its tool calls count as the
    asking agent's, with ``usage``'s tokens (which are that run's tokens)."""


class Model(ABC):
    """A chat model. Implement ``request``; override ``stream`` to stream text as it comes."""

    name: str = "model"
    """The model's name, shown in traces and usage."""
    output_mode: OutputMode = "tool"
    """How this model is asked for structured output when the agent does not say (set it on
    an instance to change it for that model)."""
    settings: ModelSettings | None = None
    """The settings every request of this model takes (a request's own win field by field);
    the run reads ``text_tool_calls`` from here when the agent's settings do not say."""
    supports_tools: bool = True
    """Whether the model can call tools. A delegated child whose model cannot reports in a
    ``<handoff>`` text block instead of calling ``submit_report``."""

    @abstractmethod
    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer one turn."""

    async def stream(
        self, request: ModelRequest
    ) -> AsyncIterator[str | OutputDelta | StatusUpdate | ModelResponse]:
        """Yield text deltas as they arrive (and ``OutputDelta`` pieces of a structured
        output asked for through a tool, ``StatusUpdate``s of a remote agent's progress), then
        the complete ``ModelResponse`` last."""
        yield await self.request(request)
