"""The sections of an agent's spec (``spec.identity``, ``spec.model``, ``spec.prompts``,
``spec.orchestration``, ``spec.guardrails``, ``spec.memory``, ``spec.chain`` ...) as pydantic
models; its tools are in `relayrace.config._tool_specs`, the spec itself in
`relayrace.config.models`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._format import MODEL_PROVIDERS, Strict, astromesh_only

__all__ = ["ChainLinkSpec", "ChainSpec", "CompressionSpec", "ConversationalMemorySpec",
           "GuardrailsSpec", "IdentitySpec", "MemorySpec", "ModelParameters", "ModelSpec",
           "OrchestrationSpec", "PermissionsSpec", "PrimaryModelSpec", "PromptsSpec",
           "RetrySpec", "TranscriptSpec", "TransferPolicySpec"]


class IdentitySpec(Strict):
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
    text_tool_calls: Literal["reask", "parse", "off"] | None = Field(default=None, description=(
        "What a final answer that is only tool calls written as text becomes: reask (the "
        "default) tells the model once to call the tool, parse runs them, off keeps the text "
        "as the answer."))


class PrimaryModelSpec(Strict):
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


class ModelSpec(Strict):
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


class PromptsSpec(Strict):
    """Prompts."""

    system: str = Field(description=(
        "The agent's instructions: a Jinja2 template rendered with the run's context "
        "variables (and a context_transform's output when the agent is called as a tool)."))
    templates: Any = astromesh_only("Astromesh named prompt templates.")


class TranscriptSpec(Strict):
    """How much of the conversation a swarm member receives on a handoff."""

    turns: int | None = Field(default=None, ge=1, description="Most recent turns passed on.")
    chars: int | None = Field(default=None, ge=1, description="Most characters passed on.")


class OrchestrationSpec(Strict):
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



class GuardrailsSpec(Strict):
    """Rule dicts checked on the input and output (see relayrace.agents.guardrails)."""

    input: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Rules on the user input: {type: pii_detection|max_length|topic_filter|content_filter|"
        "cost_limit, ...}."))
    output: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Rules on the final output: {type: pii_detection|content_filter|cost_limit, ...}; "
        "cost_limit bounds the tokens of each turn, its delegations included."))


class CompressionSpec(Strict):
    """Keeping requests within a token budget on long conversations (relayrace.Compression)."""

    max_tokens: int = Field(ge=100, description=(
        "The request size (estimated tokens) above which old tool results are cleared and "
        "then old turns summarized."))
    summarize: bool = Field(default=True, description=(
        "Whether old turns may be summarized (a model request) once clearing results is not "
        "enough."))
    summary_model: PrimaryModelSpec | None = Field(default=None, description=(
        "The model that summarizes (default: the agent's)."))


class ConversationalMemorySpec(Strict):
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


class MemorySpec(Strict):
    """Memory (Astromesh's spec.memory)."""

    conversational: ConversationalMemorySpec | None = Field(default=None, description=(
        "Conversational memory across the sessions of one user."))
    semantic: Any = astromesh_only("Astromesh semantic memory.")
    episodic: Any = astromesh_only("Astromesh episodic memory.")


class TransferPolicySpec(Strict):
    """Where an agent may transfer besides its sub-agents."""

    to_parent: bool = Field(default=False, description="Allow a transfer back to the parent.")
    to_peers: bool = Field(default=False, description="Allow transfers to sibling agents.")


_Pattern = Annotated[str, Field(min_length=1, pattern=r"\S")]


class PermissionsSpec(Strict):
    """Which of its tools an agent may call (relayrace.Permissions): fnmatch patterns of tool
    names, such as 'read_*'. A denied tool is not offered, and a call to it is refused."""

    allowed_actions: list[_Pattern] | None = Field(default=None, description=(
        "If given, only tools matching one of these patterns."))
    denied_actions: list[_Pattern] = Field(default_factory=list, description=(
        "Never tools matching one of these patterns (they win over allowed_actions)."))


class RetrySpec(Strict):
    """How a chain link is tried again after a failure."""

    max_attempts: int = Field(default=1, ge=1, le=10, description="Tries in all.")
    backoff: Literal["fixed", "exponential"] = Field(default="fixed", description=(
        "fixed: the same wait before each retry; exponential: doubled each time."))
    initial_delay_seconds: float = Field(default=1.0, ge=0, le=300, description=(
        "Seconds before the first retry."))


class ChainLinkSpec(Strict):
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


class ChainSpec(Strict):
    """Astromesh's spec.chain: agents run after this one answers, as delegated children."""

    mode: Literal["sequential", "parallel"] = Field(default="sequential", description=(
        "Run the triggered links one after another, or at once."))
    max_depth: int = Field(default=5, ge=1, le=20, description=(
        "The most chains on any path, nested chains of the links included."))
    on_complete: list[ChainLinkSpec] = Field(min_length=1, description="The links, in order.")
