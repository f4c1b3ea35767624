"""Sandboxed Jinja2 for relayrace: agent instructions, context transforms and conditions.

Every template runs in one sandboxed environment (`relayrace.core._sandbox`): it may read the
values it is given and call their safe methods, but it cannot reach Python internals
(``__class__``, ``__globals__`` ...) nor mutate lists and dicts. Undefined values are strict:
printing or testing a missing value is an error, while ``| default(...)`` and ``is defined``
still work. Values are never compiled as templates: an argument holding ``{{ 7*7 }}`` arrives
as that text. Templates are compiled once per source text and cached. Rendering is bounded
(`relayrace.core._bounds`: output size, loop steps, format widths, integer size, time); past
a bound, rendering fails with an error naming the template and the limit. Jinja2 itself
(`relayrace.core._jinja`) is loaded when the first template is compiled or rendered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .exceptions import ConfigError, UserError

if TYPE_CHECKING:
    from jinja2 import Template

__all__ = ["Condition", "ContextTransform", "ContextTransformError", "is_template",
           "render_instructions"]


class ContextTransformError(UserError):
    """A context transform could not turn a tool call's arguments into the child's variables."""


def is_template(source: str) -> bool:
    """Whether ``source`` holds Jinja markup (``{{``, ``{%`` or ``{#``); plain text skips Jinja."""
    return "{{" in source or "{%" in source or "{#" in source


def _first_line(source: str) -> str:
    line = next((ln.strip() for ln in source.splitlines() if ln.strip()), "")
    return line if len(line) <= 60 else line[:57] + "..."


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_instructions(source: str, variables: Mapping[str, Any]) -> str:
    """Render an agent's instructions template with the run's context ``variables``.

    Text without Jinja markup is returned as is. A missing variable raises ``UserError``
    naming it and the template (by its first line); a syntax error raises ``ConfigError``;
    anything the sandbox refuses raises ``UserError`` naming the refused access.
    """
    if not is_template(source):
        return source
    from ._jinja import instructions

    return instructions(source, variables, f"Instructions template {_first_line(source)!r}")


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


class ContextTransform:
    """Turns an agent-tool call's arguments into template variables for the child agent.

    The arguments are ``data`` (``data.company`` or ``data["company"]``). Two forms:

    * JSON text with Jinja markup, e.g. ``{"company": "{{ data.company }}", "n": {{ data.n }}}``:
      a value printed inside a JSON string is JSON-escaped (quotes, backslashes, newlines arrive
      intact; non-strings arrive as their text), a value printed outside quotes becomes its
      JSON literal (text from ``| tojson`` or ``| safe`` is inserted as is);
    * a Jinja expression, e.g. ``{company: data.company, n: data.count}``.

    Plain JSON without markup is a constant. Compiled once, at construction: a syntax error
    raises ``ConfigError``. ``render`` raises ``ContextTransformError`` and nothing else.
    """

    __slots__ = ("_compiled", "_constant", "name", "source")

    def __init__(self, source: str, *, name: str = "") -> None:
        self.source = source
        """The template text, as given."""
        self.name = name or _first_line(source)
        """How errors name this transform: ``name``, or the template's first line."""
        self._compiled: Template | Callable[..., Any] | None = None
        self._constant: str | None = None
        text = source.strip()
        if not text:
            raise ConfigError("A context transform is empty; write a JSON object template.")
        markup = is_template(source)
        if not markup and text.startswith("{") and _is_json_object(text):
            self._constant = text
        else:
            from ._jinja import compile_transform

            self._compiled = compile_transform(source, self.name, markup=markup)

    def render(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The child's variables for one call whose arguments are ``data``."""
        if self._compiled is None:
            result = json.loads(self._constant or "{}")
        else:
            from ._jinja import evaluate_transform

            result = evaluate_transform(self._compiled, self.source, self.name, data,
                                        ContextTransformError)
        if not isinstance(result, dict):
            raise ContextTransformError(
                f"Context transform {self.name!r} must produce a JSON object, but produced "
                f"{type(result).__name__} {_clip(repr(result))}"
            )
        return result


class Condition:
    """A ``when`` condition: a Jinja expression, bare (``output.data.score > 7``) or in
    ``{{ }}`` as Astromesh writes it, evaluated in the sandbox over the given variables.

    Compiled once: a syntax error raises ``ConfigError``. ``holds`` raises ``UserError`` when
    the expression reads a value that is missing (no silent ``False``)."""

    __slots__ = ("_compiled", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        text = source.strip()
        if text.startswith("{{") and text.endswith("}}"):
            text = text[2:-2].strip()
        if not text:
            raise ConfigError("A condition is empty; write an expression such as "
                              "'output.data.score > 7'.")
        from ._jinja import compile_condition

        self._compiled = compile_condition(source, text)

    def holds(self, variables: Mapping[str, Any]) -> bool:
        """Whether the condition is true for ``variables``."""
        from ._jinja import condition_holds

        return condition_holds(self._compiled, self.source, variables)
