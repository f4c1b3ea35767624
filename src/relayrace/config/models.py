"""The YAML team format as pydantic models: the one definition of what a document may hold.

The format is Kubernetes-style (``apiVersion``, ``kind``, ``metadata``, ``spec``) and reads
Astromesh's ``astromesh/v1`` agent files. Keys of Astromesh that relayrace does not implement
are declared here with :func:`astromesh_only`: they validate, and the loader reports each one
as a warning saying it is ignored. Any other key is an error.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
    "TeamDocument",
    "TeamSpec",
    "ToolSpec",
    "TranscriptSpec",
    "TransferPolicySpec",
    "WorkflowDocument",
    "WorkflowSpec",
    "astromesh_only",
]

API_VERSIONS = ("relayrace/v1", "astromesh/v1")
"""Accepted ``apiVersion`` values."""
SUPPORTED_PATTERNS = ("react", "supervisor", "swarm", "plan_and_execute", "parallel_fan_out",
                      "pipeline")
"""Orchestration patterns relayrace implements."""
UNSUPPORTED_PATTERNS = ("glyph",)
"""Astromesh patterns relayrace reads but replaces with ``react`` (with a warning)."""
UNSUPPORTED_TOOL_TYPES = ("builtin", "client")
"""Astromesh tool types relayrace reads but skips (with a warning); so is an ``mcp`` tool that
names no command or url (an Astromesh server reference)."""
MODEL_PROVIDERS = ("openai", "anthropic", "ollama", "vllm", "lmstudio",
                   "openai_compat", "openai-compatible")
"""Valid ``spec.model.primary.provider`` values (the last two mean ``openai``)."""
PROVIDER_ALIASES = {"openai_compat": "openai", "openai-compatible": "openai"}
"""Provider names of Astromesh that relayrace reads as another provider."""
IGNORED_MARK = "x-relayrace-ignored"
"""JSON Schema marker of a key that is accepted and ignored with a warning."""

_IGNORED_NOTE = "Astromesh key not supported by relayrace: accepted and ignored with a warning."


def astromesh_only(what: str, *, alias: str | None = None) -> Any:
    """A field that is read, reported as ignored, and otherwise has no effect."""
    return Field(default=None, alias=alias, description=f"{what} {_IGNORED_NOTE}",
                 json_schema_extra={IGNORED_MARK: True})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- metadata ---------------------------------------------------------------------------------


class Metadata(_Strict):
    """Who a document defines."""

    name: str = Field(min_length=1, description="The unique name other documents refer to.")
    version: str | None = Field(default=None, description="A version label, informational.")
    labels: dict[str, str] = Field(default_factory=dict,
                                   description="Free-form key/value labels, informational.")
    description: str | None = Field(default=None, description="What this document is for.")
    namespace: Any = astromesh_only("Astromesh namespace.")


# -- agents -----------------------------------------------------------------------------------


class IdentitySpec(_Strict):
    """How an agent presents itself."""

    description: str = Field(default="", description=(
        "What the agent does; shown to other agents' models in transfer and tool descriptions."))
    display_name: str | None = Field(default=None, description="A human-friendly name.")
    avatar: Any = astromesh_only("Astromesh avatar.")


class ModelParameters(BaseModel):
    """Sampling and transport options; keys not listed pass to the provider unchanged."""

    model_config = ConfigDict(extra="allow")  # other keys become ModelSettings.extra

    temperature: float | None = Field(default=None, description="Sampling temperature.")
    top_p: float | None = Field(default=None, description="Nucleus sampling mass.")
    max_tokens: int | None = Field(default=None, gt=0,
                                   description="Most tokens to generate per request.")
    timeout: float | None = Field(default=None, gt=0,
                                  description="Seconds before a model request is abandoned.")
    parallel_tool_calls: bool | None = Field(default=None, description=(
        "Whether the model may emit several tool calls in one turn (OpenAI-compatible only)."))
    deadline: float | None = Field(default=None, gt=0, description=(
        "Seconds a whole model request may take, retries and streaming included."))
    strict_tools: bool | None = Field(default=None, description=(
        "Send tool schemas in strict mode (OpenAI-compatible servers), so the model's "
        "arguments always match them."))


class PrimaryModelSpec(_Strict):
    """The model an agent uses."""

    provider: str = Field(description="One of: " + ", ".join(MODEL_PROVIDERS) + ".")
    model: str = Field(min_length=1, description="The provider's model name, e.g. gpt-4o-mini.")
    endpoint: str | None = Field(default=None, description=(
        "Base URL of the API (an OpenAI-compatible server, or an Anthropic proxy)."))
    api_key_env: str | None = Field(default=None, description=(
        "The environment variable holding the API key, read when the team is loaded."))
    parameters: ModelParameters = Field(default_factory=ModelParameters,
                                        description="Sampling and transport options.")
    temperature: float | None = Field(default=None, description=(
        "Shorthand for parameters.temperature (parameters wins)."))
    max_tokens: int | None = Field(default=None, gt=0, description=(
        "Shorthand for parameters.max_tokens (parameters wins)."))
    timeout: float | None = Field(default=None, gt=0, description=(
        "Shorthand for parameters.timeout (parameters wins)."))
    source: Any = astromesh_only("Astromesh adapter selector.")
    provider_ref: Any = astromesh_only("Astromesh provider registry reference.",
                                       alias="providerRef")
    api_key: Any = astromesh_only("An inline API key; use api_key_env.")


class ModelSpec(_Strict):
    """Model selection."""

    primary: PrimaryModelSpec | None = Field(default=None, description=(
        "The model the agent uses (required unless Astromesh's default is given)."))
    fallback: PrimaryModelSpec | list[PrimaryModelSpec] | None = Field(default=None, description=(
        "Models asked in turn when the one before fails with a provider error, a timeout or a "
        "refusal (a FallbackModel); one model or a list."))
    routing: Any = astromesh_only("Astromesh model routing strategy.")
    default: Any = astromesh_only("Astromesh per-role model candidates; without primary, the "
                                  "agent needs load_team(model=...).")
    roles: Any = astromesh_only("Astromesh per-role model routing.")


class PromptsSpec(_Strict):
    """Prompts."""

    system: str = Field(description=(
        "The agent's instructions: a Jinja2 template rendered with the run's context "
        "variables (and a context_transform's output when the agent is called as a tool)."))
    templates: Any = astromesh_only("Astromesh named prompt templates.")


class TranscriptSpec(_Strict):
    """How much of the conversation a swarm member receives on a handoff."""

    turns: int | None = Field(default=None, ge=1, description="Most recent turns passed on.")
    chars: int | None = Field(default=None, ge=1, description="Most characters passed on.")


class OrchestrationSpec(_Strict):
    """How the agent runs."""

    pattern: Literal["react", "supervisor", "swarm", "plan_and_execute", "parallel_fan_out",
                     "pipeline", "glyph"] = Field(default="react", description=(
        "react: tools in a loop; supervisor: only agent tools may be called; swarm: the agent "
        "and its agent tools become peers that hand the conversation to one another; "
        "plan_and_execute: a plan of at most max_steps steps, each run, then an answer; "
        "parallel_fan_out: at most max_subtasks subtasks at once, then an answer; pipeline: "
        "the named stages in order. glyph is an Astromesh pattern relayrace replaces with "
        "react (with a warning)."))
    max_iterations: int | None = Field(default=None, ge=1,
                                       description="Most model turns per run (max_turns).")
    timeout_seconds: float | None = Field(default=None, gt=0,
                                          description="Seconds before a run of this agent stops.")
    max_handoffs: int | None = Field(default=None, ge=1,
                                     description="swarm: most handoffs per run (default 3).")
    transcript: TranscriptSpec | None = Field(default=None, description=(
        "swarm: how much conversation a member receives on a handoff."))
    max_steps: int = Field(default=6, ge=1, le=50, description=(
        "plan_and_execute: the most steps a plan may have (a longer plan is sent back)."))
    max_subtasks: int = Field(default=4, ge=1, le=50, description=(
        "parallel_fan_out: the most subtasks run at once."))
    on_error: Literal["cancel", "collect"] = Field(default="cancel", description=(
        "parallel_fan_out: cancel the other subtasks at the first failure (the run fails), "
        "or collect every result, failures included, for the answer."))
    stages: list[Annotated[str, Field(min_length=1, max_length=40)]] | None = Field(
        default=None, min_length=2, max_length=6, description=(
            "pipeline: 2 to 6 stage names (default: analyze, process, synthesize)."))
    narrate: Any = astromesh_only("Astromesh glyph narration.")


class RateLimitSpec(_Strict):
    """A sliding-window rate limit of one tool."""

    max_calls: int = Field(ge=1, description="Calls allowed within the window.")
    window_seconds: float = Field(gt=0, description="The window's length in seconds.")


class AgentToolSpec(_Strict):
    """Another agent offered as a tool: each call runs it in a child session that reports back."""

    type: Literal["agent"] = Field(description="agent")
    agent: str = Field(min_length=1, description="metadata.name of the agent called.")
    name: str | None = Field(default=None, description=(
        "The tool name the model sees (default: the agent's name)."))
    description: str | None = Field(default=None, description=(
        "What the tool does, for the model (default: the agent's description)."))
    parameters: dict[str, Any] | None = Field(default=None, description=(
        "JSON Schema of the arguments (default: {query: string})."))
    context_transform: str | None = Field(default=None, description=(
        "A sandboxed Jinja2 template over `data` (the call's arguments) producing a JSON "
        "object: the called agent's template variables. On a swarm member, `data` holds the "
        "transfer's reason (as `reason` and `query`) and the object replaces the reason the "
        "member receives."))
    rate_limit: RateLimitSpec | None = Field(default=None,
                                             description="Calls allowed per time window.")
    max_turns: int | None = Field(default=None, ge=1,
                                  description="Turn limit of each call's child run.")
    timeout_seconds: float | None = Field(default=None, gt=0,
                                          description="Seconds before a call is abandoned.")
    report: bool = Field(default=True, description=(
        "End the child with a structured delegation report, which is all the caller receives."))
    include_history: bool = Field(default=False, description=(
        "Pass a bounded part of the caller's conversation to the child."))
    requires_approval: bool = Field(default=False,
                                    description="Pause for a human decision before each call.")
    max_result_tokens: int | None = Field(default=None, ge=1, description=(
        "The longest result the caller's model sees (estimated tokens); longer ones are cut "
        "with a note (default: the agent's spec.max_result_tokens)."))
    protected: bool = Field(default=False, description="Compression never clears its results.")
    compactable: bool = Field(default=False,
                              description="Compression clears its old results first.")
    confirm: bool = Field(default=False, description=(
        "Astromesh's confirmation gate: the same as requires_approval. Only a person's "
        "decision (Runner.resume, relayrace resume) confirms; no model, parent or child can."))


class PythonToolSpec(_Strict):
    """A Python function or relayrace Tool, imported by path."""

    type: Literal["python"] = Field(description="python")
    function: str = Field(pattern=r"^[\w.]+:[\w.]+$", description=(
        "'package.module:attribute': a relayrace Tool, or a typed function wrapped with "
        "relayrace.tool. A module not importable as is is looked up next to the YAML file."))
    name: str | None = Field(default=None, description="The tool name (default: its own).")
    description: str | None = Field(default=None, description=(
        "What the tool does (default: the function's docstring)."))
    sequential: bool | None = Field(default=None, description=(
        "Never run concurrently with other calls of the same turn."))
    requires_approval: bool | None = Field(default=None, description=(
        "Pause for a human decision before each call."))
    confirm: bool | None = Field(default=None, description=(
        "Astromesh's confirmation gate: the same as requires_approval. Only a person's "
        "decision confirms; no model, parent or child can."))
    rate_limit: RateLimitSpec | None = Field(default=None,
                                             description="Calls allowed per time window.")
    max_result_tokens: int | None = Field(default=None, ge=1, description=(
        "The longest result the model sees (estimated tokens); longer ones are cut with a "
        "note (default: the agent's spec.max_result_tokens)."))
    protected: bool | None = Field(default=None,
                                   description="Compression never clears its results.")
    compactable: bool | None = Field(default=None,
                                     description="Compression clears its old results first.")


class MCPToolSpec(_Strict):
    """The tools of an MCP server: run as a command (stdio) or reached at a URL (HTTP)."""

    type: Literal["mcp"] = Field(description="mcp")
    name: str | None = Field(default=None, description=(
        "The server's name in traces and errors (default: the command's file name or the URL's "
        "host)."))
    command: str | None = Field(default=None, min_length=1, description=(
        "The command that runs the server over stdio, e.g. mcp-server-time."))
    args: list[str] = Field(default_factory=list, description="The command's arguments.")
    env: dict[str, str] = Field(default_factory=dict, description=(
        "Environment variables for the command, added to a safe default environment."))
    cwd: str | None = Field(default=None, description=(
        "The command's working directory, relative to the YAML file."))
    url: str | None = Field(default=None, pattern=r"^https?://", description=(
        "The streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp."))
    headers: dict[str, str] = Field(default_factory=dict, description=(
        "HTTP headers sent with every request (url only)."))
    include: list[str] | None = Field(default=None, description=(
        "Offer only these tools (the server's names)."))
    exclude: list[str] | None = Field(default=None, description=(
        "Leave out these tools (the server's names)."))
    prefix: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,32}$", description=(
        "Offer each tool as <prefix>_<name>, to avoid clashing names."))
    timeout_seconds: float = Field(default=60.0, gt=0,
                                   description="Seconds a call may take before it fails.")
    requires_approval: bool = Field(default=False, description=(
        "Pause for a human decision before each call of the server's tools."))
    server: Any = astromesh_only("Astromesh MCP server reference; give command or url.")

    @model_validator(mode="after")
    def _one_transport(self) -> MCPToolSpec:
        if self.command is not None and self.url is not None:
            raise ValueError("give command (stdio) or url (streamable HTTP), not both")
        if self.headers and self.url is None:
            raise ValueError("headers go with url; a stdio server takes env")
        if self.command is None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd go with command")
        return self

    @property
    def runnable(self) -> bool:
        """Whether it names a server relayrace can run (else an Astromesh reference)."""
        return self.command is not None or self.url is not None


class SpawnAgentToolSpec(_Strict):
    """The ``spawn_agent`` meta-tool: the model writes a one-off child agent, with a model from
    ``models`` and tools from ``tools``, and runs it on a task as a delegated child."""

    type: Literal["spawn_agent"] = Field(description="spawn_agent")
    name: str = Field(default="spawn_agent", pattern=r"^[A-Za-z0-9_-]{1,64}$",
                      description="The tool's name.")
    models: dict[str, PrimaryModelSpec] = Field(min_length=1, description=(
        "The menu of models a spawned agent may use, by the name the model picks (the first "
        "is the default)."))
    tools: list[str] = Field(default_factory=list, description=(
        "Names of this agent's python tools a spawned agent may be given."))
    max_turns: int | None = Field(default=None, ge=1,
                                  description="Most model turns of each spawned agent.")
    timeout_seconds: float | None = Field(default=None, gt=0,
                                          description="Seconds each spawned agent may run.")


class A2AToolSpec(_Strict):
    """An agent in another process reached over A2A: a delegated child (``as: tool``) or a
    handoff target (``as: handoff``)."""

    type: Literal["a2a"] = Field(description="a2a")
    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$", description=(
        "The agent's name (its tool is named after it; a handoff offers transfer_to_<name>). "
        "Default: the name on the remote's agent card, fetched when the team is built."))
    url: str | None = Field(default=None, pattern=r"^https?://", description=(
        "The remote agent's base URL (its card is at /.well-known/agent-card.json)."))
    card_url: str | None = Field(default=None, pattern=r"^https?://", description=(
        "Astromesh's form: the agent card's URL (the base URL is read from it)."))
    description: str | None = Field(default=None, description=(
        "What the agent does, for the model choosing it (default: the card's)."))
    as_: Literal["tool", "handoff"] = Field(default="tool", alias="as", description=(
        "tool: each call delegates a task to the remote agent; handoff: a transfer makes it "
        "the active agent until its remote task is done."))
    agent: str | None = Field(default=None, description=(
        "Which of a relayrace server's agents answers (sent as the messages' metadata)."))
    headers: dict[str, str] = Field(default_factory=dict, description=(
        "HTTP headers sent with every request (an API key)."))
    timeout_seconds: float = Field(default=300.0, gt=0, description=(
        "Seconds one exchange with the remote agent may take."))
    auth: Any = astromesh_only("Astromesh A2A auth; send credentials with headers.")
    policy: Any = astromesh_only("Astromesh A2A policy.")
    rate_limit: Any = astromesh_only("Astromesh A2A rate limit.")

    @model_validator(mode="after")
    def _one_address(self) -> A2AToolSpec:
        if (self.url is None) == (self.card_url is None):
            raise ValueError("give the remote agent's url (or Astromesh's card_url), once")
        return self

    @property
    def base_url(self) -> str:
        """The remote's base URL, from ``url`` or ``card_url``."""
        if self.url is not None:
            return self.url
        assert self.card_url is not None
        return self.card_url.split("/.well-known/")[0]


