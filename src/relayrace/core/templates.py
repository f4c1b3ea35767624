"""Sandboxed Jinja2 for relayrace: agent instructions, context transforms and conditions.

Every template runs in one sandboxed environment (`relayrace.core._sandbox`): it may read the
values it is given and call their safe methods, but it cannot reach Python internals
(``__class__``, ``__globals__`` ...) nor mutate lists and dicts. Undefined values are strict:
printing or testing a missing value is an error, while ``| default(...)`` and ``is defined``
still work. Values are never compiled as templates: an argument holding ``{{ 7*7 }}`` arrives
as that text. Templates are compiled once per source text and cached. Rendering is bounded
(`relayrace.core._bounds`: output size, loop steps, format widths, integer size, time); past
a bound, rendering fails with an error naming the template and the limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from types import TracebackType
from typing import Any

from jinja2 import Template, TemplateSyntaxError, Undefined, UndefinedError, nodes
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError
from jinja2.parser import Parser
from markupsafe import Markup

from ._bounds import LimitExceeded, bounded, mark_bounds
from ._sandbox import ENV, Data, render, wrap
from .exceptions import ConfigError, UserError

__all__ = ["Condition", "ContextTransform", "ContextTransformError", "is_template",
           "render_instructions"]

_TOP_LEVEL_NAME = re.compile(r"'(\w+)' is undefined$")
_ESCAPED_CHAR = re.compile(r"\\.", re.DOTALL)


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


def _where(exc: BaseException, source: str) -> str:
    """`` at line N (`text`)`` for the template line a render error comes from, or ``""``."""
    lineno: int | None = exc.lineno if isinstance(exc, TemplateSyntaxError) else None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            lineno = tb.tb_lineno
        tb = tb.tb_next
    lines = source.splitlines()
    if lineno is None or not 0 < lineno <= len(lines):
        return ""
    return f" at line {lineno} ({_clip(lines[lineno - 1].strip(), 80)!r})"


@lru_cache(maxsize=256)
def _instructions_template(source: str) -> Template:
    return ENV.from_string(mark_bounds(ENV.parse(source)))


def render_instructions(source: str, variables: Mapping[str, Any]) -> str:
    """Render an agent's instructions template with the run's context ``variables``.

    Text without Jinja markup is returned as is. A missing variable raises ``UserError``
    naming it and the template (by its first line); a syntax error raises ``ConfigError``;
    anything the sandbox refuses raises ``UserError`` naming the refused access.
    """
    if not is_template(source):
        return source
    label = f"Instructions template {_first_line(source)!r}"
    try:
        return render(_instructions_template(source), dict(variables))
    except TemplateSyntaxError as exc:
        where = _where(exc, source)
        raise ConfigError(f"{label} has a syntax error{where}: {exc.message}") from exc
    except LimitExceeded as exc:
        raise UserError(f"{label} went past a rendering limit{_where(exc, source)}: {exc}; "
                        "make the template build less.") from exc
    except SecurityError as exc:
        raise UserError(f"{label} was refused by the sandbox{_where(exc, source)}: {exc}") from exc
    except UndefinedError as exc:
        found = _TOP_LEVEL_NAME.match(exc.message or "")
        fix = (
            f"pass it when starting the run (context={{{found.group(1)!r}: ...}}) or give the "
            f"template a fallback: {{{{ {found.group(1)} | default('...') }}}}."
            if found
            else "pass that value in the run's context=... or give the template a fallback "
            "with | default('...')."
        )
        raise UserError(
            f"{label} uses a value the run did not provide{_where(exc, source)}: "
            f"{exc.message}; {fix}"
        ) from exc
    except Exception as exc:
        raise UserError(f"{label} failed{_where(exc, source)}: {exc!r}") from exc


def _mark_json_outputs(node: nodes.Node, in_string: bool = False) -> bool:
    """Wrap each printed expression in a JSON filter chosen by its place in the JSON text.

    Walks the template in source order, tracking from the literal text whether a ``"...``
    string is open; returns that state after ``node``.
    """
    for child in node.iter_child_nodes():
        if not isinstance(child, nodes.Output):
            in_string = _mark_json_outputs(child, in_string)
            continue
        for i, item in enumerate(child.nodes):
            if isinstance(item, nodes.TemplateData):  # an odd number of unescaped quotes flips
                in_string ^= _ESCAPED_CHAR.sub("", item.data).count('"') % 2 == 1
            else:
                name = "_rr_json_in_string" if in_string else "_rr_json_value"
                child.nodes[i] = nodes.Filter(item, name, [], [], None, None, lineno=item.lineno)
    return in_string


@lru_cache(maxsize=256)
def _json_template(source: str) -> Template:
    tree = ENV.parse(source)
    _mark_json_outputs(tree)
    return ENV.from_string(mark_bounds(tree))


@lru_cache(maxsize=256)
def _expression(source: str) -> Callable[..., Any]:
    """Compile a Jinja expression whose dict keys may be bare names (``{company: ...}``)."""
    parser = Parser(ENV, source, state="variable")
    expr = parser.parse_expression()
    if not parser.stream.eos:
        parser.fail("unexpected text after the expression")
    dicts = [expr] if isinstance(expr, nodes.Dict) else []
    for pair in (pair for found in (*dicts, *expr.find_all(nodes.Dict)) for pair in found.items):
        if isinstance(pair.key, nodes.Name):
            pair.key = nodes.Const(pair.key.name, lineno=pair.key.lineno)
    body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
    tree = mark_bounds(nodes.Template(body, lineno=1))
    return TemplateExpression(ENV.from_string(tree), False)


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _plain(value: Any) -> Any:
    """An expression's result as plain data; forcing an ``Undefined`` raises its error."""
    if isinstance(value, Undefined):
        str(value)  # StrictUndefined (and the sandbox's refusals) raise here
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Markup) else value


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

    __slots__ = ("_constant", "_expression", "_template", "name", "source")

    def __init__(self, source: str, *, name: str = "") -> None:
        self.source = source
        """The template text, as given."""
        self.name = name or _first_line(source)
        """How errors name this transform: ``name``, or the template's first line."""
        self._template: Template | None = None
        self._expression: Callable[..., Any] | None = None
        self._constant: str | None = None
        text = source.strip()
        if not text:
            raise ConfigError("A context transform is empty; write a JSON object template.")
        try:
            if is_template(source):
                self._template = _json_template(source)
            elif text.startswith("{") and _is_json_object(text):
                self._constant = text
            else:
                self._expression = _expression(text)
        except TemplateSyntaxError as exc:
            raise ConfigError(
                f"Context transform {self.name!r} has a syntax error{_where(exc, source)}: "
                f"{exc.message}"
            ) from exc
        except Exception as exc:  # e.g. RecursionError on absurdly nested text
            raise ConfigError(f"Context transform {self.name!r} cannot compile: {exc!r}") from exc

    def render(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The child's variables for one call whose arguments are ``data``."""
        result = json.loads(self._constant) if self._constant else self._evaluate(data)
        if not isinstance(result, dict):
            raise ContextTransformError(
                f"Context transform {self.name!r} must produce a JSON object, but produced "
                f"{type(result).__name__} {_clip(repr(result))}"
            )
        return result

    def _evaluate(self, data: Mapping[str, Any]) -> Any:
        label = f"Context transform {self.name!r}"
        source = self.source if self._template is not None else ""  # lines only for templates
        text = ""
        try:
            if self._expression is not None:
                with bounded():
                    return _plain(self._expression(data=Data(data, "data")))
            if self._template is not None:
                text = render(self._template, {"data": Data(data, "data")})
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ContextTransformError(
                f"{label} did not produce valid JSON ({exc.msg} at line {exc.lineno} column "
                f"{exc.colno}); it produced: {_clip(text)}"
            ) from exc
        except LimitExceeded as exc:
            raise ContextTransformError(
                f"{label} went past a rendering limit{_where(exc, source)}: {exc}; make the "
                "template build less."
            ) from exc
        except SecurityError as exc:
            raise ContextTransformError(
                f"{label} was refused by the sandbox{_where(exc, source)}: {exc} "
                "Templates may read the call's arguments (data.<name>), not Python internals."
            ) from exc
        except UndefinedError as exc:
            raise ContextTransformError(
                f"{label} failed{_where(exc, source)}: {exc.message}. The call's arguments "
                "are data.<name>; give the tool that parameter, or write a fallback in the "
                "template: | default(...)."
            ) from exc
        except Exception as exc:
            raise ContextTransformError(f"{label} failed{_where(exc, source)}: {exc!r}") from exc


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
        try:
            self._compiled = _expression(text)
        except TemplateSyntaxError as exc:
            raise ConfigError(f"Condition {source!r} has a syntax error: {exc.message}") from exc
        except Exception as exc:  # e.g. RecursionError on absurdly nested text
            raise ConfigError(f"Condition {source!r} cannot compile: {exc!r}") from exc

    def holds(self, variables: Mapping[str, Any]) -> bool:
        """Whether the condition is true for ``variables``."""
        try:
            with bounded():
                return bool(_plain(self._compiled(**{k: wrap(v, k) for k, v in
                                                    variables.items()})))
        except UndefinedError as exc:
            raise UserError(f"Condition {self.source!r} reads a missing value: "
                            f"{exc.message}") from exc
        except Exception as exc:
            raise UserError(f"Condition {self.source!r} failed: {exc!r}") from exc
