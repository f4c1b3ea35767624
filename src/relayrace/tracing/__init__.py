"""Tracing: one trace per run, with nested spans for agents, model calls, tools and handoffs.
Layer: a port. Imports only `core`.


Spans go to the registered :class:`TraceProcessor` objects. :class:`InMemoryTraceProcessor`
keeps them for tests and the CLI; ``relayrace.tracing.otel`` exports them to OpenTelemetry.
A delegated child's spans nest under the parent's tool-call span, in the same trace.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "UNSEEN",
    "InMemoryTraceProcessor",
    "Span",
    "SpanKind",
    "Trace",
    "TraceProcessor",
    "add_trace_processor",
    "get_trace_processors",
    "set_trace_processors",
]

SpanKind = Literal["run", "agent", "model", "tool", "handoff", "delegation"]


@dataclass(slots=True, kw_only=True)
class Span:
    """A timed step of a run."""

    trace_id: str
    """The trace (one per top-level run) the span belongs to."""
    span_id: int
    """Unique within the process."""
    parent_id: int | None
    """The enclosing span, ``None`` for the run span."""
    kind: SpanKind
    """What the span measures."""
    name: str
    """The agent, model or tool name."""
    start_ns: int
    """Start, from ``time.time_ns`` (wall clock, for export)."""
    end_ns: int = 0
    """End; 0 while the span is open."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Details: model, tokens, tool call id, handoff source and target, ..."""
    error: str | None = None
    """Why the step failed, if it did."""

    @property
    def duration_ms(self) -> float:
        """How long the span lasted, in milliseconds."""
        return (self.end_ns - self.start_ns) / 1e6 if self.end_ns else 0.0


class _Dropped(MutableMapping[str, Any]):
    """The attributes of `UNSEEN`: always empty, whatever is written (nobody reads them, and
    one run's must not reach another's)."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        pass

    def __delitem__(self, key: str) -> None:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __or__(self, other: Mapping[str, Any]) -> dict[str, Any]:
        return dict(other)

    def __ior__(self, other: Mapping[str, Any]) -> _Dropped:
        return self

    def __repr__(self) -> str:
        return "{}"


class _Unseen(Span):
    """`UNSEEN`'s class: a span whose fields cannot be changed."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        pass

    def __delattr__(self, name: str) -> None:
        pass


def _unseen() -> Span:
    span: Span = object.__new__(_Unseen)
    for name, value in (("trace_id", ""), ("span_id", 0), ("parent_id", None), ("kind", "run"),
                        ("name", ""), ("start_ns", 0), ("end_ns", 0),
                        ("attributes", _Dropped()), ("error", None)):
        object.__setattr__(span, name, value)  # past _Unseen's __setattr__, once
    return span


UNSEEN = _unseen()
"""The span a run's steps get when no trace processor is registered: one placeholder, never
reported, and the same in every run: what is written on it (its attributes, its fields) is not
kept. So a run without tracing makes no spans."""


class TraceProcessor(Protocol):
    """Receives spans as they start and end."""

    def on_span_start(self, span: Span) -> None:
        """A span started."""

    def on_span_end(self, span: Span) -> None:
        """A span ended; its attributes are final."""


class _Hooks:
    """Processors with their hooks bound once: spans open and close several times a turn."""

    __slots__ = ("on_end", "on_start", "processors")

    def __init__(self, processors: Sequence[TraceProcessor]) -> None:
        self.processors = tuple(processors)
        # The in-memory processor does nothing at a span's start: skip the call.
        self.on_start = tuple(p.on_span_start for p in self.processors
                              if type(p).on_span_start is not InMemoryTraceProcessor.on_span_start)
        # ... and keeps a span at its end: append it to its list directly.
        self.on_end = tuple(
            p._spans.append if isinstance(p, InMemoryTraceProcessor)
            and type(p).on_span_end is InMemoryTraceProcessor.on_span_end else p.on_span_end
            for p in self.processors)


