"""Scripted models for the research team's eval cases (examples/research/evals.yaml).

    relayrace eval run examples/research/team.py:coordinator examples/research/evals.yaml \\
        --model examples/research/eval_models.py:scripted
"""

from __future__ import annotations

from script import scripted_model

from relayrace.evals import Case
from relayrace.testing import ScriptedModel, text, tool_call


def _war_room() -> ScriptedModel:
    report = lambda summary, sources, confidence: tool_call("submit_report", {  # noqa: E731
        "summary": summary, "key_findings": [summary], "sources": sources,
        "confidence": confidence, "confidence_reason": "corpus figures", "gaps": []})
    return ScriptedModel(name="scripted-research", by_agent={
        "coordinator": [
            tool_call("war_room", {"agents": [
                {"type": "market", "task": "How large is the EV market in 2026?"},
                {"type": "risk", "task": "What threatens battery supply?"}]}),
            text("EV sales reached 21.4M units in 2026; the main supply risk is refining "
                 "concentration (62% in one country).")],
        "market": [tool_call("search_corpus", {"query": "EV sales share"}),
                   report("EV sales hit 21.4M in 2026, 27% of new cars.", ["doc-17"], "high")],
        "risk": [tool_call("search_corpus", {"query": "lithium refining price"}),
                 report("62% of lithium refining sits in one country.", ["doc-31"], "high")],
    })


def scripted(case: Case) -> ScriptedModel:
    """A model that plays ``case``'s conversation."""
    return _war_room() if case.id.startswith("market-and-risk") else scripted_model()
