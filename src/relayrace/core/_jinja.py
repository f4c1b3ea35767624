"""Templates compiled and rendered in the sandbox (`relayrace.core._sandbox`).

`relayrace.core.templates` is the front every declaration imports; it loads this module, and
with it Jinja2, when the first template is compiled or rendered, so ``import relayrace`` and
agents without templates never pay for Jinja.
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

__all__ = ["compile_condition", "compile_transform", "condition_holds", "evaluate_transform",
           "instructions"]

_TOP_LEVEL_NAME = re.compile(r"'(\w+)' is undefined$")
_ESCAPED_CHAR = re.compile(r"\\.", re.DOTALL)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def where(exc: BaseException, source: str) -> str:
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


def instructions(source: str, variables: Mapping[str, Any], label: str) -> str:
    """``source`` rendered with ``variables``; its failures as errors that name ``label``."""
    try:
        return render(_instructions_template(source), dict(variables))
    except TemplateSyntaxError as exc:
        raise ConfigError(f"{label} has a syntax error{where(exc, source)}: {exc.message}") from exc
    except LimitExceeded as exc:
        raise UserError(f"{label} went past a rendering limit{where(exc, source)}: {exc}; "
                        "make the template build less.") from exc
    except SecurityError as exc:
        raise UserError(f"{label} was refused by the sandbox{where(exc, source)}: {exc}") from exc
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
            f"{label} uses a value the run did not provide{where(exc, source)}: "
            f"{exc.message}; {fix}"
        ) from exc
    except Exception as exc:
        raise UserError(f"{label} failed{where(exc, source)}: {exc!r}") from exc


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


def _plain(value: Any) -> Any:
    """An expression's result as plain data; forcing an ``Undefined`` raises its error."""
    if isinstance(value, Undefined):
        str(value)  # StrictUndefined (and the sandbox's refusals) raise here
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, Markup) else value


def compile_transform(source: str, name: str, *, markup: bool) -> Template | Callable[..., Any]:
    """A context transform's JSON template (``markup``) or its expression."""
    try:
        return _json_template(source) if markup else _expression(source.strip())
    except TemplateSyntaxError as exc:
        raise ConfigError(
            f"Context transform {name!r} has a syntax error{where(exc, source)}: {exc.message}"
        ) from exc
    except Exception as exc:  # e.g. RecursionError on absurdly nested text
        raise ConfigError(f"Context transform {name!r} cannot compile: {exc!r}") from exc


def evaluate_transform(compiled: Template | Callable[..., Any], source: str, name: str,
                       data: Mapping[str, Any], error: type[UserError]) -> Any:
    """What a compiled transform makes of a call's arguments ``data``; every failure as
    ``error``, which names the transform and what to change."""
    label = f"Context transform {name!r}"
    if not isinstance(compiled, Template):
        source = ""  # lines only for templates
    text = ""
    try:
        if not isinstance(compiled, Template):
            with bounded():
                return _plain(compiled(data=Data(data, "data")))
        text = render(compiled, {"data": Data(data, "data")})
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{label} did not produce valid JSON ({exc.msg} at line {exc.lineno} column "
            f"{exc.colno}); it produced: {_clip(text)}"
        ) from exc
    except LimitExceeded as exc:
        raise error(
            f"{label} went past a rendering limit{where(exc, source)}: {exc}; make the "
            "template build less."
        ) from exc
    except SecurityError as exc:
        raise error(
            f"{label} was refused by the sandbox{where(exc, source)}: {exc} "
            "Templates may read the call's arguments (data.<name>), not Python internals."
        ) from exc
    except UndefinedError as exc:
        raise error(
            f"{label} failed{where(exc, source)}: {exc.message}. The call's arguments "
            "are data.<name>; give the tool that parameter, or write a fallback in the "
            "template: | default(...)."
        ) from exc
    except Exception as exc:
        raise error(f"{label} failed{where(exc, source)}: {exc!r}") from exc


def compile_condition(source: str, text: str) -> Callable[..., Any]:
    """A ``when`` condition's expression ``text`` (``source`` as written, for errors)."""
    try:
        return _expression(text)
    except TemplateSyntaxError as exc:
        raise ConfigError(f"Condition {source!r} has a syntax error: {exc.message}") from exc
    except Exception as exc:  # e.g. RecursionError on absurdly nested text
        raise ConfigError(f"Condition {source!r} cannot compile: {exc!r}") from exc


def condition_holds(compiled: Callable[..., Any], source: str,
                    variables: Mapping[str, Any]) -> bool:
    """Whether a compiled condition is true for ``variables``; a missing value is an error."""
    try:
        with bounded():
            return bool(_plain(compiled(**{k: wrap(v, k) for k, v in variables.items()})))
    except UndefinedError as exc:
        raise UserError(f"Condition {source!r} reads a missing value: {exc.message}") from exc
    except Exception as exc:
        raise UserError(f"Condition {source!r} failed: {exc!r}") from exc
