"""Run the hierarchical team offline (scripted) or on a real model (--model provider:model)."""

from __future__ import annotations

import argparse
import asyncio

from rich.console import Console
from team import build_team, configured_model

from relayrace.cli import print_run
from relayrace.testing import ScriptedModel, text, tool_call

REQUEST = "Brief on distributed consensus: research, then write a one-line summary."


def scripted_model() -> ScriptedModel:
    """The offline script, one turn per agent turn."""
    return ScriptedModel([
        text("Brief: explain distributed consensus (algorithms, trade-offs, uses) in one "
             "line, based on researched facts."),
        # Both transfer tools in one turn: the first emitted (researcher) wins.
        [tool_call("transfer_to_researcher", {"reason": "gather the facts first"}),
         tool_call("transfer_to_writer", {"reason": "write the summary"})],
        text("- Algorithms: Paxos, Raft, PBFT\n- Trade-offs: CAP, FLP impossibility\n"
             "- Uses: etcd, ZooKeeper, blockchains"),
        tool_call("transfer_to_writer", {"reason": "facts are in; write the one-liner"}),
        text("Distributed consensus (Paxos, Raft, PBFT) lets nodes agree on shared state "
             "despite faults, trading consistency against availability in etcd, ZooKeeper "
             "and blockchains."),
    ], name="scripted-hierarchical")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", help="provider:model instead of the scripted model")
    args = parser.parse_args()
    model = args.model or configured_model() or scripted_model()
    console = Console()
    result = await print_run(build_team(model), REQUEST, console=console)
    console.print(f"\n[bold]closed:[/] reason={result.reason!r} by {result.last_agent.name}")
    if isinstance(model, ScriptedModel):
        model.assert_complete()


if __name__ == "__main__":
    asyncio.run(main())
