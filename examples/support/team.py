"""The customer-support team, as `relayrace run`, `relayrace serve` and `relayrace eval` take it
from a checkout (``examples/support/team.py:triage``).

Its code ships in the package, so an installed relayrace runs it too (``relayrace demo``):
read it in src/relayrace/examples/support/team.py. Each load of this file builds the team
anew, on the environment's model or the scripted demo.
"""

from __future__ import annotations

from relayrace.examples.support.team import build_team, configured_model, default_model

__all__ = ["build_team", "configured_model", "triage"]

triage = build_team(default_model())