_registered = _Hooks(())
_ids = itertools.count(1)
_new = object.__new__
_now = time.time_ns
# Trace ids need to be unique, not secret; drawn from a generator of relayrace's own, so an
# application that seeds ``random`` does not make runs share trace ids (reseeded in a fork).
_rng = random.Random()
os.register_at_fork(after_in_child=_rng.seed)
_random_bits = _rng.getrandbits


def add_trace_processor(processor: TraceProcessor) -> None:
    """Send every future span to ``processor`` too."""
    global _registered
    _registered = _Hooks([*_registered.processors, processor])


def set_trace_processors(processors: Sequence[TraceProcessor]) -> None:
    """Replace the registered processors (an empty list turns tracing off)."""
    global _registered
    _registered = _Hooks(processors)


def get_trace_processors() -> tuple[TraceProcessor, ...]:
    """The registered processors."""
    return _registered.processors


class Trace:
    """The spans of one run, its delegated children included."""

    __slots__ = ("_on_end", "_on_start", "processors", "trace_id")

    def __init__(self, trace_id: str | None = None, *,
                 processors: Sequence[TraceProcessor] | None = None) -> None:
        self.trace_id = trace_id or _random_bits(128).to_bytes(16).hex()
        hooks = _registered if processors is None else _Hooks(processors)
        self.processors = hooks.processors
        self._on_start = hooks.on_start
        self._on_end = hooks.on_end

    def start(
        self, kind: SpanKind, name: str, parent: Span | None, **attributes: Any
    ) -> Span:
        """Open a span under ``parent`` (`UNSEEN` when no processor would see it)."""
        if not self.processors:  # nothing records spans: a run pays nothing for them
            return UNSEEN
        # Built field by field: the dataclass's __init__ is a call more, per span.
        span: Span = _new(Span)
        span.trace_id = self.trace_id
        span.span_id = next(_ids)
        span.parent_id = None if parent is None else parent.span_id
        span.kind = kind
        span.name = name
        span.start_ns = _now()
        span.end_ns = 0
        span.attributes = attributes
        span.error = None
        for on_start in self._on_start:
            on_start(span)
        return span

    def end(self, span: Span, error: BaseException | str | None = None) -> None:
        """Close ``span``, recording ``error`` if the step failed."""
        if span is UNSEEN:
            return
        span.end_ns = _now()
        if error is not None:
            span.error = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        for on_end in self._on_end:
            on_end(span)


class InMemoryTraceProcessor:
    """Keeps finished spans in memory, grouped by trace."""

    __slots__ = ("_spans",)

    def __init__(self) -> None:
        self._spans: list[Span] = []

    @property
    def spans(self) -> list[Span]:
        """The finished spans, in the order they ended."""
        return self._spans

    def on_span_start(self, span: Span) -> None:
        """Nothing to do until the span ends."""

    def on_span_end(self, span: Span) -> None:
        """Keep the span."""
        self._spans.append(span)

    def trace(self, trace_id: str) -> list[Span]:
        """The spans of one trace, in start order."""
        return sorted((s for s in self.spans if s.trace_id == trace_id), key=lambda s: s.span_id)

    def tree(self, trace_id: str) -> list[tuple[int, Span]]:
        """The spans of one trace depth-first, each with its depth (the run span is 0)."""
        spans = self.trace(trace_id)
        children: dict[int | None, list[Span]] = {}
        for s in spans:
            children.setdefault(s.parent_id, []).append(s)
        ids = {s.span_id for s in spans}
        roots = [s for s in spans if s.parent_id is None or s.parent_id not in ids]

        def visit(span: Span, depth: int) -> Iterator[tuple[int, Span]]:
            yield depth, span
            for child in children.get(span.span_id, []):
                yield from visit(child, depth + 1)

        return [item for root in roots for item in visit(root, 0)]

    def outline(self, trace_id: str) -> list[str]:
        """The tree as indented ``kind:name`` lines, handy in assertions."""
        return ["  " * d + f"{s.kind}:{s.name}" for d, s in self.tree(trace_id)]

    def clear(self) -> None:
        """Forget every span."""
        self._spans.clear()
