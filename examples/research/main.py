"""Run the research team offline (scripted) or on a real model (--model provider:model)."""

from __future__ import annotations

import argparse
import asyncio

from rich.console import Console
from script import scripted_model
from team import build_team, configured_model

from relayrace.cli import print_run
from relayrace.core.usage import UsageLimits
from relayrace.testing import ScriptedModel

REQUEST = ("Brief me on the EV battery market: size, chemistry and supply risk, a reviewed "
           "brief, and whether solid-state passes 5% of EV sales by 2030.")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", help="provider:model instead of the scripted model")
    args = parser.parse_args()
    model = args.model or configured_model() or scripted_model()
    console = Console()
    result = await print_run(build_team(model), REQUEST, console=console,
                             usage_limits=UsageLimits(max_requests=60, max_agent_calls=20))
    console.print(f"\n[bold]{len(result.reports)} structured reports[/] came back; the "
                  "coordinator's context grew by one compact result per meta-tool call.")
    if isinstance(model, ScriptedModel):
        model.assert_complete()


if __name__ == "__main__":
    asyncio.run(main())
