"""Guardrails: cheap synchronous checks of the text going into or out of an agent.

A guardrail answers *allow*, *redact* (with a cleaned text) or *block* about one text; whether
it guards input or output is the agent's configuration. ``apply_guardrails`` runs a list in
order, composing redactions and stopping at the first block; ``block_message`` words a block for
the user. Built in: PII, maximum length, topic deny-list, content filter and a token budget
per turn (``CostLimit``, checked before each model request rather than on a text); custom
ones are ``@guardrail`` functions; ``guardrail_from_config`` builds the built-ins from plain
(YAML) data.
"""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, overload

from ..core.exceptions import ConfigError, UserError
from ..core.pii import (
    PII_KINDS,
    PII_LABELS,
    PIIMatch,
    check_kinds,
    find_pii,
    iban_valid,
    luhn_valid,
    splice,
    suggestion,
)

__all__ = [
    "PII_KINDS",
    "ContentFilterGuardrail",
    "CostLimit",
    "FunctionGuardrail",
    "Guardrail",
    "GuardrailFunction",
    "GuardrailResult",
    "MaxLengthGuardrail",
    "PIIGuardrail",
    "PIIMatch",
    "TopicDenyListGuardrail",
    "Tripwire",
    "apply_guardrails",
    "block_message",
    "find_pii",
    "guardrail",
    "guardrail_from_config",
    "iban_valid",
    "luhn_valid",
]

_ACTIONS = ("allow", "redact", "block")


@dataclass(slots=True, kw_only=True)
class GuardrailResult:
    """What one guardrail decided about one text."""

    action: Literal["allow", "redact", "block"]
    """``allow`` (text unchanged), ``redact`` (``text`` was cleaned or cut) or ``block``."""
    text: str
    """The text after this guardrail: the redacted or truncated text when ``action`` is redact."""
    message: str = ""
    """What was found, never the sensitive content itself, e.g. ``2 e-mail addresses``."""
    guardrail: str = ""
    """Name of the guardrail that decided (filled in for custom guardrails that leave it empty)."""
    tripwire: bool = False
    """For a block: raise ``GuardrailTripwireTriggered`` instead of answering (see ``Tripwire``)."""

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            raise UserError(
                f"GuardrailResult.action must be allow, redact or block, not {self.action!r}."
            )


class Guardrail(ABC):
    """A cheap, synchronous check of one text, usable as an input or an output guardrail."""

    name: str
    """Shown in results, block messages and traces."""
    streams: bool = False
    """Whether an answer may stream through this guardrail as an output guardrail, sentence by
    sentence. True promises that ``check`` never blocks, and that what it keeps of a text ending
    at a sentence end or line break stays the start of what it keeps once more text follows
    (the built-in redactions and truncation keep it). An answer through any guardrail without
    it is held until the whole answer has passed, since a block withholds all of it."""

    @abstractmethod
    def check(self, text: str, context: Any) -> GuardrailResult:
        """Decide about ``text``; ``context`` is the run context (the built-ins ignore it)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={getattr(self, 'name', None)!r})"


def apply_guardrails(
    guardrails: Sequence[Guardrail], text: str, context: Any
) -> tuple[str, list[GuardrailResult]]:
    """Run ``guardrails`` in order over ``text``.

    Each guardrail sees the text left by the previous one, so redactions compose. Returns the
    final text and the non-allow results; on a block, the run stops there, the last result is
    the block and the text is that result's text (callers show ``block_message`` instead).
    """
    results: list[GuardrailResult] = []
    for rail in guardrails:
        result = rail.check(text, context)
        if result.action == "allow":
            continue  # an allow never changes the text, whatever ``result.text`` says
        results.append(result)
        text = result.text
        if result.action == "block":
            break
    return text, results


class Tripwire(Guardrail):
    """Wraps a guardrail so that its blocks end the run with ``GuardrailTripwireTriggered``.

    A plain block answers the user and keeps the run's result; a tripwire is for content that
    must stop the program instead (an alert, a human review).
    """

    def __init__(self, inner: Guardrail) -> None:
        self.inner = inner
        self.name = inner.name
        self.streams = inner.streams  # a guardrail that never blocks never trips either

    def check(self, text: str, context: Any) -> GuardrailResult:
        """The inner guardrail's result, with its blocks marked as tripwires."""
        result = self.inner.check(text, context)
        if result.action == "block":
            result.tripwire = True
            result.guardrail = result.guardrail or self.name
        return result


