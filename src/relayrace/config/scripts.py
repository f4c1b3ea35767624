"""A scripted model written in YAML: what a `ScriptedModel` plays, for any team, with no Python.

``relayrace run TEAM "..." --model scripted:path/to/script.yaml`` (and ``resume``, ``serve``,
``mcp serve``, ...) runs the team offline on the answers the file lists::

    turns:                                   # the answers, in the order they are asked for
      - call: research                       # a tool call (also a transfer or a delegation)
        arguments: {query: What is a handoff?}
      - text: A handoff moves the conversation.   # an answer in text (or just the string)
      - [{text: Checking.}, {call: lookup, arguments: {id: 7}}]   # one answer, several parts
      - output: {score: 8}                   # a structured output (an agent's output_type)
    by_agent:                                # or each agent its own list
      writer: [Done.]
    then: I have nothing more to say.        # the answer once the turns are spent

Each conversation (a session with its delegated children) plays the turns from the first, so
a server's sessions never take each other's turns. The file is checked as it is loaded: every
mistake is a ``ConfigError`` naming the file, the line and the key, with a suggestion.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.exceptions import ConfigError
from ..testing import OutputPart, ScriptedModel, TextPart, ToolCallPart, Turn, tool_call
from ._validate import suggest
from ._yaml import Loc, SourceDocument, format_path, read_documents

__all__ = ["load_script"]

_TOP = ("turns", "by_agent", "then")
_PARTS = {"text": ("text",), "call": ("call", "arguments", "id"), "output": ("output",)}
_FORMS = ("text (a string, or {text: ...}), {call: TOOL, arguments: {...}}, {output: VALUE}, "
          "or a list of these (one answer of several parts)")

Part = TextPart | ToolCallPart | OutputPart


def load_script(path: str | Path) -> ScriptedModel:
    """The `ScriptedModel` the YAML file at ``path`` describes (see the module's text).

    Raises ``ConfigError`` listing every mistake, each with its file and line.
    """
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"Script file {str(path)!r} does not exist; give --model "
                          "scripted:path/to/script.yaml.")
    documents = read_documents(file, str(path))
    if len(documents) != 1:
        raise ConfigError(f"{path}: a script is one YAML document (turns:, by_agent:, then:); "
                          f"found {len(documents)}.")
    return _Script(documents[0]).model(file)


class _Script:
    """One script document being checked; its mistakes are gathered, then raised together."""

    def __init__(self, source: SourceDocument) -> None:
        self.source = source
        self.errors: list[str] = []

    def model(self, file: Path) -> ScriptedModel:
        data = self.source.data
        if not isinstance(data, dict):
            raise ConfigError(f"{self.source.where()}: a script is a mapping with turns:, "
                              f"by_agent: or then:; got {type(data).__name__}.")
        for key in data:
            if key not in _TOP:
                self.fail((str(key),), f"unknown key {key!r}{suggest(key, _TOP)} (a script "
                          "has turns:, by_agent: and then:)")
        turns = self.turns(data.get("turns", []), ("turns",))
        by_agent: dict[str, list[Turn]] = {}
        agents = data.get("by_agent", {})
        if not isinstance(agents, Mapping):
            self.fail(("by_agent",), "by_agent must map agent names to lists of turns")
        else:
            for name, listed in agents.items():
                by_agent[str(name)] = self.turns(listed, ("by_agent", str(name)))
        then = self.turn(data["then"], ("then",)) if "then" in data else None
        if not turns and not by_agent and then is None and not self.errors:
            self.fail((), "the script gives no turns; list them under turns:")
        if self.errors:
            raise ConfigError("\n".join(self.errors))
        return ScriptedModel(turns, by_agent=by_agent, then=then, per_conversation=True,
                             name=f"scripted:{file.name}")

    def fail(self, loc: Loc, message: str) -> None:
        path = format_path(loc)
        self.errors.append(f"{self.source.where(loc)}: {f'{path}: ' if path else ''}{message}")

    def turns(self, value: Any, loc: Loc) -> list[Turn]:
        if not isinstance(value, list):
            self.fail(loc, f"{loc[-1]} must be a list of turns, each {_FORMS}")
            return []
        return [turn for i, item in enumerate(value)
                if (turn := self.turn(item, (*loc, i))) is not None]

    def turn(self, value: Any, loc: Loc) -> Turn | None:
        if isinstance(value, list):
            parts = [self.part(item, (*loc, i)) for i, item in enumerate(value)]
            if not value:
                self.fail(loc, f"an answer of no parts; give one of {_FORMS}")
            return [p for p in parts if p is not None]
        return self.part(value, loc)

    def part(self, value: Any, loc: Loc) -> Part | None:
        if isinstance(value, str):
            return TextPart(value)
        if not isinstance(value, dict):
            self.fail(loc, f"a turn is {_FORMS}; got {type(value).__name__} {value!r}")
            return None
        kinds = [k for k in _PARTS if k in value]
        if len(kinds) != 1:
            unknown = next((k for k in value if k not in _PARTS), None)
            hint = suggest(unknown, list(_PARTS)) if unknown is not None else ""
            named = f" (it has {unknown!r}{hint})" if unknown is not None else ""
            which = "both " + " and ".join(kinds) if kinds else \
                f"none of text, call, output{named}"
            self.fail(loc, f"a turn has exactly one of text:, call:, output:; this one has "
                      f"{which}")
            return None
        kind = kinds[0]
        for key in value:
            if key not in _PARTS[kind]:
                self.fail((*loc, str(key)), f"unknown key {key!r} in a {kind}: turn"
                          f"{suggest(key, _PARTS[kind])} (it takes {', '.join(_PARTS[kind])})")
        if kind == "text":
            if not isinstance(value["text"], str):
                self.fail((*loc, "text"), "text: must be a string")
                return None
            return TextPart(value["text"])
        if kind == "output":
            return OutputPart(value["output"])
        return self.call(value, loc)

    def call(self, value: dict[str, Any], loc: Loc) -> ToolCallPart | None:
        name, arguments, call_id = value["call"], value.get("arguments"), value.get("id")
        ok = True
        if not isinstance(name, str) or not name:
            self.fail((*loc, "call"), "call: must name the tool to call")
            ok = False
        if arguments is not None and not isinstance(arguments, dict | str):
            self.fail((*loc, "arguments"), "arguments: must be a mapping (sent as JSON) or a "
                      "string (sent as it is, e.g. malformed JSON)")
            ok = False
        if call_id is not None and not isinstance(call_id, str):
            self.fail((*loc, "id"), "id: must be a string")
            ok = False
        return tool_call(name, arguments, id=call_id) if ok else None
