"""Sandboxed Jinja2 for relayrace: agent instructions and context transforms.

Every template runs in one ``ImmutableSandboxedEnvironment``: it may read the values it is
given and call their safe methods, but it cannot reach Python internals (``__class__``,
``__globals__`` ...) nor mutate lists and dicts. Undefined values are strict: printing or
testing a missing value is an error, while ``| default(...)`` and ``is defined`` still work.
Values are never compiled as templates: an argument holding ``{{ 7*7 }}`` arrives as that text.
Templates are compiled once per source text and cached. Rendering is bounded too: at most
``MAX_OUTPUT`` characters out and in any one text or list a template builds (repetition,
concatenation, padding, joins, replacements), ``MAX_STEPS`` loop iterations, range items and
calls, ``MAX_FORMAT_WIDTH`` in a format width or precision, integers of ``MAX_INT_BITS``
bits, and ``MAX_SECONDS``; past one, rendering fails with an error naming the template and
the limit.
"""

from __future__ import annotations

import json
import re
import string
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from types import TracebackType
from typing import Any

from jinja2 import (
    StrictUndefined,
    Template,
    TemplateSyntaxError,
    Undefined,
    UndefinedError,
    nodes,
    pass_eval_context,
)
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError
from jinja2.filters import sync_do_join
from jinja2.nodes import EvalContext
from jinja2.parser import Parser
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup

from .exceptions import ConfigError, UserError

__all__ = ["Condition", "ContextTransform", "ContextTransformError", "is_template",
           "render_instructions"]

_TOP_LEVEL_NAME = re.compile(r"'(\w+)' is undefined$")
_ESCAPED_CHAR = re.compile(r"\\.", re.DOTALL)


class ContextTransformError(UserError):
    """A context transform could not turn a tool call's arguments into the child's variables."""


class _Data(dict[str, Any]):
    """A tool call's arguments as template data: its keys win over dict methods (``data.items``)."""

    __slots__ = ("path",)

    def __init__(self, values: Mapping[Any, Any], path: str) -> None:
        super().__init__({str(k): _wrap(v, f"{path}.{k}") for k, v in values.items()})
        self.path = path


def _wrap(value: Any, path: str) -> Any:
    if isinstance(value, (list, tuple)):
        return [_wrap(item, f"{path}[{i}]") for i, item in enumerate(value)]
    return _Data(value, path) if isinstance(value, Mapping) else value


class _MissingMethod(StrictUndefined):
    """A missing argument named like a dict method: undefined, yet ``data.items()`` calls it."""

    __slots__ = ("_method",)  # underscored, so templates cannot reach it

    def __init__(self, method: Callable[..., Any], hint: str, obj: _Data, name: str) -> None:
        super().__init__(hint=hint, obj=obj, name=name)
        self._method = method


MAX_OUTPUT = 1_000_000
"""The most characters a template renders, and the longest text or list it may build."""
MAX_STEPS = 100_000
"""The most loop iterations, range items and calls one rendering may make."""
MAX_FORMAT_WIDTH = 10_000
"""The largest width or precision in a ``%`` or ``format`` specification."""
MAX_INT_BITS = 10_000
"""The largest integer (in bits) arithmetic in a template may produce."""
MAX_SECONDS = 5.0
"""The longest one rendering may take."""


class _LimitExceeded(SecurityError):
    """A rendering went past one of the bounds above."""


@dataclass(slots=True)
class _Budget:
    steps: int = MAX_STEPS
    deadline: float = field(default_factory=lambda: time.monotonic() + MAX_SECONDS)


_BUDGET: ContextVar[_Budget | None] = ContextVar("relayrace_template_budget", default=None)


@contextmanager
def _bounded() -> Iterator[None]:
    """One rendering's budget of steps and time."""
    token = _BUDGET.set(_Budget())
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _spend(steps: int) -> None:
    budget = _BUDGET.get()
    if budget is None:
        return
    budget.steps -= steps
    if budget.steps < 0:
        raise _LimitExceeded(f"more than {MAX_STEPS} loop iterations, range items and calls")
    if time.monotonic() > budget.deadline:
        raise _LimitExceeded(f"rendering took longer than {MAX_SECONDS:g} seconds")