class HumanToolSpec(_Strict):
    """A person the conversation can be handed to (a support desk's "talk to a human"): a
    handoff target whose turns a person takes. The run stops until they reply."""

    type: Literal["human"] = Field(description="human")
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description=(
        "The person's agent name (the model transfers with transfer_to_<name>)."))
    description: str = Field(default="", description=(
        "Who the person is and when to transfer to them, for the model choosing."))


class ExternalToolSpec(BaseModel):
    """An Astromesh tool kind relayrace does not run (builtin, client): skipped."""

    model_config = ConfigDict(extra="allow")  # each Astromesh tool kind has its own keys

    type: Literal["builtin", "client"] = Field(description=(
        f"builtin or client. {_IGNORED_NOTE}"), json_schema_extra={IGNORED_MARK: True})
    name: str | None = Field(default=None, description="The tool's name.")


ToolSpec = Annotated[AgentToolSpec | PythonToolSpec | MCPToolSpec | SpawnAgentToolSpec
                     | A2AToolSpec | HumanToolSpec | ExternalToolSpec,
                     Field(discriminator="type")]


class GuardrailsSpec(_Strict):
    """Rule dicts checked on the input and output (see relayrace.agents.guardrails)."""

    input: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Rules on the user input: {type: pii_detection|max_length|topic_filter|content_filter|"
        "cost_limit, ...}."))
    output: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Rules on the final output: {type: pii_detection|content_filter|cost_limit, ...}; "
        "cost_limit bounds the tokens of each turn, its delegations included."))


