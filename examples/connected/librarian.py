"""A second relayrace team, served over MCP (streamable HTTP) by ``main.py``:

    relayrace mcp serve librarian.py:librarian --port 8765

Any MCP client can call it; here the assistant in ``main.py`` does. Its model is scripted so
the example runs offline: it answers every task with a structured delegation report.
"""

from __future__ import annotations

from relayrace import Agent
from relayrace.models import ModelRequest
from relayrace.testing import FunctionModel, Turn, text


def answer(request: ModelRequest) -> Turn:
    task = request.messages[-1].content
    return text(f"Checked the catalogue for: {task}\n<handoff>\nSUMMARY: Two books cover "
                "agent handoffs.\nKEY FINDINGS:\n- 'Relay Patterns' (2025), chapter 4\n"
                "- 'Agents at Work' (2026), chapter 7\nCONFIDENCE: high\n</handoff>")


librarian = Agent("librarian", instructions="Find books on the topic you are given.",
                  description="Finds books on a topic in the library catalogue.",
                  model=FunctionModel(answer))
