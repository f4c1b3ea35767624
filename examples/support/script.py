"""The offline demo's scripted model and conversation; they ship in the package (read them in
src/relayrace/examples/support/script.py)."""

from __future__ import annotations

from relayrace.examples.support.script import CONVERSATION, SPENT, scripted_model, turns

__all__ = ["CONVERSATION", "SPENT", "scripted_model", "turns"]
