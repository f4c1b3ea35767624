"""The limits of one template rendering, and the checks that keep a rendering within them.

A rendering may build at most ``MAX_OUTPUT`` characters, in its output and in any one text or
list (repetition, concatenation, padding, joins, replacements); make ``MAX_STEPS`` loop
iterations, range items and calls; ask for ``MAX_FORMAT_WIDTH`` in a format width or
precision; compute integers of ``MAX_INT_BITS`` bits; and take ``MAX_SECONDS``. Past one, a
check raises `LimitExceeded`. The sandbox (`relayrace.core._sandbox`) calls these checks.
"""

from __future__ import annotations

import re
import string
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import wraps
from typing import Any

from jinja2 import nodes, pass_eval_context
from jinja2.exceptions import SecurityError
from jinja2.filters import FILTERS as JINJA_FILTERS
from jinja2.filters import sync_do_join
from jinja2.nodes import EvalContext

__all__ = ["FILTERS", "GLOBALS", "MAX_FORMAT_WIDTH", "MAX_INT_BITS", "MAX_OUTPUT",
           "MAX_SECONDS", "MAX_STEPS", "LimitExceeded", "bounded", "check_binop",
           "check_format", "check_size", "check_str_method", "mark_bounds", "sized", "spend"]

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


class LimitExceeded(SecurityError):
    """A rendering went past one of the bounds above."""


@dataclass(slots=True)
class _Budget:
    steps: int = MAX_STEPS
    deadline: float = field(default_factory=lambda: time.monotonic() + MAX_SECONDS)


_BUDGET: ContextVar[_Budget | None] = ContextVar("relayrace_template_budget", default=None)


@contextmanager
def bounded() -> Iterator[None]:
    """One rendering's budget of steps and time."""
    token = _BUDGET.set(_Budget())
    try:
        yield
    finally:
        _BUDGET.reset(token)


def spend(steps: int) -> None:
    """Count ``steps`` against the rendering's budget, and check its time."""
    budget = _BUDGET.get()
    if budget is None:
        return
    budget.steps -= steps
    if budget.steps < 0:
        raise LimitExceeded(f"more than {MAX_STEPS} loop iterations, range items and calls")
    if time.monotonic() > budget.deadline:
        raise LimitExceeded(f"rendering took longer than {MAX_SECONDS:g} seconds")


def check_size(size: int, what: str) -> None:
    """Refuse ``what`` when it would be longer than ``MAX_OUTPUT``."""
    if size > MAX_OUTPUT:
        raise LimitExceeded(f"{what} would be {size} long, more than {MAX_OUTPUT}")


