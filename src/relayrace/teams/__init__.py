"""Declarations of agents combined: `shapes` (one implementation per shape), and the front-ends
over them: routing rules and `Team`, the workflow agents, the patterns and the meta-tools.
Imports `agents`, `core` and the ports.

    from relayrace.teams import LoopAgent, ParallelAgent, Pipeline, SequentialAgent, Team
"""

from .meta_tools import spawn_agent
from .patterns import ParallelFanOut, Pipeline, PlanAndExecute, swarm
from .routing import (
    AgentTarget,
    Always,
    ContextEquals,
    Custom,
    CustomTarget,
    Finish,
    FromSpeaker,
    NestedChatTarget,
    RevertToInitiator,
    RoundRobin,
    Rule,
    Stay,
    TerminateTarget,
    ToolCalled,
    TransferTo,
)
from .team import Team
from .workflows import Chain, ChainLink, LoopAgent, ParallelAgent, SequentialAgent

__all__ = [
    "AgentTarget",
    "Always",
    "Chain",
    "ChainLink",
    "ContextEquals",
    "Custom",
    "CustomTarget",
    "Finish",
    "FromSpeaker",
    "LoopAgent",
    "NestedChatTarget",
    "ParallelAgent",
    "ParallelFanOut",
    "Pipeline",
    "PlanAndExecute",
    "RevertToInitiator",
    "RoundRobin",
    "Rule",
    "SequentialAgent",
    "Stay",
    "Team",
    "TerminateTarget",
    "ToolCalled",
    "TransferTo",
    "spawn_agent",
    "swarm",
]
