"""A research coordinator that delegates to specialists with the four meta-tools.

The coordinator never researches itself: it runs a war room (three researchers at once), a
pipeline (research -> write -> review) and a debate, and each comes back as ONE compact tool
result built from the specialists' structured delegation reports.
"""

from __future__ import annotations

import os

from relayrace import Agent, Model, tool
from relayrace.teams.meta_tools import DelegationConfig

_CORPUS = {
    "doc-17": "Global EV sales reached 21.4M units in 2026, 27% of new-car sales (IEA outlook).",
    "doc-22": "Solid-state pilot lines: 3 automakers target small-series production by 2028.",
    "doc-31": "Lithium carbonate spot price fell 38% year on year; 62% of refining in one country.",
    "doc-40": "EU battery regulation requires a digital battery passport from February 2027.",
    "doc-44": "Sodium-ion cells ship in entry-level EVs; energy density 160 Wh/kg vs 250 for NMC.",
}


@tool
async def search_corpus(query: str) -> list[dict[str, str]]:
    """Search the research corpus; returns matching documents with their ids.

    Args:
        query: Keywords to look for.
    """
    words = {w.lower() for w in query.split() if len(w) > 3}
    hits = [{"id": doc, "text": body} for doc, body in _CORPUS.items()
            if words & {w.strip(".,;:()%").lower() for w in body.split()}]
    return hits or [{"id": "none", "text": "no matching documents"}]


def build_team(model: Model | str) -> Agent[None]:
    """The coordinator and its five specialists, every agent on ``model``."""

    def researcher(name: str, focus: str) -> Agent[None]:
        return Agent(name, model=model, tools=[search_corpus],
                     description=f"Researches {focus}.",
                     instructions=f"You research {focus}. Search the corpus before answering "
                                  "and cite document ids.")

    specialists = [
        researcher("market", "EV market size and adoption"),
        researcher("technology", "battery chemistry and manufacturing"),
        researcher("risk", "supply-chain and regulatory risk"),
        Agent("writer", model=model, description="Turns findings into a short brief.",
              instructions="Write a five-sentence brief from the findings you are given."),
        Agent("reviewer", model=model, description="Checks a brief for unsupported claims.",
              instructions="Check every claim of the brief against the cited findings."),
    ]
    return Agent(
        "coordinator", model=model, specialists=specialists,
        delegation=DelegationConfig(max_concurrency=3, child_max_turns=6),
        instructions="You coordinate research on the EV battery market. Use war_room for "
                     "independent questions, agent_pipeline for research -> writing -> review, "
                     "and debate_ensemble for contested forecasts. Do no research yourself.",
    )


def configured_model() -> str | None:
    """A real model if the environment names one."""
    if os.environ.get("RELAYRACE_MODEL"):
        return os.environ["RELAYRACE_MODEL"]
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return "openai:" + os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    return None


def _default_model() -> Model | str:
    from script import scripted_model  # offline: the scripted demo conversation

    return configured_model() or scripted_model()


coordinator = build_team(_default_model())
"""The team for the command line (``relayrace run``, ``relayrace eval``): on a real model if
the environment names one, else on the scripted demo model."""