class CompressionSpec(_Strict):
    """Keeping requests within a token budget on long conversations (relayrace.Compression)."""

    max_tokens: int = Field(ge=100, description=(
        "The request size (estimated tokens) above which old tool results are cleared and "
        "then old turns summarized."))
    summarize: bool = Field(default=True, description=(
        "Whether old turns may be summarized (a model request) once clearing results is not "
        "enough."))
    summary_model: PrimaryModelSpec | None = Field(default=None, description=(
        "The model that summarizes (default: the agent's)."))


class ConversationalMemorySpec(_Strict):
    """An agent's memory of its conversations with a user, across sessions (relayrace.Memory),
    kept in the session store."""

    strategy: Literal["sliding_window", "summary"] = Field(
        default="sliding_window", description=(
            "sliding_window: the last max_turns turns; summary: a summary of older turns and "
            "the recent ones."))
    max_turns: int = Field(default=20, ge=1, description=(
        "Turns shown (sliding_window) or kept verbatim beside the summary (summary)."))
    store: Literal["transcript", "request"] = Field(default="transcript", description=(
        "What a turn remembers: the run's conversation, or only its request and this agent's "
        "answer (what an Astromesh swarm target stores)."))
    summary_model: PrimaryModelSpec | None = Field(default=None, description=(
        "The model of the summary strategy (default: the agent's)."))
    backend: Any = astromesh_only("Astromesh memory backend; relayrace keeps memory in the "
                                  "session store.")
    ttl: Any = astromesh_only("Astromesh memory expiry.")
    connection: Any = astromesh_only("Astromesh memory backend connection.")


