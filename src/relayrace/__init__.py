"""relayrace: multi-agent LLM systems built around the handoff.

Agents hand a live conversation to one another in the same session, or delegate bounded tasks
to children that report back in a structured form. Everything that happens is an event in the
session log, traced in one tree, with usage rolled up across the whole team.
"""

from ._version import __version__ as __version__
from .agent import Agent
from .compression import Compression, read_result
from .context import RunContext
from .events import (
    AgentEvent,
    ApprovalRequestedEvent,
    ContextCompactedEvent,
    DelegationEvent,
    GuardrailTriggeredEvent,
    HandoffEvent,
    MemoryEvent,
    MessageEvent,
    OutputEvent,
    QuestionAskedEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextDeltaEvent,
    ToolResultEvent,
    ToolStartedEvent,
)
from .exceptions import (
    AllModelsFailed,
    AnswerError,
    CircularReferenceError,
    ConfigError,
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
    UsageLimitExceeded,
    UserError,
)
from .handoffs import Handoff, TransferPolicy, handoff, keep_last, remove_tool_traffic
from .mcp import MCPServer
from .memory import Memory
from .messages import Message, ToolCall
from .models import (
    FallbackModel,
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputMode,
    infer_model,
)
from .output import json_schema_type
from .permissions import Permissions
from .runner import Runner, RunResult, RunStream
from .tools import FunctionTool, RateLimit, Tool, ToolRetry, Toolset, ask_user, tool
from .usage import RunUsage, Usage, UsageLimits

__all__ = [
    "Agent",
    "AgentEvent",
    "AllModelsFailed",
    "AnswerError",
    "ApprovalRequestedEvent",
    "CircularReferenceError",
    "Compression",
    "ConfigError",
    "ContextCompactedEvent",
    "DelegationEvent",
    "FallbackModel",
    "FunctionTool",
    "GuardrailTriggeredEvent",
    "GuardrailTripwireTriggered",
    "Handoff",
    "HandoffError",
    "HandoffEvent",
    "HandoffLoopError",
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
    "TextDeltaEvent",
    "Tool",
    "ToolCall",
    "ToolResultEvent",
    "ToolRetry",
    "ToolStartedEvent",
    "Toolset",
    "TransferPolicy",
    "Usage",
    "UsageLimitExceeded",
    "UsageLimits",
    "UserError",
    "ask_user",
    "handoff",
    "infer_model",
    "json_schema_type",
    "keep_last",
    "read_result",
    "remove_tool_traffic",
    "tool",
]
