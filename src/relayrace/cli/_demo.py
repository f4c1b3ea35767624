"""``relayrace demo``: the customer-support team that ships in the package, run offline."""

from __future__ import annotations

import asyncio

from ._common import DEFAULT_DB, DbOption, ModelOption, errors
from ._target import resolve_model

__all__ = ["demo"]


def demo(model: ModelOption = None, db: DbOption = DEFAULT_DB) -> None:
    """Run the customer-support team that ships with relayrace, offline by default.

    Two customer messages in one stored session: handoffs in a parallel batch, tool calls, a
    transfer back and a nested handoff. It runs on its scripted model unless --model (or
    OPENAI_API_KEY / ANTHROPIC_API_KEY) names a real one.
    """
    from ..examples.support.demo import run_demo

    with errors():
        asyncio.run(run_demo(resolve_model(model) if model else None, db=db))
