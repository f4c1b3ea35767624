"""The delegation report as a tool the child calls to finish (``submit_report``), its text
fallback, and a measurement that the structured path loses nothing the text path kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provider_helpers import FakeServer, replay
from relayrace import Agent, Runner, tool
from relayrace.agents.delegation import submit_report
from relayrace.core.events import RunFinishedEvent
from relayrace.core.reports import DelegationReport, parse_report
from relayrace.models.anthropic import AnthropicModel
from relayrace.models.interface import Model
from relayrace.models.openai import OpenAIChatModel
from relayrace.sessions import SQLiteSession
from relayrace.testing import ScriptedModel, text, tool_call

PAYLOADS = Path(__file__).parent / "payloads"
FIELDS = ("summary", "key_findings", "sources", "confidence", "confidence_reason", "gaps")


@tool
def lookup(company: str) -> str:
    """Look a company up."""
    return f"{company}: revenue 4.2B"


def _lead(child_model: Model, lead_model: ScriptedModel) -> Agent[Any]:
    researcher = Agent("researcher", instructions="Research.", model=child_model,
                       tools=[lookup])
    return Agent("lead", instructions="Lead.", model=lead_model, tools=[researcher.as_tool()])


async def test_the_child_finishes_by_calling_submit_report(tmp_path: Path) -> None:
    child = ScriptedModel([
        tool_call("lookup", {"company": "Acme"}),
        tool_call("submit_report", {
            "summary": "Acme made 4.2B.", "key_findings": ["Cloud grew 31%; hardware fell"],
            "sources": ["annual report"], "confidence": "high",
            "confidence_reason": "audited figures", "gaps": []}),
    ])
    lead = ScriptedModel([tool_call("researcher", {"query": "Acme revenue?"}), text("4.2B.")])
    session = SQLiteSession("s", tmp_path / "s.db")
    result = await Runner.run(_lead(child, lead), "How did Acme do?", session=session)
    (report,) = result.reports
    assert report.summary == "Acme made 4.2B."
    assert report.key_findings == ["Cloud grew 31%; hardware fell"]   # not split at ";"
    # What the child cited, then the tools it really used (never submit_report itself).
    assert report.sources == ["annual report", 'lookup({"company": "Acme"})']
    assert (report.confidence, report.confidence_reason) == ("high", "audited figures")
    # Calling it ended the child's run: no further request was made.
    child.assert_complete()
    assert len(child.requests) == 2
    # The parent's model got the compact rendering, never the JSON or the transcript.
    told = lead.requests[1].messages[-1].content
    assert told.startswith("SUMMARY: Acme made 4.2B.") and '"summary"' not in told
    # A resume reads the same report back from the child's stored final answer.
    (child_info,) = await session.children()
    finished = [e for e in await session.open_child(child_info).get_events()
                if isinstance(e, RunFinishedEvent)]
    again = parse_report(finished[-1].output)
    again.merge_sources(['lookup({"company": "Acme"})'])
    assert [getattr(again, f) for f in FIELDS] == [getattr(report, f) for f in FIELDS]


async def test_invalid_report_arguments_are_told_to_the_child_which_fixes_them() -> None:
    child = ScriptedModel([
        tool_call("submit_report", {"summary": "x", "confidence": "very"}),
        tool_call("submit_report", {"summary": "Fixed.", "confidence": "low",
                                    "confidence_reason": "one source"}),
    ])
    lead = ScriptedModel([tool_call("researcher", {"query": "q"}), text("ok")])
    result = await Runner.run(_lead(child, lead), "go")
    told = child.requests[1].messages[-1]
    assert told.role == "tool" and "Invalid arguments for submit_report" in told.content
    assert "confidence" in told.content
    assert result.reports[0].summary == "Fixed." and result.reports[0].confidence == "low"


async def test_a_child_answering_in_text_is_still_read_tolerantly() -> None:
    child = ScriptedModel([text("Acme is fine.\n\nSUMMARY: revenue up\nCONFIDENCE: medium - "
                                "one source\n")])
    lead = ScriptedModel([tool_call("researcher", {"query": "q"}), text("ok")])
    result = await Runner.run(_lead(child, lead), "go")
    report = result.reports[0]
    assert report.summary.endswith("revenue up") and report.confidence == "medium"


def test_submit_report_offers_typed_fields() -> None:
    schema = submit_report.parameters
    assert schema["properties"]["confidence"]["enum"] == ["high", "medium", "low", "unknown"]
    assert schema["required"] == ["summary", "confidence", "confidence_reason"]
    for name in ("key_findings", "sources", "gaps"):
        assert name in schema["properties"]


# ---------------------------------------------------------------- the measurement: no loss


def _openai(payload: str, *, tools: bool) -> Model:
    server = FakeServer(replay(PAYLOADS / "openai" / payload))
    client = openai.AsyncOpenAI(api_key="k", base_url="https://openai.test/v1", max_retries=0,
                                http_client=server.http_client())
    model = OpenAIChatModel("gpt-4o", client=client)
    model.supports_tools = tools
    return model


def _anthropic(payload: str, *, tools: bool) -> Model:
    server = FakeServer(replay(PAYLOADS / "anthropic" / payload))
    client = anthropic.AsyncAnthropic(api_key="k", base_url="https://anthropic.test",
                                      max_retries=0, http_client=server.http_client())
    model = AnthropicModel("claude-sonnet-4-6", client=client)
    model.supports_tools = tools
    return model


async def _report(child_model: Model) -> DelegationReport:
    lead = ScriptedModel([tool_call("researcher", {"query": "Acme 2025?"}), text("done")])
    result = await Runner.run(_lead(child_model, lead), "go")
    (report,) = result.reports
    return report


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_recorded_real_outputs_the_structured_path_keeps_every_field(provider: str) -> None:
    make = _openai if provider == "openai" else _anthropic
    structured = await _report(make(
        "submit_report_call.json" if provider == "openai" else "submit_report_tool_use.json",
        tools=True))
    textual = await _report(make("report_text_block.json", tools=False))
    for field in FIELDS:
        assert getattr(structured, field) == getattr(textual, field), field
    # And every field is really there (the comparison is not of two empty reports).
    assert structured.summary.startswith("Acme's 2025 revenue was $4.2B")
    assert len(structured.key_findings) == 3 and len(structured.sources) == 2
    assert structured.confidence == "high" and structured.gaps


_item = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]),
                min_size=1, max_size=40).map(str.strip).filter(bool)


@settings(max_examples=60, deadline=None)
@given(summary=_item, findings=st.lists(_item, max_size=4), sources=st.lists(_item, max_size=3),
       confidence=st.sampled_from(["high", "medium", "low", "unknown"]), reason=_item,
       gaps=st.lists(_item, max_size=3))
def test_a_submitted_report_comes_back_exactly(summary: str, findings: list[str],
                                               sources: list[str], confidence: Any,
                                               reason: str, gaps: list[str]) -> None:
    # Whatever the text (semicolons, commas, bullets, headings, newlines): the structured
    # path stores the report as data, so what the child sent is what the parent gets.
    finish = submit_report.fn(summary=summary, key_findings=findings, sources=sources,
                              confidence=confidence, confidence_reason=reason, gaps=gaps)
    report = parse_report(finish.summary)
    assert (report.summary, report.key_findings, report.sources, report.confidence,
            report.confidence_reason, report.gaps) == (summary, findings, sources, confidence,
                                                      reason, gaps)
    assert json.loads(finish.summary)["summary"] == summary