def _check_size(size: int, what: str) -> None:
    if size > MAX_OUTPUT:
        raise _LimitExceeded(f"{what} would be {size} long, more than {MAX_OUTPUT}")


def _check_bits(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise _LimitExceeded(f"an integer of about {bits} bits, more than {MAX_INT_BITS}")


def _check_width(number: str, spec: str) -> None:
    if int(number) > MAX_FORMAT_WIDTH:
        raise _LimitExceeded(f"the format {spec!r} asks for a width or precision of {number}, "
                             f"more than {MAX_FORMAT_WIDTH}")


_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_printf(text: str) -> None:
    """Refuse ``%``-formatting with a huge or ``*`` width or precision."""
    for found in _PRINTF.finditer(text):
        for number in found.groups():
            if number == "*":
                raise _LimitExceeded(f"the format {found.group()!r} takes its width from an "
                                     "argument; write the width in the format")
            if number is not None:
                _check_width(number, found.group())


def _check_format(text: str) -> None:
    """Refuse ``str.format`` fields with a huge width or precision, or one given by a field."""
    for _, _, spec, _ in string.Formatter().parse(text):
        if not spec:
            continue
        if "{" in spec:
            raise _LimitExceeded(f"the format spec {spec!r} takes a value from an argument; "
                                 "write it in the format")
        for number in re.findall(r"\d+", spec):
            _check_width(number, spec)


_SIZED = (str, bytes, list, tuple)


def _check_binop(operator: str, left: Any, right: Any) -> None:
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "*":
        if isinstance(left, _SIZED) and isinstance(right, int):
            _check_size(len(left) * right, "a repeated value")
        elif isinstance(right, _SIZED) and isinstance(left, int):
            _check_size(len(right) * left, "a repeated value")
        elif ints:
            _check_bits(left.bit_length() + right.bit_length())
    elif operator == "**" and ints and right > 0 and abs(left) > 1:
        _check_bits(left.bit_length() * right)
    elif operator == "+" and isinstance(left, _SIZED) and isinstance(right, _SIZED):
        _check_size(len(left) + len(right), "a concatenation")
    elif operator == "%" and isinstance(left, str):
        _check_printf(left)


def _check_str_method(text: str, name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Refuse a string method call that would build a huge text; returns the arguments to use."""
    if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
        _check_size(args[0], f"str.{name}()")
    elif name == "expandtabs" and args and isinstance(args[0], int):
        _check_size(len(text) + text.count("\t") * args[0], "str.expandtabs()")
    elif name == "replace" and len(args) >= 2:
        _check_size(_replaced_size(text, str(args[0]), str(args[1])), "str.replace()")
    elif name == "join" and args:
        items = list(args[0])
        _check_size(_joined_size(text, items), "str.join()")
        return (items, *args[1:])
    return args


def _replaced_size(text: str, old: str, new: str) -> int:
    count = len(text) + 1 if not old else text.count(old)
    return len(text) + count * len(new)


def _joined_size(separator: str, items: list[Any]) -> int:
    return sum(len(str(i)) for i in items) + len(separator) * max(len(items) - 1, 0)


def _loop(iterable: Iterable[Any]) -> Iterator[Any]:
    """A ``for`` loop's items, each counted against the rendering's steps."""
    for item in iterable:
        _spend(1)
        yield item


def _range(*args: int) -> range:
    """``range``, its items counted against the rendering's steps."""
    numbers = range(*args)
    _spend(len(numbers))
    return numbers


def _sized(value: Any) -> Any:
    if isinstance(value, _SIZED):
        _check_size(len(value), "a text or list")
    return value


def _bounded_filter(name: str, check: Callable[..., None]) -> Callable[..., Any]:
    """Jinja's filter ``name`` with ``check(value, *args)`` first and its result's size after."""
    original = _FILTERS[name]

    @wraps(original)  # keeps Jinja's pass_eval_context marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        try:
            check(*args, **kwargs)
        except _LimitExceeded as exc:
            raise _LimitExceeded(f"the {name} filter: {exc}") from None
        return _sized(original(*args, **kwargs))

    return bounded


def _small_numbers(*args: Any, **kwargs: Any) -> None:
    """Refuse a count or width argument above ``MAX_FORMAT_WIDTH`` (the value is ``args[0]``)."""
    for number in (*args[1:], *kwargs.values()):
        if isinstance(number, int) and number > MAX_FORMAT_WIDTH:
            raise _LimitExceeded(f"a count or width of {number}, more than {MAX_FORMAT_WIDTH}")


def _indent_check(text: Any, width: Any = 4, *args: Any, **kwargs: Any) -> None:
    pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    _check_size(len(str(text)) + (str(text).count("\n") + 1) * pad, "indent")


def _replace_check(eval_ctx: Any, text: Any, old: Any, new: Any, *args: Any) -> None:
    _check_size(_replaced_size(str(text), str(old), str(new)), "replace")


@pass_eval_context
def _join(eval_ctx: EvalContext, value: Iterable[Any], separator: str = "",
          attribute: str | int | None = None) -> str:
    """Jinja's ``join``, refusing a text longer than ``MAX_OUTPUT``."""
    items = list(value)
    _check_size(len(str(separator)) * max(len(items) - 1, 0), "join's separators")
    return str(_sized(sync_do_join(eval_ctx, items, separator, attribute)))


def _format_check(value: Any, *args: Any, **kwargs: Any) -> None:
    _check_printf(str(value))


def _tojson_check(eval_ctx: Any, value: Any, indent: Any = None) -> None:
    if isinstance(indent, int) and indent > 16:
        raise _LimitExceeded(f"tojson indent {indent}, more than 16")


class _Environment(ImmutableSandboxedEnvironment):
    """The sandbox, with call arguments (``_Data``) looked up key first and missing keys named.

    It also keeps renderings bounded: arithmetic, ``%`` formatting and ``str.format``, string
    methods, calls and loops are checked against the limits above.
    """

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is not None:
            _check_format(value.__self__)
        return wrapper

    def getattr(self, obj: Any, attribute: str) -> Any:
        if not isinstance(obj, _Data):
            return super().getattr(obj, attribute)
        if attribute in obj:
            return obj[attribute]
        if not hasattr(dict, attribute):
            return self._missing(obj, attribute)
        value = super().getattr(obj, attribute)  # dunders and mutators: unsafe, never wrapped
        return value if isinstance(value, Undefined) else self._missing(obj, attribute, value)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        if isinstance(obj, _MissingMethod):  # the method itself, so the sandbox checks it
            obj = obj._method
        _spend(1)  # macros calling themselves, too
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, str):
            args = _check_str_method(owner, getattr(obj, "__name__", ""), args)
        return _sized(super().call(context, obj, *args, **kwargs))

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, _Data) and isinstance(argument, str):
            return obj[argument] if argument in obj else self._missing(obj, argument)
        return super().getitem(obj, argument)

    def _missing(self, obj: _Data, name: str, method: Any = None) -> Undefined:
        hint = f"'{obj.path}.{name}' is not among the tool call's arguments"
        if method is not None:
            return _MissingMethod(method, hint=hint, obj=obj, name=name)
        return self.undefined(hint=hint, obj=obj, name=name)


