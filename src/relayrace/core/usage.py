"""Token and request accounting, and the budgets (`UsageLimits`) shared by a delegation tree."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .exceptions import UsageLimitExceeded, UserError

__all__ = ["CHARS_PER_TOKEN", "RunUsage", "Usage", "UsageLimits", "estimate_tokens"]

CHARS_PER_TOKEN = 4
"""The characters counted as one token where relayrace must estimate before a provider counts
(the token gate, result limits, compression, memory): about right for English text and JSON,
and the same rule everywhere."""


def estimate_tokens(chars: int) -> int:
    """The tokens ``chars`` characters are estimated to take (at least 1)."""
    return chars // CHARS_PER_TOKEN + 1


@dataclass(slots=True)
class Usage:
    """Requests, tokens and tool calls used by one agent or a whole run."""

    requests: int = 0
    """Model requests made."""
    input_tokens: int = 0
    """Tokens sent to the model, as the provider counted them."""
    output_tokens: int = 0
    """Tokens the model produced."""
    tool_calls: int = 0
    """Tool calls executed (refused calls and handoffs are not counted)."""
    cache_read_tokens: int = 0
    """Of ``input_tokens``, those read from the provider's prompt cache (OpenAI's
    ``cached_tokens``, Anthropic's ``cache_read_input_tokens``), when it reports them."""
    cache_write_tokens: int = 0
    """Of ``input_tokens``, those written to the provider's prompt cache (Anthropic's
    ``cache_creation_input_tokens``), when it reports them."""
    reasoning_tokens: int = 0
    """Of ``output_tokens``, those spent on hidden reasoning (OpenAI's ``reasoning_tokens``),
    when the provider reports them."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        """Add ``other`` into this usage, in place."""
        self.requests += other.requests
        self.tool_calls += other.tool_calls
        self.add_tokens(other)

    def add_tokens(self, other: Usage) -> None:
        """Add ``other``'s tokens of every kind (not its requests or tool calls), in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        if other.cache_read_tokens or other.cache_write_tokens or other.reasoning_tokens:
            self.cache_read_tokens += other.cache_read_tokens
            self.cache_write_tokens += other.cache_write_tokens
            self.reasoning_tokens += other.reasoning_tokens


@dataclass(slots=True)
class RunUsage:
    """The usage of a run: the total and a breakdown by agent path and by model (children
    included)."""

    total: Usage = field(default_factory=Usage)
    """Everything the run used, delegated children included."""
    per_agent: dict[str, Usage] = field(default_factory=dict)
    """Usage by agent path, e.g. ``triage``, ``coordinator/researcher``."""
    per_model: dict[str, Usage] = field(default_factory=dict)
    """Requests and tokens by the model that served them, by model name: for a
    ``FallbackModel``, the model in it that answered (and one whose refusal it moved on from).
    Only requests that got a response count, so with a fallback the requests here may differ
    from ``total.requests``, which counts what the agents asked for."""
    per_agent_model: dict[str, dict[str, Usage]] = field(default_factory=dict)
    """``per_model`` for each agent path: ``per_agent_model["triage"]["gpt-4o-mini"]``."""

    def for_agent(self, path: str) -> Usage:
        """The usage entry of one agent path, created on first use."""
        usage = self.per_agent.get(path)
        if usage is None:
            usage = self.per_agent[path] = Usage()
        return usage

    def count_request(self, path: str, model: str, used: Usage, local: Usage | None = None
                      ) -> None:
        """Count one request of ``path`` that ``model`` served, with ``used``'s tokens: the
        request and its tokens in ``model``'s entries (overall and ``path``'s), its tokens in
        the total, in ``path``'s entry and in ``local`` (a delegated loop's own tally), which
        counted the request when it was admitted. (One frame for every table: it runs at each
        model turn.)"""
        per_model = self.per_model
        by_model = self.per_agent_model.get(path)
        if by_model is None:
            by_model = self.per_agent_model[path] = {}
        served = per_model.get(model)
        if served is None:
            served = per_model[model] = Usage()
        mine = by_model.get(model)
        if mine is None:
            mine = by_model[model] = Usage()
        served.requests += 1
        mine.requests += 1
        agent = self.per_agent.get(path) or self.for_agent(path)
        total = self.total
        i, o = used.input_tokens, used.output_tokens
        total.input_tokens += i
        total.output_tokens += o
        agent.input_tokens += i
        agent.output_tokens += o
        served.input_tokens += i
        served.output_tokens += o
        mine.input_tokens += i
        mine.output_tokens += o
        if local is not None:
            local.input_tokens += i
            local.output_tokens += o
        if used.cache_read_tokens or used.cache_write_tokens or used.reasoning_tokens:
            for entry in (total, agent, served, mine) if local is None else \
                    (total, agent, served, mine, local):
                entry.cache_read_tokens += used.cache_read_tokens
                entry.cache_write_tokens += used.cache_write_tokens
                entry.reasoning_tokens += used.reasoning_tokens

    def count_served(self, path: str, served: Mapping[str, Usage]) -> None:
        """Count what each model of ``served`` (by name) used for a request of ``path``."""
        by_model = self.per_agent_model.get(path)
        if by_model is None:
            by_model = self.per_agent_model[path] = {}
        for name, used in served.items():
            for table in (self.per_model, by_model):
                entry = table.get(name)
                if entry is None:
                    entry = table[name] = Usage()
                entry.add(used)


@dataclass(slots=True, kw_only=True)
class UsageLimits:
    """Budgets for a whole run, children included; ``None`` means unlimited.

    Counts (requests, tool calls, agent calls) are reserved before the work starts, so
    concurrent children can never overshoot them. Token budgets are checked before each
    request and after each response; concurrent requests pass a token gate, so
    a parallel fan-out stops where the same requests made one after another would.
    """

    max_requests: int | None = None
    """Model requests across the whole delegation tree."""
    max_input_tokens: int | None = None
    """Input tokens across the whole tree."""
    max_output_tokens: int | None = None
    """Output tokens across the whole tree."""
    max_tool_calls: int | None = None
    """Tool calls executed across the whole tree."""
    max_agent_calls: int | None = None
    """Delegated child runs (agent tools and meta-tool children)."""
    max_depth: int | None = None
    """How deep delegation may nest: 1 lets the top agent delegate, but not its children."""

    def __post_init__(self) -> None:
        for name in ("max_requests", "max_input_tokens", "max_output_tokens", "max_tool_calls",
                     "max_agent_calls", "max_depth"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise UserError(f"UsageLimits({name}={value!r}): use a whole number >= 0, or "
                                "None for no limit.")

    @property
    def has_token_budget(self) -> bool:
        """Whether a token budget is set."""
        return self.max_input_tokens is not None or self.max_output_tokens is not None

    def reserve_request(self, total: Usage) -> None:
        """Count one more request, or raise if it would pass a budget."""
        if self.max_requests is not None and total.requests + 1 > self.max_requests:
            raise UsageLimitExceeded("max_requests", total.requests + 1, self.max_requests)
        self.check_tokens(total)

    def check_tokens(self, total: Usage) -> None:
        """Raise if the token budgets are already used up."""
        if self.max_input_tokens is not None and total.input_tokens > self.max_input_tokens:
            raise UsageLimitExceeded("max_input_tokens", total.input_tokens, self.max_input_tokens)
        if self.max_output_tokens is not None and total.output_tokens > self.max_output_tokens:
            raise UsageLimitExceeded(
                "max_output_tokens", total.output_tokens, self.max_output_tokens
            )