def block_message(result: GuardrailResult, *, stage: Literal["input", "output"] = "input") -> str:
    """The answer shown to the user when ``stage`` text was blocked by ``result``."""
    if result.action != "block":
        raise UserError(f"block_message needs a block result, got {result.action!r}.")
    detail = f" ({result.message})" if result.message else ""
    by = f"the {result.guardrail} guardrail" if result.guardrail else "a guardrail"
    if stage == "output":
        return f"I'm sorry, I can't share that answer: it was blocked by {by}{detail}."
    return f"I can't help with that: the request was blocked by {by}{detail}."


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"A guardrail name must be a non-empty string, not {name!r}.")
    return name


class PIIGuardrail(Guardrail):
    """Redacts (or blocks on) e-mail addresses, phone numbers, card numbers and IBANs.

    Redaction replaces each with ``[EMAIL]``, ``[PHONE]``, ``[CARD]`` or ``[IBAN]``. On a block
    the result's text is redacted too, so traces never hold the sensitive content.
    """

    def __init__(
        self,
        *,
        action: Literal["redact", "block"] = "redact",
        kinds: Collection[str] = PII_KINDS,
        name: str = "pii",
    ) -> None:
        if action not in ("redact", "block"):
            raise UserError(f"PIIGuardrail action must be 'redact' or 'block', not {action!r}.")
        self.action: Literal["redact", "block"] = action
        self.kinds = check_kinds(kinds)
        self.name = _check_name(name)
        # Matches never span a sentence end or line break, so redacting streams.
        self.streams = action == "redact"

    def check(self, text: str, context: Any) -> GuardrailResult:
        """Find personal data and redact it, or block when ``action`` is block."""
        matches = find_pii(text, self.kinds)
        if not matches:
            return GuardrailResult(action="allow", text=text, guardrail=self.name)
        redacted = splice(text, ((m.start, m.end, f"[{m.kind.upper()}]") for m in matches))
        counts = Counter(m.kind for m in matches)
        message = ", ".join(  # "2 e-mail addresses, 1 card number": counts, never content
            f"{n} {PII_LABELS[k]}{'' if n == 1 else 'es' if k == 'email' else 's'}"
            for k in PII_KINDS
            if (n := counts[k])
        )
        return GuardrailResult(
            action=self.action, text=redacted, message=message, guardrail=self.name
        )


class MaxLengthGuardrail(Guardrail):
    """Blocks texts longer than ``max_chars``, or cuts them down (a ``redact`` result)."""

    def __init__(
        self,
        max_chars: int,
        *,
        action: Literal["truncate", "block"] = "block",
        name: str = "max_length",
    ) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise UserError(f"max_chars must be a positive integer, not {max_chars!r}.")
        if action not in ("truncate", "block"):
            raise UserError(
                f"MaxLengthGuardrail action must be 'truncate' or 'block', not "
                f"{action!r}.{suggestion(action, ('truncate', 'block'))}"
            )
        self.max_chars = max_chars
        self.action: Literal["truncate", "block"] = action
        self.name = _check_name(name)
        self.streams = action == "truncate"  # the first max_chars stay the first max_chars

    def check(self, text: str, context: Any) -> GuardrailResult:
        """Allow texts up to ``max_chars`` characters; truncate or block longer ones."""
        if len(text) <= self.max_chars:
            return GuardrailResult(action="allow", text=text, guardrail=self.name)
        if self.action == "truncate":
            message = f"truncated from {len(text):,} to {self.max_chars:,} characters"
            return GuardrailResult(
                action="redact", text=text[: self.max_chars], message=message, guardrail=self.name
            )
        message = f"{len(text):,} characters, over the {self.max_chars:,}-character limit"
        return GuardrailResult(action="block", text=text, message=message, guardrail=self.name)