def _json_in_string(value: Any) -> str:
    """Printed inside a JSON string literal: the value's text, escaped for JSON."""
    return json.dumps(str(value), ensure_ascii=False)[1:-1]


def _json_value(value: Any) -> str:
    """Printed outside quotes: the value as a JSON literal; ``| tojson``/``| safe`` text as is."""
    if isinstance(value, Markup):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)  # str() of an Undefined raises


_ENV = _Environment(autoescape=False, undefined=StrictUndefined, keep_trailing_newline=True)
_FILTERS = dict(_ENV.filters)
_ENV.filters.update(
    _rr_json_in_string=_json_in_string, _rr_json_value=_json_value, _rr_loop=_loop,
    _rr_sized=_sized,
    center=_bounded_filter("center", _small_numbers),
    batch=_bounded_filter("batch", _small_numbers),
    slice=_bounded_filter("slice", _small_numbers),
    wordwrap=_bounded_filter("wordwrap", _small_numbers),
    truncate=_bounded_filter("truncate", _small_numbers),
    indent=_bounded_filter("indent", _indent_check),
    replace=_bounded_filter("replace", _replace_check),
    join=_join,
    format=_bounded_filter("format", _format_check),
    tojson=_bounded_filter("tojson", _tojson_check),
)
_ENV.globals["range"] = _range
del _ENV.globals["lipsum"]  # placeholder text of any length: nothing a prompt needs


