"""A run's budget: every usage count and every limit check of a run tree, in one place.

One `Budget` is shared by a run and every child it delegates to. The engine asks it before
work starts (a model request, a batch of tool calls, a child run) and tells it what the work
used; it keeps the totals, the breakdown by agent path, and the token gate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .exceptions import UsageLimitExceeded
from .usage import RunUsage, TokenGate, Usage, UsageLimits

if TYPE_CHECKING:
    from .models.interface import ModelRequest

__all__ = ["Budget"]

Estimate = tuple[int, int] | None


class Budget:
    """Usage and limits of one run tree (``local`` is a delegated loop's own tally)."""

    __slots__ = ("_agent_calls", "_gate", "limits", "usage")

    def __init__(self, limits: UsageLimits | None = None) -> None:
        self.usage = RunUsage()
        """What the run used: the total and by agent path, children included."""
        self.limits = limits
        """The run's budgets, if any."""
        self._gate = TokenGate(limits) if limits is not None and limits.has_token_budget else None
        self._agent_calls = 0

    async def open_request(self, request: ModelRequest, path: str,
                           local: Usage | None) -> Estimate:
        """Admit one model request against the budgets and count it, or raise.

        With token budgets, waits until the request fits beside those in flight; returns the
        estimate to hand back to ``close_request``.
        """
        total = self.usage.total
        estimate: Estimate = None
        if self._gate is not None:
            estimate = await self._gate.admit(request, total)
        elif self.limits is not None:
            self.limits.reserve_request(total)
        total.requests += 1
        per_agent = self.usage.per_agent
        (per_agent.get(path) or self.usage.for_agent(path)).requests += 1
        if local is not None:
            local.requests += 1
        return estimate

    def close_request(self, estimate: Estimate, path: str, local: Usage | None,
                      used: Usage | None) -> None:
        """Count what a request admitted by ``open_request`` used (``None``: it failed)."""
        i, o = (used.input_tokens, used.output_tokens) if used is not None else (0, 0)
        if estimate is not None and self._gate is not None:
            self._gate.leave(estimate, o)
        if used is None:
            return
        total = self.usage.total
        total.input_tokens += i
        total.output_tokens += o
        agent = self.usage.per_agent[path]
        agent.input_tokens += i
        agent.output_tokens += o
        if local is not None:
            local.input_tokens += i
            local.output_tokens += o

    def check_tokens(self) -> None:
        """Raise if a token budget is used up."""
        if self.limits is not None:
            self.limits.check_tokens(self.usage.total)

    def admit_tools(self, wanted: int, path: str,
                    local: Usage | None) -> tuple[int, UsageLimitExceeded | None]:
        """Reserve ``max_tool_calls`` for a batch before any call runs: (how many may run, the
        error to raise once they are done, if the rest must not)."""
        total = self.usage.total
        limits, over, n = self.limits, None, wanted
        if limits is not None and limits.max_tool_calls is not None:
            room = max(0, limits.max_tool_calls - total.tool_calls)
            if wanted > room:
                over = UsageLimitExceeded("max_tool_calls", total.tool_calls + wanted,
                                          limits.max_tool_calls)
                n = room
        total.tool_calls += n
        self.usage.for_agent(path).tool_calls += n
        if local is not None:
            local.tool_calls += n
        return n, over

    def refuse_depth(self, depth: int) -> UsageLimitExceeded | None:
        """Why a child at ``depth`` may not start (``max_depth``), or ``None``."""
        limits = self.limits
        if limits is not None and limits.max_depth is not None and depth > limits.max_depth:
            return UsageLimitExceeded("max_depth", depth, limits.max_depth)
        return None

    def start_child(self) -> UsageLimitExceeded | None:
        """Count a new child run, or say why it may not start (``max_agent_calls``)."""
        limits = self.limits
        if (limits is not None and limits.max_agent_calls is not None
                and self._agent_calls + 1 > limits.max_agent_calls):
            return UsageLimitExceeded("max_agent_calls", self._agent_calls + 1,
                                      limits.max_agent_calls)
        self._agent_calls += 1
        return None