class MemorySpec(_Strict):
    """Memory (Astromesh's spec.memory)."""

    conversational: ConversationalMemorySpec | None = Field(default=None, description=(
        "Conversational memory across the sessions of one user."))
    semantic: Any = astromesh_only("Astromesh semantic memory.")
    episodic: Any = astromesh_only("Astromesh episodic memory.")


class TransferPolicySpec(_Strict):
    """Where an agent may transfer besides its sub-agents."""

    to_parent: bool = Field(default=False, description="Allow a transfer back to the parent.")
    to_peers: bool = Field(default=False, description="Allow transfers to sibling agents.")


_Pattern = Annotated[str, Field(min_length=1, pattern=r"\S")]


class PermissionsSpec(_Strict):
    """Which of its tools an agent may call (relayrace.Permissions): fnmatch patterns of tool
    names, such as 'read_*'. A denied tool is not offered, and a call to it is refused."""

    allowed_actions: list[_Pattern] | None = Field(default=None, description=(
        "If given, only tools matching one of these patterns."))
    denied_actions: list[_Pattern] = Field(default_factory=list, description=(
        "Never tools matching one of these patterns (they win over allowed_actions)."))


class RetrySpec(_Strict):
    """How a chain link is tried again after a failure."""

    max_attempts: int = Field(default=1, ge=1, le=10, description="Tries in all.")
    backoff: Literal["fixed", "exponential"] = Field(default="fixed", description=(
        "fixed: the same wait before each retry; exponential: doubled each time."))
    initial_delay_seconds: float = Field(default=1.0, ge=0, le=300, description=(
        "Seconds before the first retry."))


