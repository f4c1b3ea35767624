"""relayrace: multi-agent LLM systems built around the handoff.

Agents hand a live conversation to one another in the same session, or delegate bounded tasks
to children that report back in a structured form. Everything that happens is an event in the
session log, traced in one tree, with usage rolled up across the whole team.
"""

from typing import TYPE_CHECKING

from ._moved import install as _install_moved
from ._version import __version__ as __version__
from .agents.agent import Agent
from .agents.compression import Compression
from .agents.context import RunContext
from .agents.handoffs import Handoff, TransferPolicy, handoff
from .agents.human import HumanAgent, human
from .agents.input_filters import keep_last, nest_history, remove_tool_traffic
from .agents.memory import Memory
from .agents.output import json_schema_type
from .agents.permissions import Permissions
from .agents.tools import FunctionTool, RateLimit, Tool, ToolRetry, Toolset, tool
from .core._lazy import lazy_names
from .core.events import (
    AgentEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    ContextCompactedEvent,
    DelegationEvent,
    GuardrailTriggeredEvent,
    HandoffEvent,
    HumanTakeoverEvent,
    MemoryEvent,
    MessageEvent,
    OutputEvent,
    QuestionAskedEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StatusEvent,
    TextDeltaEvent,
    ToolResultEvent,
    ToolStartedEvent,
)
from .core.exceptions import (
    AllModelsFailed,
    AnswerError,
    CircularReferenceError,
    ConfigError,
    DurableRunError,
    GuardrailTripwireTriggered,
    HandoffError,
    HandoffLoopError,
    MaxHandoffsExceeded,
    MaxTurnsExceeded,
    MCPServerError,
    ModelBehaviorError,
    ModelProviderError,
    ModelRefused,
    ModelTimeout,
    OutputValidationError,
    PatternStepFailed,
    RelayraceError,
    RunTimeout,
    SessionConflictError,
    SessionError,
    SessionInUseError,
    SessionStoreBusy,
    SessionStoreUnavailable,
    UnknownOptionError,
    UsageLimitExceeded,
    UserError,
)
from .core.messages import Message, ToolCall
from .core.usage import RunUsage, Usage, UsageLimits
from .models import (
    FallbackModel,
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputMode,
    infer_model,
)
from .runner import Runner, RunResult, RunStream

if TYPE_CHECKING:
    from .agents.compression import read_result
    from .agents.tools import ask_user
    from .connect.mcp import MCPServer

__all__ = [
    "Agent",
    "AgentEvent",
    "AllModelsFailed",
    "AnswerError",
    "ApprovalDecidedEvent",
    "ApprovalRequestedEvent",
    "CircularReferenceError",
    "Compression",
    "ConfigError",
    "ContextCompactedEvent",
    "DelegationEvent",
    "DurableRunError",
    "FallbackModel",
    "FunctionTool",
    "GuardrailTriggeredEvent",
    "GuardrailTripwireTriggered",
    "Handoff",
    "HandoffError",
    "HandoffEvent",
    "HandoffLoopError",
    "HumanAgent",
    "HumanTakeoverEvent",
    "MCPServer",
    "MCPServerError",
    "MaxHandoffsExceeded",
    "MaxTurnsExceeded",
    "Memory",
    "MemoryEvent",
    "Message",
    "MessageEvent",
    "Model",
    "ModelBehaviorError",
    "ModelProviderError",
    "ModelRefused",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelTimeout",
    "OutputEvent",
    "OutputMode",
    "OutputValidationError",
    "PatternStepFailed",
    "Permissions",
    "QuestionAskedEvent",
    "RateLimit",
    "RelayraceError",
    "RunContext",
    "RunFinishedEvent",
    "RunResult",
    "RunStartedEvent",
    "RunStream",
    "RunTimeout",
    "RunUsage",
    "Runner",
    "SessionConflictError",
    "SessionError",
    "SessionInUseError",
    "SessionStoreBusy",
    "SessionStoreUnavailable",
    "StatusEvent",
    "TextDeltaEvent",
    "Tool",
    "ToolCall",
    "ToolResultEvent",
    "ToolRetry",
    "ToolStartedEvent",
    "Toolset",
    "TransferPolicy",
    "UnknownOptionError",
    "Usage",
    "UsageLimitExceeded",
    "UsageLimits",
    "UserError",
    "ask_user",
    "handoff",
    "human",
    "infer_model",
    "json_schema_type",
    "keep_last",
    "nest_history",
    "read_result",
    "remove_tool_traffic",
    "tool",
]

# Made when first named (see `relayrace.core._lazy`): the MCP client, which `relayrace --help`
# and teams without MCP never load, and the built-in tools.
__getattr__ = lazy_names(__name__, {"MCPServer": ".connect.mcp", "ask_user": ".agents.tools",
                                    "read_result": ".agents.compression"})

_install_moved()  # an old module path fails naming its new one
