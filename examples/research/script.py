"""The offline script: what each agent of the research team says, per agent."""

from __future__ import annotations

from relayrace.testing import ScriptedModel, Turn, text, tool_call

QUESTION = "Will solid-state batteries exceed 5% of EV sales by 2030?"


def _report(summary: str, findings: list[str], sources: list[str], confidence: str,
            gaps: list[str] | None = None) -> Turn:
    """A specialist finishing its task: the structured report, as a submit_report call."""
    level, _, reason = confidence.partition(" — ")
    return tool_call("submit_report", {
        "summary": summary, "key_findings": findings, "sources": sources, "confidence": level,
        "confidence_reason": reason, "gaps": gaps or []})


def scripted_model() -> ScriptedModel:
    """Every agent's turns, in the order that agent will be asked."""
    search = lambda q: tool_call("search_corpus", {"query": q})  # noqa: E731
    return ScriptedModel(name="scripted-research", by_agent={
        "coordinator": [
            tool_call("war_room", {"agents": [
                {"type": "market", "task": "How large is the EV market in 2026?"},
                {"type": "technology", "task": "Where does solid-state production stand?"},
                {"type": "risk", "task": "What threatens battery supply?"}]}),
            tool_call("agent_pipeline", {"stages": [
                {"type": "technology", "task": "Summarise battery chemistry trends."},
                {"type": "writer", "task": "Write the brief."},
                {"type": "reviewer", "task": "Review the brief."}]}),
            tool_call("debate_ensemble", {"question": QUESTION,
                                          "participants": ["market", "technology", "risk"],
                                          "rounds": 3}),
            text("EV sales reached 21.4M units in 2026 (27% share). Solid-state is at pilot "
                 "scale, with small series from 2028; the specialists agree it will NOT pass 5% "
                 "of EV sales by 2030. Watch refining concentration and the 2027 EU battery "
                 "passport."),
        ],
        "market": [
            search("EV sales share"),
            _report("EV sales hit 21.4M in 2026, 27% of new cars.",
                    ["21.4M EVs sold in 2026", "27% of new-car sales"], ["doc-17"], "high — IEA"),
            text("Pilot lines alone cannot scale that fast. FINAL ANSWER: no"),
            text("I keep my view. FINAL ANSWER: No."),
        ],
        "technology": [
            search("Solid-state pilot production"),
            _report("Solid-state is at pilot scale; small series from 2028.",
                    ["3 automakers target small series by 2028"], ["doc-22"],
                    "medium — announcements, not shipments"),
            search("sodium-ion energy density"),
            _report("Chemistry is diversifying: NMC leads, sodium-ion enters the low end, "
                    "solid-state is pre-commercial.",
                    ["Sodium-ion enters entry-level EVs at 160 Wh/kg",
                     "NMC leads at 250 Wh/kg"], [], "medium — few production figures",
                    gaps=["production volumes by chemistry"]),
            text("Announcements suggest fast growth. FINAL ANSWER: yes"),
            text("The others are right that 2028 small series cannot reach 5% by 2030. "
                 "FINAL ANSWER: no"),
        ],
        "risk": [
            search("lithium refining price"),
            _report("Supply risk is refining concentration, not raw lithium.",
                    ["62% of refining in one country", "lithium carbonate -38% y/y",
                     "the EU battery passport arrives in 2027"], [], "high — price and "
                    "capacity data"),
            text("FINAL ANSWER: no"),
            text("FINAL ANSWER: no"),
        ],
        "writer": [_report("Draft brief: EV growth is strong; chemistry diversifies.",
                           ["NMC leads", "sodium-ion enters the low end"], ["doc-44"],
                           "medium — based on one stage of research")],
        "reviewer": [_report("The brief is supported by its sources; no changes needed.",
                             ["all claims trace to doc-44"], ["doc-44"], "high — checked")],
    })