class ChainLinkSpec(_Strict):
    """One agent a chain triggers."""

    agent: str = Field(min_length=1, description="metadata.name of the agent triggered.")
    when: str | None = Field(default=None, description=(
        "A condition over output (output.answer, output.data), e.g. "
        "'{{ output.data.score > 7 }}'; without it the link always runs."))
    input: str = Field(default="{{ output.answer }}", description=(
        "The Jinja template of the link's task, over output."))
    default: bool = Field(default=False, description=(
        "Run when no link with a 'when' ran (at most one default, without 'when')."))
    retry: RetrySpec | None = Field(default=None, description="Tries after a failure.")
    timeout_seconds: float | None = Field(default=None, gt=0,
                                          description="Seconds each try may take.")
    on_error: Literal["fail", "continue"] = Field(default="fail", description=(
        "fail: the run fails when the link fails; continue: the failure is noted."))


class ChainSpec(_Strict):
    """Astromesh's spec.chain: agents run after this one answers, as delegated children."""

    mode: Literal["sequential", "parallel"] = Field(default="sequential", description=(
        "Run the triggered links one after another, or at once."))
    max_depth: int = Field(default=5, ge=1, le=20, description=(
        "The most chains on any path, nested chains of the links included."))
    on_complete: list[ChainLinkSpec] = Field(min_length=1, description="The links, in order.")


class AgentSpec(_Strict):
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


class TeamSpec(_Strict):
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


class WorkflowSpec(_Strict):
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


class _Document(_Strict):
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
