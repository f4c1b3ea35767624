"""A run's budget: every usage count and every limit check of a run tree, in one place.

One `Budget` is shared by a run and every child it delegates to. The engine asks it before
work starts (a model request, a batch of tool calls, a child run) and tells it what the work
used; it keeps the totals, the breakdown by agent path, and the token gate.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..core.exceptions import UsageLimitExceeded
from ..core.usage import RunUsage, Usage, UsageLimits, estimate_tokens

if TYPE_CHECKING:
    from ..models.interface import ModelRequest, ModelResponse

__all__ = ["Budget", "TokenGate"]

Estimate = tuple[int, int] | None


class Budget:
    """Usage and limits of one run tree (``local`` is a delegated loop's own tally)."""

    __slots__ = ("_agent_calls", "gate", "limits", "usage")

    def __init__(self, limits: UsageLimits | None = None) -> None:
        self.usage = RunUsage()
        """What the run used: the total and by agent path, children included."""
        self.limits = limits
        """The run's budgets, if any."""
        self.gate = TokenGate(limits) if limits is not None and limits.has_token_budget else None
        """With token budgets: where concurrent requests wait until they fit."""
        self._agent_calls = 0

    def open_request(self, path: str, local: Usage | None) -> None:
        """Count one model request of ``path``, or raise if it would pass a budget.

        With token budgets, the request waits for the token ``gate`` first (``admit``: it
        reserves the request, and its estimate goes back to ``close_request``).
        """
        total = self.usage.total
        if self.gate is None and self.limits is not None:
            self.limits.reserve_request(total)
        total.requests += 1
        per_agent = self.usage.per_agent
        (per_agent.get(path) or self.usage.for_agent(path)).requests += 1
        if local is not None:
            local.requests += 1

    def close_request(self, estimate: Estimate, path: str, local: Usage | None,
                      response: ModelResponse | None, model: str) -> None:
        """Count what a request counted by ``open_request`` used (``None``: it failed), and
        which model served it (``model``, the name of the model asked, unless the response
        says which of its models did)."""
        if estimate is not None and self.gate is not None:
            self.gate.leave(estimate, 0 if response is None else response.usage.output_tokens)
        if response is None:
            return
        used = response.usage
        usage = self.usage
        served = response.served
        if not served:  # the usual request: one model answered
            usage.count_request(path, model, used, local)
        else:  # its tokens (the request was counted when admitted), then each model's share
            usage.total.add_tokens(used)
            usage.per_agent[path].add_tokens(used)
            if local is not None:
                local.add_tokens(used)
            usage.count_served(path, served)
        remote = response.remote
        if remote is not None:  # a remote agent's run behind it: its other requests, tool calls
            added = Usage(requests=max(0, remote.requests - 1), tool_calls=remote.tool_calls)
            usage.total.add(added)
            usage.per_agent[path].add(added)
            if local is not None:
                local.add(added)

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


class TokenGate:
    """Keeps concurrent model requests from jointly passing a run's token budgets.

    Token counts arrive only with a response, so a request is admitted against estimates: it
    starts at once when no other request is in flight (as in a sequential run); otherwise only
    if the tokens used so far, plus the estimates of the requests in flight and its own, fit
    every budget. If they do not, it waits for a request in flight to finish and checks again
    with the real counts. Estimates: input, a quarter of the request's characters; output, the
    request's ``max_tokens`` setting, else the largest single response of the run so far.
    """

    __slots__ = ("_freed", "_largest_output", "_limits", "_reserved_in", "_reserved_out",
                 "in_flight")

    def __init__(self, limits: UsageLimits) -> None:
        self._limits = limits
        self.in_flight = 0
        """Requests admitted and not yet finished."""
        self._reserved_in = 0
        self._reserved_out = 0
        self._largest_output = 1
        self._freed: asyncio.Future[None] | None = None  # resolved when a request finishes

    async def admit(self, request: ModelRequest, total: Usage) -> tuple[int, int]:
        """Wait until ``request`` fits the budgets beside the requests in flight, then count
        it (``UsageLimits.reserve_request``); raise if a budget is used up.

        Returns the request's (input, output) estimate, to hand back to ``leave``.
        """
        chars = len(request.instructions)
        for m in request.messages:
            chars += len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
        output = request.settings.max_tokens if request.settings is not None else None
        estimate = estimate_tokens(chars), output or self._largest_output
        limits = self._limits
        while self.in_flight:
            limits.check_tokens(total)
            if self._fits(total, estimate):
                break
            if self._freed is None:
                self._freed = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._freed)  # a cancelled waiter leaves the others waiting
        limits.reserve_request(total)  # no await since the check: concurrent ones see it
        self.in_flight += 1
        self._reserved_in += estimate[0]
        self._reserved_out += estimate[1]
        return estimate

    def leave(self, estimate: tuple[int, int], output_tokens: int) -> None:
        """A request admitted with ``estimate`` finished (or failed); wake the waiters."""
        self.in_flight -= 1
        self._reserved_in -= estimate[0]
        self._reserved_out -= estimate[1]
        self._largest_output = max(self._largest_output, output_tokens)
        freed, self._freed = self._freed, None
        if freed is not None:
            freed.set_result(None)

    def _fits(self, total: Usage, estimate: tuple[int, int]) -> bool:
        limits = self._limits
        if limits.max_input_tokens is not None and (
                total.input_tokens + self._reserved_in + estimate[0] > limits.max_input_tokens):
            return False
        return limits.max_output_tokens is None or (
            total.output_tokens + self._reserved_out + estimate[1] <= limits.max_output_tokens)
