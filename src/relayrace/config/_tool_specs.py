"""The tools of an agent's spec (``spec.tools``), one model per ``type``: another agent, a
Python function, an MCP server, the spawn_agent meta-tool, a remote A2A agent, a person, or an
Astromesh kind relayrace skips. `ToolSpec` is their union, told apart by ``type``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._agent_sections import PrimaryModelSpec
from ._format import IGNORED_MARK, IGNORED_NOTE, Strict, astromesh_only

__all__ = ["A2AToolSpec", "AgentToolSpec", "ExternalToolSpec", "HumanToolSpec", "MCPToolSpec",
           "PythonToolSpec", "RateLimitSpec", "SpawnAgentToolSpec", "ToolSpec"]


class RateLimitSpec(Strict):
    """A sliding-window rate limit of one tool."""

    max_calls: int = Field(ge=1, description="Calls allowed within the window.")
    window_seconds: float = Field(gt=0, description="The window's length in seconds.")


class AgentToolSpec(Strict):
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


class PythonToolSpec(Strict):
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


class MCPToolSpec(Strict):
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


class SpawnAgentToolSpec(Strict):
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


class A2AToolSpec(Strict):
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


class HumanToolSpec(Strict):
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
        f"builtin or client. {IGNORED_NOTE}"), json_schema_extra={IGNORED_MARK: True})
    name: str | None = Field(default=None, description="The tool's name.")


ToolSpec = Annotated[AgentToolSpec | PythonToolSpec | MCPToolSpec | SpawnAgentToolSpec
                     | A2AToolSpec | HumanToolSpec | ExternalToolSpec,
                     Field(discriminator="type")]
