"""Per-agent tool permissions: which tools an agent may call, by ``fnmatch`` patterns.

Astromesh's ``permissions.allowed_actions`` / ``denied_actions``. A denied tool is not offered
to the model; a call to it anyway (a model may call a tool it was never offered) is refused
with a tool result naming the rule, and the run goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..core.exceptions import UserError

__all__ = ["Permissions"]


@dataclass(frozen=True, slots=True, init=False)
class Permissions:
    """Which tools an agent may call: ``Agent(..., permissions=Permissions(...))``.

    ``allow``: if given, only tools whose name matches one of these patterns; ``deny``: never
    tools whose name matches one of these (deny wins). Patterns are ``fnmatch`` patterns,
    matched case-sensitively (``"read_*"``, ``"delete_?"``). They apply to the agent's tools,
    agent tools and meta-tools included; transfers follow its ``transfer_policy``.
    """

    allow: tuple[str, ...] | None
    """Patterns of the tools allowed (``None``: every tool not denied)."""
    deny: tuple[str, ...]
    """Patterns of the tools denied."""

    def __init__(self, *, allow: Sequence[str] | None = None, deny: Sequence[str] = ()) -> None:
        for key, patterns in (("allow", allow), ("deny", deny)):
            if patterns is None:
                continue
            if isinstance(patterns, str):
                raise UserError(f"Permissions({key}=...) takes a list of patterns, not the "
                                f"string {patterns!r}; write {key}=[{patterns!r}].")
            bad = [p for p in patterns if not isinstance(p, str) or not p.strip()]
            if bad:
                raise UserError(f"Permissions({key}=...) takes tool-name patterns such as "
                                f"'read_*'; got {bad!r}.")
        object.__setattr__(self, "allow", None if allow is None else tuple(allow))
        object.__setattr__(self, "deny", tuple(deny))

    def refusal(self, tool_name: str) -> str | None:
        """The rule that forbids calling ``tool_name``, in words; ``None`` if it is allowed."""
        for pattern in self.deny:
            if fnmatchcase(tool_name, pattern):
                return f"it matches the denied pattern {pattern!r}"
        if self.allow is not None and not any(fnmatchcase(tool_name, p) for p in self.allow):
            allowed = ", ".join(map(repr, self.allow)) or "none"
            return f"it matches none of the allowed patterns ({allowed})"
        return None
