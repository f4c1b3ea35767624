"""Tool calls a model wrote as text: found in a final answer, then asked again or run.

Small local models often write a call out instead of making it: a fenced JSON block, the
object in doubled braces, Hermes' ``<tool_call>`` tags, or the bare object. Taken as the final
answer, such a text runs nothing and ends the run as if it had succeeded. ``model_turn`` hands
every text answer here (`written_calls`); what happens to one that is, after trimming, only
calls of tools offered on that turn is ``ModelSettings.text_tool_calls``: ``"reask"`` tells the
model once to call the tool (a second time ends the run with `ModelBehaviorError`),
``"parse"`` makes the calls real, ``"off"`` keeps the text as the answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.exceptions import ModelBehaviorError
from ..core.messages import NOTE, ToolCall

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..models.interface import Model
    from .offer import Offer
    from .pieces import Pieces

__all__ = ["TEXT_CALL_ID", "HeldText", "TextCall", "Written", "find_text_calls", "held_text",
           "may_be_calls", "written_calls"]

TEXT_CALL_ID = "text_call_"
"""How the ids relayrace gives the calls it parsed from text begin."""

# What a text that is only calls can begin with: a cheap test before any parsing.
_MAY_BE_CALLS = re.compile(r"\s*[`<{\[]")
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)```", re.S)
_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_DECODER = json.JSONDecoder()
_REASK_END = "Call the tool; do not write it as text."
_QUOTED = 300  # characters of the text an error quotes


class TextCall(NamedTuple):
    """One tool call found written as text."""

    name: str
    """The tool it names (one the turn offered)."""
    arguments: dict[str, Any]
    """Its arguments (``arguments`` or ``parameters`` in the text)."""


class Written(NamedTuple):
    """A final answer that was tool calls written as text, and what becomes of it."""

    text: str
    """The answer as the model wrote it."""
    names: tuple[str, ...]
    """The tools it called, in order."""
    calls: tuple[ToolCall, ...]
    """With ``"parse"``: the calls to run, with relayrace-made ids; with ``"reask"``: ()."""
    reask: str
    """With ``"reask"``: the note that tells the model to call the tool; with ``"parse"``:
    empty."""


def find_text_calls(text: str, offered: Collection[str]) -> tuple[TextCall, ...]:
    """The tool calls ``text`` is, after trimming, written as text; () when it is an answer.

    The text must be nothing but one of: fenced code blocks, ``<tool_call>...</tool_call>``
    blocks, or JSON (the call's outer braces doubled, ``{{...}}``, or its opening one). Each
    block holds a call object, several (one after the other or in a JSON array). A call
    object has a ``name`` in ``offered`` and an object as ``arguments`` (or ``parameters``).
    Anything else, prose around a block, a name not offered, or JSON cut short, is an
    answer.
    """
    if not offered or _MAY_BE_CALLS.match(text) is None:
        return ()
    s = text.strip()
    match s[0]:
        case "`":
            bodies = _blocks(s, _FENCE)
        case "<":
            bodies = _blocks(s, _HERMES)
        case _:
            bodies = [s]
    found: list[TextCall] = []
    for body in bodies:
        calls = _calls_in(body.strip(), offered)
        if not calls:
            return ()
        found.extend(calls)
    return tuple(found)


def written_calls(pieces: Pieces, agent: Agent[Any], model: Model, offer: Offer,
                  text: str) -> Written | None:
    """What to do with ``agent``'s text answer ``text`` on a turn with ``offer``: ``None``
    when it is an answer; raise `ModelBehaviorError` when it is calls written as text right
    after the model was told not to."""
    if _MAY_BE_CALLS.match(text) is None:  # the usual answer: nothing to parse
        return None
    setting = _setting(agent, model)
    if setting == "off":
        return None
    found = find_text_calls(text, {d.name for d in offer.definitions})
    if not found:
        return None
    spec, mode = agent.output, offer.output_mode
    if spec is not None and mode != "tool" and \
            not spec.check(text, prompted=mode == "prompted").error:
        return None  # a valid structured answer, whatever its fields are called
    called = tuple(c.name for c in found)
    if setting == "parse":
        at = len(pieces.views.transcript)  # the answer's place: unique in the session
        return Written(text, called, tuple(
            ToolCall(f"{TEXT_CALL_ID}{at}_{i}", c.name, json.dumps(c.arguments))
            for i, c in enumerate(found)), "")
    names = ", ".join(dict.fromkeys(called))
    transcript = pieces.views.transcript
    last = transcript[-1] if transcript else None
    if last is not None and last.name == NOTE and last.content.endswith(_REASK_END):
        quoted = text if len(text) <= _QUOTED else text[:_QUOTED] + "..."
        raise ModelBehaviorError(
            f"The model of agent {agent.name!r} wrote a call of {names} as text again after "
            f"it was told to call the tool: {quoted!r}. Use a model that calls tools, or set "
            "ModelSettings(text_tool_calls='parse') to run the calls it writes as text.")
    return Written(text, called, (), f"Your answer was a call of {names} written as text, which "
                             f"runs nothing. {_REASK_END}")


class HeldText:
    """A streamed answer's text, held back while it may still turn out to be tool calls
    written as text: those are no answer, so their text is never shown. Once the text can no
    longer be calls, what was held is passed on with the delta that decided it, and every
    delta after that at once; what is still held when the stream ends is ``held``, shown by
    the turn only if the answer is not calls."""

    __slots__ = ("held", "holding")

    def __init__(self) -> None:
        self.held = ""
        """The text held back so far."""
        self.holding = True
        """Whether the text may still be calls."""

    def feed(self, delta: str) -> str:
        """Take a streamed text delta; return the text to pass on ("" while held)."""
        if not self.holding:
            return delta
        self.held += delta
        if may_be_calls(self.held):
            return ""
        self.holding = False
        passed, self.held = self.held, ""
        return passed


def held_text(agent: Agent[Any], model: Model, offer: Offer) -> HeldText | None:
    """A `HeldText` for a streamed turn of ``agent`` whose answer may be calls written as
    text (tools offered, and ``text_tool_calls`` not ``"off"``); ``None`` otherwise."""
    if not offer.definitions or _setting(agent, model) == "off":
        return None
    return HeldText()


_OPENING = re.compile(r"```[\w-]*[ \t]*\n?")
_TAG = "<tool_call>"
_FIRST_KEYS = ("name", "arguments", "parameters")


def may_be_calls(prefix: str) -> bool:
    """Whether a text beginning with ``prefix`` may still be, once complete, only tool calls
    written as text (`find_text_calls`' forms): a fence, a ``<tool_call>`` tag or JSON
    opening a call object, whose first key may be a call's. Cheap and decided early, so a
    streamed answer is held back only as long as it looks like a call."""
    s = prefix.lstrip()
    if not s:
        return True
    if s[0] == "`":
        opening = _OPENING.match(s)
        if opening is None:
            return "```".startswith(s)
        return opening.end() == len(s) or _may_open_call(s[opening.end():])
    if s[0] == "<":
        return _TAG.startswith(s) if len(s) < len(_TAG) else \
            s.startswith(_TAG) and _may_open_call(s[len(_TAG):])
    return _may_open_call(s)


def _may_open_call(body: str) -> bool:
    """Whether JSON beginning with ``body`` may be a call object (or an array of them)."""
    b = body.lstrip()
    at = 0
    while at < len(b) and (b[at] in "{[" or b[at].isspace()):
        at += 1
    if at == len(b):
        return True
    if not at or b[at] != '"':
        return False
    key, quote, _ = b[at + 1:].partition('"')
    return key in _FIRST_KEYS if quote else any(k.startswith(key) for k in _FIRST_KEYS)


def _setting(agent: Agent[Any], model: Model) -> str:
    """The turn's ``text_tool_calls``: the agent's settings', else its model's, else reask."""
    for settings in (agent.model_settings, model.settings):
        if settings is not None and settings.text_tool_calls is not None:
            return settings.text_tool_calls
    return "reask"


def _blocks(s: str, pattern: re.Pattern[str]) -> list[str]:
    """The bodies of the blocks ``s`` is made of, one after the other; [] if it is more."""
    bodies: list[str] = []
    at, end = 0, len(s)
    while at < end:
        m = pattern.match(s, at)
        if m is None:
            return []
        bodies.append(m.group(1))
        at = m.end()
        while at < end and s[at].isspace():
            at += 1
    return bodies


def _calls_in(body: str, offered: Collection[str]) -> list[TextCall]:
    """The calls one block (or the bare text) holds; [] unless it holds calls only."""
    values = _values(body)
    if values is None and body.startswith("{{"):
        # The braces around the call doubled, as in a prompt template's escaping; small
        # models also double the opening one only.
        values = _values(body[1:-1]) if body.endswith("}}") else None
        if values is None:
            values = _values(body[1:])
    if not values:
        return []
    calls: list[TextCall] = []
    for value in values:
        for item in value if isinstance(value, list) else (value,):
            call = _call(item, offered)
            if call is None:
                return []
            calls.append(call)
    return calls


def _values(body: str) -> list[Any] | None:
    """The JSON values ``body`` is, one after the other; ``None`` if it is anything else."""
    values: list[Any] = []
    at, end = 0, len(body)
    try:
        while at < end:
            value, at = _DECODER.raw_decode(body, at)
            values.append(value)
            while at < end and body[at].isspace():
                at += 1
    except (ValueError, RecursionError):  # not JSON, cut short, or nested past the limit
        return None
    return values or None


def _call(value: Any, offered: Collection[str]) -> TextCall | None:
    if not isinstance(value, dict):
        return None
    name = value.get("name")
    if not isinstance(name, str) or name not in offered:
        return None
    arguments = value["arguments"] if "arguments" in value else value.get("parameters")
    if not isinstance(arguments, dict):
        return None
    return TextCall(name, arguments)
