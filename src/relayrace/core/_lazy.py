"""Names a module exports but makes on first use (PEP 562's module ``__getattr__``).

A module lists each such name in ``__all__`` and, for type checkers, imports or declares it
under ``TYPE_CHECKING``; at run time the name is made when it is first read (its module
imported, or its factory called) and kept in the module's namespace, so later reads are
plain lookups. ``import relayrace`` stays cheap this way: the SQLite stores, the MCP client
and the built-in tools, whose argument models wake pydantic's schema machinery, wait until a
program uses them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(module: str, where: Mapping[str, str | Callable[[], Any]]) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``module``: each name in ``where`` is read from the module named
    beside it (relative to ``module``'s package), or made by the function beside it."""
    namespace = import_module(module).__dict__
    package = namespace["__package__"]

    def attribute(name: str) -> Any:
        source = where.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = source() if callable(source) else getattr(import_module(source, package), name)
        namespace[name] = value
        return value

    return attribute
