"""The YAML team format as pydantic models: the one definition of what a document may hold.

The format is Kubernetes-style (``apiVersion``, ``kind``, ``metadata``, ``spec``) and reads
Astromesh's ``astromesh/v1`` agent files. Keys of Astromesh that relayrace does not implement
are declared with :func:`astromesh_only`: they validate, and the loader reports each one as a
warning saying it is ignored. Any other key is an error.

This module holds the documents and their three specs (agent, team, workflow); the sections of
an agent's spec and its tools are defined in ``_agent_sections`` and ``_tool_specs``, and
every model of the format can be imported from here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ._agent_sections import (
    ChainLinkSpec,
    ChainSpec,
    CompressionSpec,
    ConversationalMemorySpec,
    GuardrailsSpec,
    IdentitySpec,
    MemorySpec,
    ModelParameters,
    ModelSpec,
    OrchestrationSpec,
    PermissionsSpec,
    PrimaryModelSpec,
    PromptsSpec,
    RetrySpec,
    TranscriptSpec,
    TransferPolicySpec,
)
from ._format import (
    API_VERSIONS,
    IGNORED_MARK,
    MODEL_PROVIDERS,
    PROVIDER_ALIASES,
    SUPPORTED_PATTERNS,
    UNSUPPORTED_PATTERNS,
    UNSUPPORTED_TOOL_TYPES,
    Strict,
    astromesh_only,
)
from ._tool_specs import (
    A2AToolSpec,
    AgentToolSpec,
    ExternalToolSpec,
    HumanToolSpec,
    MCPToolSpec,
    PythonToolSpec,
    RateLimitSpec,
    SpawnAgentToolSpec,
    ToolSpec,
)

__all__ = [
    "API_VERSIONS",
    "DOCUMENT_KINDS",
    "IGNORED_MARK",
    "MODEL_PROVIDERS",
    "PROVIDER_ALIASES",
    "SUPPORTED_PATTERNS",
    "UNSUPPORTED_PATTERNS",
    "UNSUPPORTED_TOOL_TYPES",
    "A2AToolSpec",
    "AgentDocument",
    "AgentSpec",
    "AgentToolSpec",
    "ChainLinkSpec",
    "ChainSpec",
    "CompressionSpec",
    "ConversationalMemorySpec",
    "Document",
    "ExternalToolSpec",
    "GuardrailsSpec",
    "HumanToolSpec",
    "IdentitySpec",
    "MCPToolSpec",
    "MemorySpec",
    "Metadata",
    "ModelParameters",
    "ModelSpec",
    "OrchestrationSpec",
    "PermissionsSpec",
    "PrimaryModelSpec",
    "PromptsSpec",
    "PythonToolSpec",
    "RateLimitSpec",
    "RetrySpec",
    "SpawnAgentToolSpec",
    "TeamDocument",
    "TeamSpec",
    "ToolSpec",
    "TranscriptSpec",
    "TransferPolicySpec",
    "WorkflowDocument",
    "WorkflowSpec",
    "astromesh_only",
]


# -- metadata ---------------------------------------------------------------------------------


class Metadata(Strict):
    """Who a document defines."""

    name: str = Field(min_length=1, description="The unique name other documents refer to.")
    version: str | None = Field(default=None, description="A version label, informational.")
    labels: dict[str, str] = Field(default_factory=dict,
                                   description="Free-form key/value labels, informational.")
    description: str | None = Field(default=None, description="What this document is for.")
    namespace: Any = astromesh_only("Astromesh namespace.")


# -- agents -----------------------------------------------------------------------------------


class AgentSpec(Strict):
    """An agent."""

    identity: IdentitySpec = Field(default_factory=IdentitySpec, description="Presentation.")
    model: ModelSpec | None = Field(default=None, description=(
        "The model; required unless load_team is given model=."))
    prompts: PromptsSpec = Field(description="The instructions.")
    orchestration: OrchestrationSpec = Field(default_factory=OrchestrationSpec,
                                             description="Pattern and limits.")
    tools: list[ToolSpec] = Field(default_factory=list, description="Tools, by type.")
    guardrails: GuardrailsSpec = Field(default_factory=GuardrailsSpec,
                                       description="Input and output rules.")
    sub_agents: list[str] = Field(default_factory=list, description=(
        "Agents this one may hand the conversation to (names). An agent has one parent."))
    transfer_policy: TransferPolicySpec = Field(default_factory=TransferPolicySpec,
                                                description="Transfers besides sub-agents.")
    handoff_tools: Literal["per_agent", "single"] = Field(default="per_agent", description=(
        "per_agent: one transfer_to_<name> tool per target; single: one transfer_to_agent."))
    mode: Literal["chat", "task", "single_turn"] = Field(default="chat",
                                                        description="How a run ends.")
    specialists: list[str] = Field(default_factory=list, description=(
        "Agents the meta-tools may delegate to (names)."))
    meta_tools: list[Literal["delegate", "parallel", "pipeline", "debate"]] | None = Field(
        default=None, description="Meta-tools offered (default: all, when specialists are set).")
    memory: MemorySpec | None = Field(default=None, description=(
        "The agent's memory across the sessions of one user."))
    max_result_tokens: int | None = Field(default=8000, ge=1, description=(
        "The longest tool result the model sees (estimated tokens), unless a tool sets its "
        "own; longer ones are cut with a note. null: no limit."))
    compression: CompressionSpec | None = Field(default=None, description=(
        "Keep requests within a token budget on long conversations."))
    read_result: bool = Field(default=False, description=(
        "Offer the read_result tool, which reads cut, cleared and archived context back."))
    permissions: PermissionsSpec | None = Field(default=None, description=(
        "Which of its tools the agent may call."))
    sticky: bool = Field(default=False, description=(
        "Keep the conversation after answering even when it can transfer to no agent (by "
        "default the next user turn then starts with its parent)."))
    chain: ChainSpec | None = Field(default=None, description=(
        "Agents to trigger once this agent has answered (relayrace.teams.workflows.Chain)."))
    knowledge: Any = astromesh_only("Astromesh knowledge bundle (Open Knowledge Format).")
    output_schema: dict[str, Any] | str | None = Field(default=None, description=(
        "The final answer's structure: a JSON Schema (the answer is checked against it and "
        "comes back as JSON data), or the import path of a type (package.module:Name, e.g. a "
        "pydantic model), which becomes the agent's output_type."))
    output_mode: Literal["native", "tool", "prompted"] | None = Field(default=None, description=(
        "How the model is asked for output_schema (default: as its provider prefers)."))
    output_retries: int = Field(default=2, ge=0, description=(
        "How many times the model may give an invalid output again."))
    program: Any = astromesh_only("Astromesh glyph program.")

# -- teams and workflows ----------------------------------------------------------------------


class TeamSpec(Strict):
    """Agents taking turns, the next speaker picked by routing rules."""

    description: str = Field(default="", description="What the team does.")
    agents: list[str] = Field(min_length=1, description="The member agents (names).")
    initial: str | None = Field(default=None,
                                description="Who speaks first (default: the first agent).")
    rules: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Routing rules {when: <condition>, then: <target>, priority: 0}; conditions: "
        "from_speaker, tool_called, context_equals, always; targets: agent, terminate, "
        "revert_to_initiator, stay, round_robin, nested_chat: {agent: <any agent, team or "
        "workflow>, then: <target>} (runs it in a child session on the conversation so far; "
        "its answer comes back as one message)."))
    default_target: dict[str, Any] | None = Field(default=None, description=(
        "Where control goes when no rule matches (default: terminate)."))
    max_turns: int = Field(default=20, ge=1, description="Most agent turns per run.")
    bounded: bool = Field(default=False, description=(
        "max_turns is meant to end the run, so routing cycles with no exit are accepted (a "
        "round robin: default_target: {round_robin: [...]})."))
    guardrails: GuardrailsSpec = Field(default_factory=GuardrailsSpec,
                                       description="Input and output rules of the team.")


class WorkflowSpec(Strict):
    """Agents, teams or workflows run in a fixed arrangement."""

    type: Literal["sequential", "parallel", "loop"] = Field(description=(
        "sequential: each step gets the previous output; parallel: all steps on the same "
        "input; loop: the steps in sequence, repeated."))
    steps: list[str] = Field(min_length=1, description="Agents, teams or workflows (names).")
    description: str = Field(default="", description="What the workflow does.")
    max_iterations: int | None = Field(default=None, ge=1,
                                       description="loop: most repetitions (required).")
    until_output_contains: str | None = Field(default=None, min_length=1, description=(
        "loop: stop once an iteration's output contains this text."))
    on_error: Literal["cancel", "collect"] = Field(default="collect", description=(
        "parallel: when a step fails, collect (the others finish; the failure is in the "
        "answer) or cancel (the others are cancelled; the run fails)."))


# -- documents --------------------------------------------------------------------------------


class _Document(Strict):
    api_version: Literal["relayrace/v1", "astromesh/v1"] = Field(
        alias="apiVersion", description="relayrace/v1 (or astromesh/v1).")
    metadata: Metadata = Field(description="The name and labels.")


class AgentDocument(_Document):
    """``kind: Agent``."""

    kind: Literal["Agent"] = Field(description="Agent")
    spec: AgentSpec = Field(description="The agent.")


class TeamDocument(_Document):
    """``kind: Team``."""

    kind: Literal["Team"] = Field(description="Team")
    spec: TeamSpec = Field(description="The team.")


class WorkflowDocument(_Document):
    """``kind: Workflow``."""

    kind: Literal["Workflow"] = Field(description="Workflow")
    spec: WorkflowSpec = Field(description="The workflow.")


Document = Annotated[AgentDocument | TeamDocument | WorkflowDocument,
                     Field(discriminator="kind")]
DOCUMENT_KINDS: dict[str, type[AgentDocument | TeamDocument | WorkflowDocument]] = {
    "Agent": AgentDocument, "Team": TeamDocument, "Workflow": WorkflowDocument,
}