class TopicDenyListGuardrail(Guardrail):
    """Blocks texts that mention a denied topic: case-insensitive whole words or phrases.

    ``"credit card"`` matches ``Credit  Card`` but ``"crypto"`` does not match
    ``cryptocurrency``: list the variants you mean.
    """

    def __init__(self, topics: Sequence[str], *, name: str = "topic_filter") -> None:
        if isinstance(topics, str) or not isinstance(topics, Sequence) or not topics:
            raise UserError(f"topics must be a non-empty list of topics, not {topics!r}.")
        if not all(isinstance(t, str) and t.strip() for t in topics):
            raise UserError(f"Every topic must be a non-empty string; got {list(topics)!r}.")
        self.topics = tuple(dict.fromkeys(" ".join(t.split()) for t in topics))
        self.name = _check_name(name)
        # Longest first, so the longer phrase names the match when topics overlap.
        order = sorted(range(len(self.topics)), key=lambda i: -len(self.topics[i]))
        alternatives = "|".join(
            f"(?P<t{i}>" + r"\s+".join(map(re.escape, self.topics[i].split())) + ")" for i in order
        )
        self._pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)

    def check(self, text: str, context: Any) -> GuardrailResult:
        """Block if ``text`` mentions a denied topic; the message names the topics found."""
        hits = dict.fromkeys(
            self.topics[int(m.lastgroup[1:])] for m in self._pattern.finditer(text) if m.lastgroup
        )
        if not hits:
            return GuardrailResult(action="allow", text=text, guardrail=self.name)
        noun = "denied topic" if len(hits) == 1 else "denied topics"
        message = f"{noun} " + ", ".join(f'"{t}"' for t in hits)
        return GuardrailResult(action="block", text=text, message=message, guardrail=self.name)


class ContentFilterGuardrail(Guardrail):
    """Redacts or blocks text matching regular expressions or keywords (Astromesh's
    ``content_filter``), case-insensitively.

    ``patterns`` are regular expressions; ``keywords`` are literal words or phrases matched as
    whole words. ``redact`` replaces each match with ``replacement``; ``block`` withholds the
    text. The result's message counts the matches, never repeating them.
    """

    def __init__(
        self,
        *,
        patterns: Sequence[str] = (),
        keywords: Sequence[str] = (),
        action: Literal["redact", "block"] = "redact",
        replacement: str = "[FILTERED]",
        name: str = "content_filter",
    ) -> None:
        if action not in ("redact", "block"):
            raise UserError(f"ContentFilterGuardrail action must be 'redact' or 'block', not "
                            f"{action!r}.{suggestion(action, ('redact', 'block'))}")
        for label, items in (("patterns", patterns), ("keywords", keywords)):
            if isinstance(items, str) or not all(isinstance(i, str) and i.strip()
                                                 for i in items):
                raise UserError(f"ContentFilterGuardrail {label} must be a list of non-empty "
                                f"strings, not {items!r}.")
        if not patterns and not keywords:
            raise UserError("ContentFilterGuardrail needs at least one pattern or keyword.")
        compiled = []
        for p in patterns:
            try:
                compiled.append(re.compile(p, re.IGNORECASE))
            except re.error as exc:
                raise UserError(f"ContentFilterGuardrail pattern {p!r} is not a valid regular "
                                f"expression: {exc}.") from None
        compiled += [re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, k.split())) + r"(?!\w)",
                                re.IGNORECASE) for k in keywords]
        self._patterns = tuple(compiled)
        self.patterns, self.keywords = tuple(patterns), tuple(keywords)
        self.action: Literal["redact", "block"] = action
        self.replacement = replacement
        self.name = _check_name(name)
        # A keyword never spans a sentence end; a regular expression might.
        self.streams = action == "redact" and not patterns

    def check(self, text: str, context: Any) -> GuardrailResult:
        """Redact or block the matches in ``text``."""
        kept, found = text, 0
        for pattern in self._patterns:
            kept, n = pattern.subn(self.replacement, kept)
            found += n
        if not found:
            return GuardrailResult(action="allow", text=text, guardrail=self.name)
        message = f"{found} filtered match{'' if found == 1 else 'es'}"
        return GuardrailResult(action=self.action, text=kept if self.action == "redact" else text,
                               message=message, guardrail=self.name)


