"""The one Jinja2 environment every template renders in: sandboxed, strict and bounded.

It may read the values it is given and call their safe methods, but cannot reach Python
internals (``__class__``, ``__globals__`` ...) nor mutate lists and dicts; printing or testing
an undefined value is an error. A tool call's arguments arrive as `Data`, whose keys win
over dict methods and whose missing keys are named. Every rendering is bounded
(`relayrace.core._bounds`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import StrictUndefined, Template, Undefined
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup

from ._bounds import (
    FILTERS,
    GLOBALS,
    bounded,
    check_binop,
    check_format,
    check_size,
    check_str_method,
    sized,
    spend,
)

__all__ = ["ENV", "Data", "render", "wrap"]


class Data(dict[str, Any]):
    """A tool call's arguments as template data: its keys win over dict methods (``data.items``)."""

    __slots__ = ("path",)

    def __init__(self, values: Mapping[Any, Any], path: str) -> None:
        super().__init__({str(k): wrap(v, f"{path}.{k}") for k, v in values.items()})
        self.path = path


def wrap(value: Any, path: str) -> Any:
    """``value`` as template data: mappings (also inside lists) become `Data` named ``path``."""
    if isinstance(value, (list, tuple)):
        return [wrap(item, f"{path}[{i}]") for i, item in enumerate(value)]
    return Data(value, path) if isinstance(value, Mapping) else value


class _MissingMethod(StrictUndefined):
    """A missing argument named like a dict method: undefined, yet ``data.items()`` calls it."""

    __slots__ = ("_method",)  # underscored, so templates cannot reach it

    def __init__(self, method: Callable[..., Any], hint: str, obj: Data, name: str) -> None:
        super().__init__(hint=hint, obj=obj, name=name)
        self._method = method


class _Environment(ImmutableSandboxedEnvironment):
    """The sandbox, with call arguments (`Data`) looked up key first and missing keys named.

    It also keeps renderings bounded: arithmetic, ``%`` formatting and ``str.format``, string
    methods, calls and loops are checked against the limits of `relayrace.core._bounds`.
    """

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is not None:
            check_format(value.__self__)
        return wrapper

    def getattr(self, obj: Any, attribute: str) -> Any:
        if not isinstance(obj, Data):
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
        spend(1)  # macros calling themselves, too
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, str):
            args = check_str_method(owner, getattr(obj, "__name__", ""), args)
        return sized(super().call(context, obj, *args, **kwargs))

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, Data) and isinstance(argument, str):
            return obj[argument] if argument in obj else self._missing(obj, argument)
        return super().getitem(obj, argument)

    def _missing(self, obj: Data, name: str, method: Any = None) -> Undefined:
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


ENV = _Environment(autoescape=False, undefined=StrictUndefined, keep_trailing_newline=True)
"""The environment: templates are parsed and compiled here, once per source text."""
ENV.filters.update(FILTERS)
# what a context transform's JSON template prints its values through
ENV.filters.update(_rr_json_in_string=_json_in_string, _rr_json_value=_json_value)
ENV.globals.update(GLOBALS)
del ENV.globals["lipsum"]  # placeholder text of any length: nothing a prompt needs


def render(template: Template, variables: Mapping[str, Any]) -> str:
    """``template`` rendered within the bounds, its output counted as it is produced."""
    out: list[str] = []
    size = 0
    with bounded():
        for chunk in template.generate(variables):
            size += len(chunk)
            check_size(size, "the output")
            out.append(chunk)
    return "".join(out)
