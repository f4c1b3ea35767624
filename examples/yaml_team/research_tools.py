"""The researcher's tool (``type: python``, ``function: research_tools:search_notes``).

A module that is not importable as is gets looked up next to the YAML file that names it.
"""

from __future__ import annotations

NOTES = {
    "handoff": "A handoff moves the live conversation to another agent (note 1).",
    "delegation": "Delegation runs a child agent on a bounded task; it reports back (note 2).",
    "swarm": "In a swarm, peers hand the conversation to one another (note 3).",
}


def search_notes(query: str) -> list[str]:
    """Search the team's notes.

    Args:
        query: Words to look for.
    """
    words = query.lower().split()
    return [text for key, text in NOTES.items() if any(w in key or w in text for w in words)]