class CostLimit(Guardrail):
    """A token budget per turn (Astromesh's ``cost_limit``): before each model request of the
    agent, the tokens its run has used so far (its delegated children included) are counted,
    ``output`` tokens or the ``total``; at ``max_tokens_per_turn`` or more, the agent answers
    with ``message`` (default: one saying the budget is used up) instead of calling the model.

    A block is an answer, not an error, as in Astromesh; the request that crosses the limit
    completes. Give it in ``input_guardrails`` or ``output_guardrails``: it checks no text.
    For a hard cap across a whole run, use ``UsageLimits``.
    """

    streams = True  # it never looks at text

    def __init__(self, max_tokens_per_turn: int, *,
                 count: Literal["output", "total"] = "output", message: str | None = None,
                 name: str = "cost_limit") -> None:
        if isinstance(max_tokens_per_turn, bool) or not isinstance(max_tokens_per_turn, int) \
                or max_tokens_per_turn < 1:
            raise UserError(f"CostLimit max_tokens_per_turn must be a positive integer, not "
                            f"{max_tokens_per_turn!r}.")
        if count not in ("output", "total"):
            raise UserError(f"CostLimit count must be 'output' or 'total', not {count!r}."
                            f"{suggestion(count, ('output', 'total'))}")
        if message is not None and (not isinstance(message, str) or not message.strip()):
            raise UserError(f"CostLimit message must be a non-empty string, not {message!r}.")
        self.max_tokens_per_turn = max_tokens_per_turn
        self.count: Literal["output", "total"] = count
        self.message = message
        self.name = _check_name(name)

    def check(self, text: str, context: Any) -> GuardrailResult:
        """Allow: a cost limit is checked on usage, before each model request."""
        return GuardrailResult(action="allow", text=text, guardrail=self.name)

    def over(self, output_tokens: int, total_tokens: int) -> GuardrailResult | None:
        """The block once the counted tokens reach the limit, else ``None``."""
        used = output_tokens if self.count == "output" else total_tokens
        if used < self.max_tokens_per_turn:
            return None
        kind = "output tokens" if self.count == "output" else "tokens"
        found = f"{used:,} {kind} used this turn, limit {self.max_tokens_per_turn:,}"
        return GuardrailResult(action="block", text="", message=found, guardrail=self.name)

    def answer(self, result: GuardrailResult) -> str:
        """What the user is told when ``result`` (from ``over``) stops the turn."""
        return self.message or (f"I have to stop here: this turn's token budget is used up "
                                f"({result.message}).")


GuardrailFunction = Callable[[str, Any], "GuardrailResult | bool | str | None"]
"""A custom check: ``fn(text, context)`` returning a result, a bool, a replacement or None."""


class FunctionGuardrail(Guardrail):
    """A guardrail written as a plain synchronous function (see ``GuardrailFunction``).

    The function returns a ``GuardrailResult``; ``True``/``None`` (allow); ``False`` (block);
    or a ``str`` replacement text (redact; allow when it equals the input). ``streams=True``
    lets answers stream through it (see ``Guardrail.streams``): give it only to a function
    that never blocks and judges each sentence by itself and what came before.
    """

    def __init__(
        self, fn: GuardrailFunction, *, name: str | None = None, streams: bool = False
    ) -> None:
        if not callable(fn):
            raise UserError(f"A function guardrail needs a callable, not {fn!r}.")
        if inspect.iscoroutinefunction(fn):
            raise UserError(
                f"Guardrail {fn.__name__!r} is async; guardrails must be synchronous and cheap."
            )
        self.fn = fn
        self.name = _check_name(name if name is not None else getattr(fn, "__name__", "custom"))
        self.streams = streams

    def check(self, text: str, context: Any) -> GuardrailResult:
        """Call the function and turn its answer into a ``GuardrailResult``."""
        out = self.fn(text, context)
        if isinstance(out, GuardrailResult):
            return out if out.guardrail else replace(out, guardrail=self.name)
        if out is None or out is True or (isinstance(out, str) and out == text):
            return GuardrailResult(action="allow", text=text, guardrail=self.name)
        if out is False:
            return GuardrailResult(action="block", text=text, guardrail=self.name)
        if isinstance(out, str):
            return GuardrailResult(
                action="redact", text=out, message="text rewritten", guardrail=self.name
            )
        if inspect.iscoroutine(out):
            out.close()  # avoid a "never awaited" warning on top of the error
        raise UserError(
            f"Guardrail {self.name!r} returned {type(out).__name__}; return a "
            "GuardrailResult, a bool, a replacement str or None."
        )


