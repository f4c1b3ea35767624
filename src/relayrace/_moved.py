"""The module paths that moved when the package took layer folders, and the error they give.

An import of an old path fails at once with an `ImportError` that names the new path, rather
than with a bare "no module named"; CHANGELOG.md has the same table. Public names keep working
from ``relayrace`` itself.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["MOVED", "install"]

MOVED: dict[str, str] = {
    "relayrace._asgi": "relayrace.connect.asgi",
    "relayrace._budget": "relayrace._engine.budget",
    "relayrace._children": "relayrace._engine.children",
    "relayrace._context": "relayrace._engine.context",
    "relayrace._guarding": "relayrace._engine.guarding",
    "relayrace._keys": "relayrace.connect.keys",
    "relayrace._loopstate": "relayrace._engine.loopstate",
    "relayrace._modelcall": "relayrace._engine.modelcall",
    "relayrace._pii": "relayrace.core.pii",
    "relayrace._state": "relayrace._engine.state",
    "relayrace._steps": "relayrace._engine.steps",
    "relayrace._structured": "relayrace._engine.structured",
    "relayrace._takeover": "relayrace._engine.takeover",
    "relayrace._templates": "relayrace.core.templates",
    "relayrace._toolexec": "relayrace._engine.toolexec",
    "relayrace._turn": "relayrace._engine.turn",
    "relayrace._workers": "relayrace.durable.workers",
    "relayrace.a2a": "relayrace.connect.a2a",
    "relayrace.a2a_serve": "relayrace.connect.a2a_server",
    "relayrace.agent": "relayrace.agents.agent",
    "relayrace.approvals": "relayrace.agents.approvals",
    "relayrace.compression": "relayrace.agents.compression",
    "relayrace.context": "relayrace.agents.context",
    "relayrace.delegation": "relayrace.agents.delegation",
    "relayrace.events": "relayrace.core.events",
    "relayrace.exceptions": "relayrace.core.exceptions",
    "relayrace.guardrails": "relayrace.agents.guardrails",
    "relayrace.handoffs": "relayrace.agents.handoffs",
    "relayrace.human": "relayrace.agents.human",
    "relayrace.input_filters": "relayrace.agents.input_filters",
    "relayrace.mcp": "relayrace.connect.mcp",
    "relayrace.mcp_serve": "relayrace.connect.mcp_server",
    "relayrace.memory": "relayrace.agents.memory",
    "relayrace.messages": "relayrace.core.messages",
    "relayrace.meta_tools": "relayrace.teams.meta_tools",
    "relayrace.output": "relayrace.agents.output",
    "relayrace.patterns": "relayrace.teams.patterns",
    "relayrace.permissions": "relayrace.agents.permissions",
    "relayrace.reports": "relayrace.core.reports",
    "relayrace.routing": "relayrace.teams.routing",
    "relayrace.steps": "relayrace.sessions.steps",
    "relayrace.team": "relayrace.teams.team",
    "relayrace.tools": "relayrace.agents.tools",
    "relayrace.usage": "relayrace.core.usage",
    "relayrace.workflows": "relayrace.teams.workflows",
}
"""Old module path -> the module that holds its code now."""


class _MovedFinder:
    """Last on ``sys.meta_path``: consulted only for a name no other finder found. A finder
    by its method alone: ``importlib.abc`` would import ``importlib.resources`` and the
    archive modules with it, none of which a run needs."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        raise ModuleNotFoundError(
            f"{fullname} moved to {new} when relayrace's package took layer folders: import "
            f"from {new} (public names are also in `relayrace` itself); CHANGELOG.md lists "
            f"every moved path.", name=fullname)


def install() -> None:
    """Put the finder of moved paths on ``sys.meta_path`` once."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
