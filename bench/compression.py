"""Tokens per request on a long conversation, with and without an agent's compression.

    .venv/bin/python bench/compression.py [--turns 200] [--budget 8000]

A 200-turn conversation (200 runs on one session): each turn the user asks a question (about
300 characters), the agent calls a search tool (compactable, about 6,000 characters back) or a
note tool (protected, about 400), then answers (about 300). The scripted model records every
request; the figures are estimated tokens per request (characters / 4, as relayrace counts),
and the summary requests compression made. Both runs are deterministic: the same figures on
every machine.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from relayrace import Agent, Compression, Runner, read_result, tool
from relayrace.core.usage import estimate_tokens
from relayrace.models import ModelRequest
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, Turn, text, tool_call


@tool(compactable=True)
def search(query: str) -> str:
    """Search the knowledge base."""
    return "\n".join(f"{query}: result {i} " + "x" * 100 for i in range(50))


@tool(protected=True)
def note(text: str) -> str:
    """Keep a note."""
    return f"noted: {text} " + "n" * 380


def request_tokens(request: ModelRequest) -> int:
    chars = len(request.instructions) + sum(
        len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
        for m in request.messages)
    return estimate_tokens(chars)


def play(request: ModelRequest) -> Turn:
    """The agent's side: a tool call for a new question, then an answer; summaries on ask."""
    last = request.messages[-1]
    if not request.tools:  # a summary request
        return text("Summary: the user asked about topics; answers were given. " + "s" * 600)
    if last.role == "user":
        turn = last.content.split()[1].rstrip(":")
        if int(turn) % 5 == 4:
            return tool_call("note", {"text": f"turn {turn}"}, id=f"n{turn}")
        return tool_call("search", {"query": f"topic {turn}"}, id=f"s{turn}")
    return text("Here is what I found: " + "a" * 280)


async def conversation(turns: int, budget: int | None) -> tuple[list[int], int]:
    """Tokens of each agent request, and how many summary requests were made."""
    model = FunctionModel(play)
    agent = Agent("assistant", instructions="Help the user.", model=model,
                  tools=[search, note, read_result],
                  compression=Compression(max_tokens=budget) if budget else None)
    session = MemorySession()
    for i in range(turns):
        await Runner.run(agent, f"question {i}: " + "q" * 290, session=session)
    sizes = [request_tokens(r._request) for r in model.requests if r.tools]
    summaries = sum(1 for r in model.requests if not r.tools)
    return sizes, summaries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--budget", type=int, default=8000)
    args = parser.parse_args()
    print(f"{args.turns}-turn conversation, {2 * args.turns} agent requests; estimated tokens "
          "per request")
    print("| compression | mean | median | max | last | summary requests |")
    print("|---|---|---|---|---|---|")
    for label, budget in (("none", None), (f"max_tokens={args.budget:,}", args.budget)):
        sizes, summaries = asyncio.run(conversation(args.turns, budget))
        print(f"| {label} | {statistics.mean(sizes):,.0f} | {statistics.median(sizes):,.0f} | "
              f"{max(sizes):,} | {sizes[-1]:,} | {summaries} |")


if __name__ == "__main__":
    main()