@overload
def guardrail(fn: GuardrailFunction, /) -> FunctionGuardrail: ...
@overload
def guardrail(
    *, name: str | None = None, streams: bool = False
) -> Callable[[GuardrailFunction], FunctionGuardrail]: ...
def guardrail(
    fn: GuardrailFunction | None = None, /, *, name: str | None = None, streams: bool = False
) -> FunctionGuardrail | Callable[[GuardrailFunction], FunctionGuardrail]:
    """Turn a function into a guardrail: ``@guardrail`` or ``@guardrail(name="no_secrets")``.

    ``streams=True`` marks a redacting function that never blocks (see ``Guardrail.streams``).
    """
    if fn is None:
        return lambda f: FunctionGuardrail(f, name=name, streams=streams)
    return FunctionGuardrail(fn, name=name, streams=streams)


# --- construction from configuration -------------------------------------------------------

_CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "pii_detection": ("type", "action", "kinds", "name"),
    "max_length": ("type", "max_chars", "action", "name"),
    "topic_filter": ("type", "blocked_topics", "name"),
    "content_filter": ("type", "action", "blocked_patterns", "forbidden_keywords",
                       "replacement", "name"),
    "cost_limit": ("type", "max_tokens_per_turn", "count", "message", "name"),
}
_REQUIRED_KEYS = {"max_length": "max_chars", "topic_filter": "blocked_topics",
                  "cost_limit": "max_tokens_per_turn"}


def _strings(value: Any) -> list[str]:
    """A YAML string or list of strings as a list (Astromesh accepts either)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise UserError(f"expected a list of strings, not {value!r}.")
    return value


def guardrail_from_config(spec: Mapping[str, Any]) -> Guardrail:
    """Build a built-in guardrail from a rule dict, e.g. ``{"type": "pii_detection"}``.

    Types: ``pii_detection`` (action redact|block, kinds), ``max_length`` (max_chars, action
    truncate|block), ``topic_filter`` (blocked_topics), ``content_filter`` (blocked_patterns,
    forbidden_keywords, action redact|block, replacement), ``cost_limit``
    (max_tokens_per_turn, count output|total, message); each also takes ``name``.
    Raises ``ConfigError`` naming an unknown type, key or bad value.
    """
    types = ", ".join(_CONFIG_KEYS)
    if not isinstance(spec, Mapping):
        raise ConfigError(f"A guardrail must be a mapping with a 'type', not {spec!r}.")
    kind = spec.get("type")
    if kind is None:
        raise ConfigError(f"A guardrail needs a 'type'; valid types: {types}.")
    if not isinstance(kind, str) or kind not in _CONFIG_KEYS:
        raise ConfigError(
            f"Unknown guardrail type {kind!r}.{suggestion(kind, _CONFIG_KEYS)} "
            f"Valid types: {types}."
        )
    keys = _CONFIG_KEYS[kind]
    for key in spec:
        if key not in keys:
            raise ConfigError(
                f"Unknown key {key!r} in a {kind} guardrail."
                f"{suggestion(key, keys)} Valid keys: {', '.join(keys)}."
            )
    required = _REQUIRED_KEYS.get(kind)
    if required is not None and required not in spec:
        raise ConfigError(f"A {kind} guardrail needs {required!r}.")
    options = {k: v for k, v in spec.items() if k not in ("type", required)}
    try:
        if kind == "pii_detection":
            return PIIGuardrail(**options)
        if kind == "max_length":
            return MaxLengthGuardrail(spec["max_chars"], **options)
        if kind == "content_filter":
            return ContentFilterGuardrail(patterns=_strings(options.pop("blocked_patterns", [])),
                                          keywords=_strings(options.pop("forbidden_keywords", [])),
                                          **options)
        if kind == "cost_limit":
            return CostLimit(spec["max_tokens_per_turn"], **options)
        return TopicDenyListGuardrail(spec["blocked_topics"], **options)
    except UserError as exc:
        raise ConfigError(f"Invalid {kind} guardrail: {exc}") from exc