def _check_bits(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise LimitExceeded(f"an integer of about {bits} bits, more than {MAX_INT_BITS}")


def _check_width(number: str, spec: str) -> None:
    if int(number) > MAX_FORMAT_WIDTH:
        raise LimitExceeded(f"the format {spec!r} asks for a width or precision of {number}, "
                            f"more than {MAX_FORMAT_WIDTH}")


_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_printf(text: str) -> None:
    """Refuse ``%``-formatting with a huge or ``*`` width or precision."""
    for found in _PRINTF.finditer(text):
        for number in found.groups():
            if number == "*":
                raise LimitExceeded(f"the format {found.group()!r} takes its width from an "
                                    "argument; write the width in the format")
            if number is not None:
                _check_width(number, found.group())


def check_format(text: str) -> None:
    """Refuse ``str.format`` fields with a huge width or precision, or one given by a field."""
    for _, _, spec, _ in string.Formatter().parse(text):
        if not spec:
            continue
        if "{" in spec:
            raise LimitExceeded(f"the format spec {spec!r} takes a value from an argument; "
                                "write it in the format")
        for number in re.findall(r"\d+", spec):
            _check_width(number, spec)


_SIZED = (str, bytes, list, tuple)


def check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse arithmetic whose result would be too long a text or list, or too big a number."""
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "*":
        if isinstance(left, _SIZED) and isinstance(right, int):
            check_size(len(left) * right, "a repeated value")
        elif isinstance(right, _SIZED) and isinstance(left, int):
            check_size(len(right) * left, "a repeated value")
        elif ints:
            _check_bits(left.bit_length() + right.bit_length())
    elif operator == "**" and ints and right > 0 and abs(left) > 1:
        _check_bits(left.bit_length() * right)
    elif operator == "+" and isinstance(left, _SIZED) and isinstance(right, _SIZED):
        check_size(len(left) + len(right), "a concatenation")
    elif operator == "%" and isinstance(left, str):
        _check_printf(left)


def check_str_method(text: str, name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Refuse a string method call that would build a huge text; returns the arguments to use."""
    if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
        check_size(args[0], f"str.{name}()")
    elif name == "expandtabs" and args and isinstance(args[0], int):
        check_size(len(text) + text.count("\t") * args[0], "str.expandtabs()")
    elif name == "replace" and len(args) >= 2:
        check_size(_replaced_size(text, str(args[0]), str(args[1])), "str.replace()")
    elif name == "join" and args:
        items = list(args[0])
        check_size(_joined_size(text, items), "str.join()")
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
        spend(1)
        yield item


def _range(*args: int) -> range:
    """``range``, its items counted against the rendering's steps."""
    numbers = range(*args)
    spend(len(numbers))
    return numbers


def sized(value: Any) -> Any:
    """``value``, refused when it is a text or list longer than ``MAX_OUTPUT``."""
    if isinstance(value, _SIZED):
        check_size(len(value), "a text or list")
    return value


def _bounded_filter(name: str, check: Callable[..., None]) -> Callable[..., Any]:
    """Jinja's filter ``name`` with ``check(value, *args)`` first and its result's size after."""
    original = JINJA_FILTERS[name]

    @wraps(original)  # keeps Jinja's pass_eval_context marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        try:
            check(*args, **kwargs)
        except LimitExceeded as exc:
            raise LimitExceeded(f"the {name} filter: {exc}") from None
        return sized(original(*args, **kwargs))

    return bounded


def _small_numbers(*args: Any, **kwargs: Any) -> None:
    """Refuse a count or width argument above ``MAX_FORMAT_WIDTH`` (the value is ``args[0]``)."""
    for number in (*args[1:], *kwargs.values()):
        if isinstance(number, int) and number > MAX_FORMAT_WIDTH:
            raise LimitExceeded(f"a count or width of {number}, more than {MAX_FORMAT_WIDTH}")


def _indent_check(text: Any, width: Any = 4, *args: Any, **kwargs: Any) -> None:
    pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    check_size(len(str(text)) + (str(text).count("\n") + 1) * pad, "indent")


def _replace_check(eval_ctx: Any, text: Any, old: Any, new: Any, *args: Any) -> None:
    check_size(_replaced_size(str(text), str(old), str(new)), "replace")


@pass_eval_context
def _join(eval_ctx: EvalContext, value: Iterable[Any], separator: str = "",
          attribute: str | int | None = None) -> str:
    """Jinja's ``join``, refusing a text longer than ``MAX_OUTPUT``."""
    items = list(value)
    check_size(len(str(separator)) * max(len(items) - 1, 0), "join's separators")
    return str(sized(sync_do_join(eval_ctx, items, separator, attribute)))


def _format_check(value: Any, *args: Any, **kwargs: Any) -> None:
    _check_printf(str(value))


def _tojson_check(eval_ctx: Any, value: Any, indent: Any = None) -> None:
    if isinstance(indent, int) and indent > 16:
        raise LimitExceeded(f"tojson indent {indent}, more than 16")


FILTERS: dict[str, Callable[..., Any]] = {
    "_rr_loop": _loop, "_rr_sized": sized,  # what `mark_bounds` inserts
    "center": _bounded_filter("center", _small_numbers),
    "batch": _bounded_filter("batch", _small_numbers),
    "slice": _bounded_filter("slice", _small_numbers),
    "wordwrap": _bounded_filter("wordwrap", _small_numbers),
    "truncate": _bounded_filter("truncate", _small_numbers),
    "indent": _bounded_filter("indent", _indent_check),
    "replace": _bounded_filter("replace", _replace_check),
    "join": _join,
    "format": _bounded_filter("format", _format_check),
    "tojson": _bounded_filter("tojson", _tojson_check),
}
"""The filters a bounded environment adds or replaces."""
GLOBALS: dict[str, Any] = {"range": _range}
"""The globals a bounded environment replaces."""


def mark_bounds(tree: nodes.Template) -> nodes.Template:
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