def _mark_bounds(tree: nodes.Template) -> nodes.Template:
    """Count each ``for`` loop's items, and check each ``~`` concatenation's size."""
    for loop in list(tree.find_all(nodes.For)):
        loop.iter = nodes.Filter(loop.iter, "_rr_loop", [], [], None, None, lineno=loop.lineno)
    for parent in list(tree.find_all(nodes.Node)):
        for name in parent.fields:
            child = getattr(parent, name)
            if isinstance(child, nodes.Concat):
                setattr(parent, name, nodes.Filter(child, "_rr_sized", [], [], None, None,
                                                   lineno=child.lineno))
            elif isinstance(child, list):
                child[:] = [nodes.Filter(c, "_rr_sized", [], [], None, None, lineno=c.lineno)
                            if isinstance(c, nodes.Concat) else c for c in child]
    return tree


def _render(template: Template, variables: Mapping[str, Any]) -> str:
    """``template`` rendered within the bounds, its output counted as it is produced."""
    out: list[str] = []
    size = 0
    with _bounded():
        for chunk in template.generate(variables):
            size += len(chunk)
            _check_size(size, "the output")
            out.append(chunk)
    return "".join(out)


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
    return _ENV.from_string(_mark_bounds(_ENV.parse(source)))


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
        return _render(_instructions_template(source), dict(variables))
    except TemplateSyntaxError as exc:
        where = _where(exc, source)
        raise ConfigError(f"{label} has a syntax error{where}: {exc.message}") from exc
    except _LimitExceeded as exc:
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
    tree = _ENV.parse(source)
    _mark_json_outputs(tree)
    return _ENV.from_string(_mark_bounds(tree))


@lru_cache(maxsize=256)
def _expression(source: str) -> Callable[..., Any]:
    """Compile a Jinja expression whose dict keys may be bare names (``{company: ...}``)."""
    parser = Parser(_ENV, source, state="variable")
    expr = parser.parse_expression()
    if not parser.stream.eos:
        parser.fail("unexpected text after the expression")
    dicts = [expr] if isinstance(expr, nodes.Dict) else []
    for pair in (pair for found in (*dicts, *expr.find_all(nodes.Dict)) for pair in found.items):
        if isinstance(pair.key, nodes.Name):
            pair.key = nodes.Const(pair.key.name, lineno=pair.key.lineno)
    body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
    tree = _mark_bounds(nodes.Template(body, lineno=1))
    return TemplateExpression(_ENV.from_string(tree), False)


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
                with _bounded():
                    return _plain(self._expression(data=_Data(data, "data")))
            if self._template is not None:
                text = _render(self._template, {"data": _Data(data, "data")})
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ContextTransformError(
                f"{label} did not produce valid JSON ({exc.msg} at line {exc.lineno} column "
                f"{exc.colno}); it produced: {_clip(text)}"
            ) from exc
        except _LimitExceeded as exc:
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
            with _bounded():
                return bool(_plain(self._compiled(**{k: _wrap(v, k) for k, v in
                                                    variables.items()})))
        except UndefinedError as exc:
            raise UserError(f"Condition {self.source!r} reads a missing value: "
                            f"{exc.message}") from exc
        except Exception as exc:
            raise UserError(f"Condition {self.source!r} failed: {exc!r}") from exc
