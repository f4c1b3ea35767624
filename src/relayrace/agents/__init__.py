"""Declarations of one agent: `Agent`, tools, handoffs, delegation, guardrails,
approvals, structured output, compression and memory.
Imports `core` and the ports (`models`, `sessions`, `tracing`) only; inside, the agent sits
above its parts, which name it through `AgentLike` (``_spec``): see pyproject's second contract.
"""
