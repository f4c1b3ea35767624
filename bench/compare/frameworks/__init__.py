"""One module per framework, all with the same surface (see ``FRAMEWORKS`` and the README).

A framework module defines:

``NAME``            the label used in the table and on the command line
``DISTS``           distributions whose installed versions are reported
``NOTES``           dict of remarks (tracing, handoff, history, sqlite) copied into the JSON
``setup()``         called once per worker process before anything runs (tracing off/on, ...)
``build_tool_loop(script: ToolLoop)``           -> async () -> (final_output, last_agent|None)
``build_handoff_chain(script: HandoffChain)``   -> async () -> (final_output, last_agent|None)
``build_fanout(script: Fanout)``                -> async () -> (final_output, last_agent|None)
``build_chat(script: Chat, store, db_path)``    -> ChatApp, with ``await app.session(id)`` giving
                                                    an object with ``await send(text) -> str``
                                                    (store is "memory", "sqlite",
                                                    "sqlite_full" or "postgres"; raise
                                                    ``NotSupported`` when the framework has none)

All ``build_*`` are ``async`` and do the construction work (agents, tools, graphs) outside the
timed region. The fake model of each module hands ``script.model(agent, hist_len, tool_tail,
last_user)`` an O(1) view of its request and converts the returned ``common.Text``, ``Calls`` or
``Handoff`` into its framework's native model response. Adding a framework is adding one module
here and one line to ``FRAMEWORKS``.
"""

from __future__ import annotations

#: table order; relayrace first, it is the reference of the ratios
FRAMEWORKS: dict[str, str] = {
    "relayrace": "frameworks.relayrace_impl",
    "openai-agents": "frameworks.openai_agents_impl",
    "langgraph": "frameworks.langgraph_impl",
    "pydantic-ai": "frameworks.pydantic_ai_impl",
    "google-adk": "frameworks.adk_impl",
}


class NotSupported(Exception):
    """The framework has no native facility for this scenario variant (shown as n/a)."""
