"""Export relayrace spans to OpenTelemetry, following the GenAI semantic conventions.

Register the processor once; every later run becomes one OpenTelemetry trace::

    from relayrace.tracing import add_trace_processor
    from relayrace.tracing.otel import OpenTelemetryProcessor

    add_trace_processor(OpenTelemetryProcessor())  # uses the global tracer provider

Span names and attributes follow https://opentelemetry.io/docs/specs/semconv/gen-ai/ (model
calls are ``chat {model}``, tools ``execute_tool {tool}``, agents ``invoke_agent {agent}``);
what the conventions do not cover is exported under the ``relayrace.`` prefix.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from .._version import __version__
from ..core.exceptions import UserError
from . import Span

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise UserError(
        "relayrace.tracing.otel needs OpenTelemetry: pip install 'relayrace[otel]'"
    ) from exc

__all__ = ["OpenTelemetryProcessor"]

TEST_PROVIDER = "relayrace.test"
"""``gen_ai.provider.name`` of models whose name has no ``provider:`` prefix (test models)."""

_OPERATIONS = {
    "run": "invoke_agent",
    "agent": "invoke_agent",
    "delegation": "invoke_agent",
    "model": "chat",
    "tool": "execute_tool",
}
# Engine attributes mapped to GenAI names, or exported under a dedicated relayrace name.
_MAPPED = frozenset(
    {
        "agent",
        "input_tokens",
        "output_tokens",
        "response_model",
        "call_id",
        "session_id",
        "from_agent",
        "to_agent",
        "reason",
    }
)
# Attributes that may hold prompts, model output or tool arguments: opt-in only.
_CONTENT = frozenset(
    {
        "reason",
        "input",
        "output",
        "arguments",
        "result",
        "instructions",
        "messages",
        "content",
        "text",
    }
)
_ERROR_TYPE = re.compile(r"([A-Za-z_][\w.]*): ")


def _primitive(value: Any) -> bool:
    return isinstance(value, str | bool | int | float)


def _split_model(name: str) -> tuple[str, str]:
    """``"openai:gpt-4o"`` -> ``("openai", "gpt-4o")``; no prefix means a test model."""
    provider, sep, model = name.partition(":")
    return (provider, model) if sep and provider and model else (TEST_PROVIDER, name)


def _span_name(span: Span) -> str:
    a = span.attributes
    if span.kind == "run":
        return f"relayrace.run {span.name}"
    if span.kind in ("agent", "delegation"):
        return f"invoke_agent {span.name}"
    if span.kind == "model":
        return f"chat {_split_model(span.name)[1]}"
    if span.kind == "tool":
        return f"execute_tool {span.name}"
    if span.kind == "handoff" and "from_agent" in a and "to_agent" in a:
        return f"handoff {a['from_agent']} -> {a['to_agent']}"
    return f"{span.kind} {span.name}"


class OpenTelemetryProcessor:
    """A :class:`~relayrace.tracing.TraceProcessor` that mirrors spans into OpenTelemetry.

    Each relayrace trace becomes one OpenTelemetry trace with the same parent/child shape;
    spans keep relayrace's start and end times. A run started inside an active OpenTelemetry
    span (a server's request carrying a ``traceparent``, say) joins that span's trace; while a
    tool or a model call runs, its span is the current one, so spans the tool or the model's
    client open nest under it. ``capture_content=True`` also exports attributes that may hold
    conversation content (such as a handoff's reason), which the GenAI conventions leave off
    by default.
    """

    def __init__(
        self,
        *,
        tracer_provider: otel_trace.TracerProvider | None = None,
        capture_content: bool = False,
    ) -> None:
        provider = tracer_provider or otel_trace.get_tracer_provider()
        self.tracer = provider.get_tracer("relayrace", __version__)
        self.capture_content = capture_content
        self._lock = threading.Lock()
        # Open spans: relayrace span id -> (OTel span, conversation id).
        self._open: dict[int, tuple[otel_trace.Span, str | None]] = {}
        # The open root (run) span of each relayrace trace, for spans whose parent is unknown.
        self._roots: dict[str, int] = {}
        # Tool and model spans made current while they run: relayrace span id -> the token.
        self._current: dict[int, object] = {}

    def on_span_start(self, span: Span) -> None:
        """Start the OpenTelemetry span, under the span of ``span.parent_id``."""
        with self._lock:
            parent = self._open.get(span.parent_id) if span.parent_id is not None else None
            if parent is None and span.parent_id is not None and span.trace_id in self._roots:
                parent = self._open.get(self._roots[span.trace_id])
        session = span.attributes.get("session_id")
        conversation = session if isinstance(session, str) and session else None
        if conversation is None and parent is not None:
            conversation = parent[1]
        # A run's first span joins the caller's current span (if any); every other span
        # parents explicitly on its relayrace parent's span.
        ctx = otel_trace.set_span_in_context(parent[0]) if parent is not None \
            else otel_context.get_current()
        otel_span = self.tracer.start_span(
            _span_name(span),
            context=ctx,
            kind=SpanKind.CLIENT if span.kind == "model" else SpanKind.INTERNAL,
            attributes=self._attributes(span, conversation),
            start_time=span.start_ns,
        )
        with self._lock:
            self._open[span.span_id] = (otel_span, conversation)
            if parent is None:
                self._roots.setdefault(span.trace_id, span.span_id)
        if span.kind in ("tool", "model"):  # started and ended in the task that runs it
            self._current[span.span_id] = otel_context.attach(
                otel_trace.set_span_in_context(otel_span))

    def on_span_end(self, span: Span) -> None:
        """Set the final attributes and status, then end the OpenTelemetry span."""
        token = self._current.pop(span.span_id, None)
        if token is not None:
            otel_context.detach(token)  # type: ignore[arg-type]
        with self._lock:
            entry = self._open.pop(span.span_id, None)
            if self._roots.get(span.trace_id) == span.span_id:
                del self._roots[span.trace_id]
        if entry is None:  # started before this processor was registered
            return
        otel_span, conversation = entry
        otel_span.set_attributes(self._attributes(span, conversation))
        if span.error is not None:
            match = _ERROR_TYPE.match(span.error)
            otel_span.set_attribute("error.type", match.group(1) if match else "_OTHER")
            otel_span.set_status(Status(StatusCode.ERROR, span.error))
        otel_span.end(end_time=span.end_ns or None)

    def _attributes(self, span: Span, conversation: str | None) -> dict[str, Any]:
        """The OpenTelemetry attributes of ``span`` as it is now."""
        a = span.attributes
        out: dict[str, Any] = {
            "relayrace.span.kind": span.kind,
            "relayrace.trace_id": span.trace_id,
            "relayrace.span_id": span.span_id,
        }
        operation = _OPERATIONS.get(span.kind)
        if operation is not None:
            out["gen_ai.operation.name"] = operation
        if conversation is not None:
            out["gen_ai.conversation.id"] = conversation
        if span.kind in ("run", "agent", "delegation"):
            out["gen_ai.agent.name"] = span.name
        elif isinstance(a.get("agent"), str):
            out["gen_ai.agent.name"] = a["agent"]
        if span.kind == "model":
            out["gen_ai.provider.name"], out["gen_ai.request.model"] = _split_model(span.name)
            response_model = a.get("response_model")
            if isinstance(response_model, str) and response_model:
                out["gen_ai.response.model"] = response_model  # as the provider sent it
            for key in ("input_tokens", "output_tokens"):
                if isinstance(a.get(key), int):
                    out[f"gen_ai.usage.{key}"] = a[key]
        elif span.kind == "tool":
            out["gen_ai.tool.name"] = span.name
            out["gen_ai.tool.type"] = "function"
            if isinstance(a.get("call_id"), str):
                out["gen_ai.tool.call.id"] = a["call_id"]
        elif span.kind == "handoff":
            for key, name in (("from_agent", "from"), ("to_agent", "to"), ("reason", "reason")):
                value = a.get(key)
                if _primitive(value) and (self.capture_content or key not in _CONTENT):
                    out[f"relayrace.handoff.{name}"] = value
            if isinstance(a.get("from_agent"), str):
                out["gen_ai.agent.name"] = a["from_agent"]
        for key, value in a.items():
            if key in _MAPPED or not _primitive(value):
                continue
            if self.capture_content or key not in _CONTENT:
                out[f"relayrace.{key}"] = value
        return out
