"""An agent's specialists and the meta-tools that reach them, as data: which meta-tools
(`MetaToolName`) and how they run their children (`DelegationConfig`).

The tools are built in ``relayrace.teams.meta_tools``, above this layer; the engine installs
that builder here (``install_meta_tools``), and `Agent` offers its meta-tools through
``meta_tools_for``, so the declarations never import the teams layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..core.exceptions import UserError
from ..core.reports import DEFAULT_REPORT_SUFFIX
from ._spec import AgentLike

if TYPE_CHECKING:
    from ..models.interface import Model
    from .tools import Tool

__all__ = ["META_TOOLS", "DelegationConfig", "MetaToolBuilder", "MetaToolName",
           "install_meta_tools", "meta_tools_for"]

MetaToolName = Literal["delegate", "parallel", "pipeline", "debate"]
META_TOOLS: tuple[MetaToolName, ...] = ("delegate", "parallel", "pipeline", "debate")


@dataclass(slots=True, kw_only=True)
class DelegationConfig:
    """How an agent's meta-tools run their children."""

    max_concurrency: int = 4
    """Children of one ``war_room`` or debate round running at once."""
    child_max_turns: int | None = None
    """Turn limit of each child (default: the child agent's own)."""
    child_timeout: float | None = None
    """Seconds before a child is stopped and reported as timed out."""
    report_template: str = DEFAULT_REPORT_SUFFIX
    """The report request appended to each child's instructions."""
    debate_models: Mapping[str, Model | str] = field(default_factory=dict)
    """Models that may join a debate as participants, by the name the model uses."""
    judge: AgentLike | None = None
    """An agent that judges debate consensus instead of comparing normalized answers."""

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise UserError(f"max_concurrency must be at least 1, got {self.max_concurrency}.")


class MetaToolBuilder(Protocol):
    """Builds the meta-tools ``names`` of the agent ``owner`` over its ``specialists``."""

    def __call__(self, owner: str, specialists: Sequence[Any], names: Sequence[str],
                 config: DelegationConfig) -> list[Tool]:
        """The tools; a ``UserError`` for an unknown name or no specialists."""
        ...


_installed: list[MetaToolBuilder] = []


def install_meta_tools(builder: MetaToolBuilder) -> None:
    """Make ``builder`` the one that builds every agent's meta-tools (the engine installs
    ``relayrace.teams.meta_tools.build_meta_tools`` when it is imported)."""
    _installed[:] = [builder]


def meta_tools_for(owner: str, specialists: Sequence[AgentLike], names: Sequence[str],
                   config: DelegationConfig) -> list[Tool]:
    """The meta-tools ``names`` of the agent ``owner`` over ``specialists``."""
    [build] = _installed  # installed when relayrace (its engine) is imported
    return build(owner, specialists, names, config)
