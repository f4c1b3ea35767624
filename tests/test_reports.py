"""Tests for relayrace.core.reports: the delegation report request, parser and rendering."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relayrace.core.reports import (
    DEFAULT_REPORT_SUFFIX,
    EMPTY_ANSWER,
    DelegationReport,
    parse_report,
    report_instructions,
)

CANONICAL = """I searched the web and read the filings.

<handoff>
SUMMARY: Acme's revenue grew 12% in 2024.
KEY_FINDINGS:
- Revenue rose 12%, driven by the EU
- Margins were flat
SOURCES:
- web_search
- docs/acme-10k.pdf
CONFIDENCE: high — two independent sources agree
GAPS:
- Q4 guidance not published
</handoff>
"""


# --------------------------------------------------------------------------- the request


def test_suffix_asks_for_every_section_in_a_handoff_block() -> None:
    text = report_instructions()
    assert "<handoff>" in text and "</handoff>" in text
    sections = ("SUMMARY:", "KEY_FINDINGS:", "SOURCES:", "CONFIDENCE: high|medium|low", "GAPS:")
    assert all(section in text for section in sections)
    assert "read by" not in text
    assert "{" not in text  # fully rendered


def test_suffix_names_the_audience_when_given() -> None:
    text = report_instructions("the CFO")
    assert "read by the CFO" in text
    assert text.startswith(report_instructions().rstrip("\n"))


def test_suffix_can_be_overridden() -> None:
    assert report_instructions("ops", template="Report for {{ audience }}.") == "Report for ops."
    assert DEFAULT_REPORT_SUFFIX.count("{{ audience }}") == 1


# --------------------------------------------------------------------------- parsing


def test_canonical_block() -> None:
    report = parse_report(CANONICAL)
    assert report.summary == "Acme's revenue grew 12% in 2024."
    assert report.key_findings == ["Revenue rose 12%, driven by the EU", "Margins were flat"]
    assert report.sources == ["web_search", "docs/acme-10k.pdf"]
    assert report.confidence == "high"
    assert report.confidence_reason == "two independent sources agree"
    assert report.gaps == ["Q4 guidance not published"]
    assert report.raw == CANONICAL
    assert not report.is_empty


@pytest.mark.parametrize(
    "block",
    [
        "<HANDOFF>\nSummary: S\nKey Findings:\n- F\nSources:\n- W\nConfidence: Low - R\n"
        "Gaps:\n- G\n</HANDOFF>",
        "< handoff >\n## SUMMARY\nS\n## Key-Findings\n* F\n## SOURCES\n• W\n## CONFIDENCE\n"
        "low: R\n## GAPS\n1. G\n< / handoff >",
        "<handoff>\n**SUMMARY:** S\n**KEY_FINDINGS:**\n1) F\n**Sources**: W\n"
        "**Confidence:** LOW (R)\n**Gaps:** G\n</handoff>",
        "<handoff>\n  summary :  S  \nkeyfindings\n   -   F\nreferences: W\n"
        "confidence level: low — R\ngaps: G",
        "Text before.\n<handoff>\n```\nSUMMARY — S\nFINDINGS: F\nSOURCES: W\nCONFIDENCE: low, R\n"
        "GAPS: G\n```\n</handoff>\nText after.",
    ],
)
def test_tolerated_variants(block: str) -> None:
    report = parse_report(block)
    assert (report.summary, report.key_findings, report.sources) == ("S", ["F"], ["W"])
    assert (report.confidence, report.confidence_reason, report.gaps) == ("low", "R", ["G"])


def test_multi_line_summary_and_continued_items() -> None:
    report = parse_report(
        "<handoff>\nSUMMARY:\nFirst line.\nSecond line.\nKEY_FINDINGS:\n- one\n  continued\n"
        "two without bullet\n</handoff>"
    )
    assert report.summary == "First line.\nSecond line."
    assert report.key_findings == ["one continued", "two without bullet"]


def test_inline_lists() -> None:
    report = parse_report(
        "<handoff>\nSUMMARY: s\nKEY_FINDINGS: up 5%, mostly EU; margins flat\n"
        "SOURCES: web_search (query: acme, 2024), docs/a.md; wiki\nGAPS: - only one\n</handoff>"
    )
    assert report.key_findings == ["up 5%, mostly EU", "margins flat"]  # commas stay in findings
    assert report.sources == ["web_search (query: acme, 2024), docs/a.md", "wiki"]
    inline = parse_report("<handoff>SOURCES: a, b (x, y), c</handoff>")
    assert inline.sources == ["a", "b (x, y)", "c"]
    assert report.gaps == ["only one"]
    assert parse_report("<handoff>\nGAPS: a • b\n</handoff>").gaps == ["a", "b"]


@pytest.mark.parametrize("nothing", ["none", "None.", "N/A", "(none)", "nothing", "-"])
def test_none_items_are_dropped(nothing: str) -> None:
    text = f"<handoff>\nSUMMARY: s\nGAPS:\n- {nothing}\nSOURCES: {nothing}\n</handoff>"
    report = parse_report(text)
    assert report.gaps == [] and report.sources == []


def test_missing_sections_are_empty() -> None:
    report = parse_report("<handoff>\nSUMMARY: only this\n</handoff>")
    assert report.summary == "only this"
    assert report.key_findings == report.sources == report.gaps == []
    assert (report.confidence, report.confidence_reason) == ("unknown", "")


def test_missing_closing_tag_reads_to_the_end() -> None:
    report = parse_report("<handoff>\nSUMMARY: s\nGAPS:\n- g1\n- g2")
    assert report.gaps == ["g1", "g2"]


def test_last_block_wins() -> None:
    text = "<handoff>\nSUMMARY: draft\n</handoff>\nmore work\n<handoff>\nSUMMARY: final\n</handoff>"
    assert parse_report(text).summary == "final"


def test_a_later_bare_tag_mention_does_not_hide_the_block() -> None:
    text = "<handoff>\nSUMMARY: real\nCONFIDENCE: medium\n</handoff>\nI used the <handoff> format."
    assert parse_report(text).summary == "real"


def test_text_after_the_closing_tag_is_ignored() -> None:
    report = parse_report("<handoff>\nSUMMARY: s\nGAPS:\n- g\n</handoff>\n- not a gap")
    assert report.gaps == ["g"]


def test_block_without_summary_uses_its_untitled_text_then_the_text_before() -> None:
    untitled = parse_report("Before.\n<handoff>\nThe gist.\nKEY_FINDINGS:\n- f\n</handoff>")
    assert untitled.summary == "The gist."
    before = parse_report("The narrative answer.\n<handoff>\nKEY_FINDINGS:\n- f\n</handoff>")
    assert before.summary == "The narrative answer."
    assert before.key_findings == ["f"]


def test_block_without_headings_is_the_summary() -> None:
    assert parse_report("Intro\n<handoff>\nAll done.\n</handoff>").summary == "All done."


def test_headings_without_tags_are_a_block() -> None:
    report = parse_report("## Summary\nS\n## Sources\n- W\n</handoff>\nafter")
    assert (report.summary, report.sources) == ("S", ["W"])


def test_text_before_an_untagged_block_is_kept_in_the_summary() -> None:
    # Without tags nothing marks the text before the headings as preamble: it may be the
    # answer itself, so it opens the summary instead of being dropped.
    text = "Q3 revenue $4.2M, up 12%. Churn 3%.\n\nSummary: Good quarter.\nSources: finance.xlsx"
    report = parse_report(text)
    assert report.summary == "Q3 revenue $4.2M, up 12%. Churn 3%.\nGood quarter."
    assert report.sources == ["finance.xlsx"]
    assert "Q3 revenue" in report.render()


def test_a_lone_summary_line_without_tags_is_just_text() -> None:
    text = "Summary: the short version.\nThe rest of the answer."
    assert parse_report(text).summary == text


@pytest.mark.parametrize(
    ("line", "level", "reason"),
    [
        ("high — two sources", "high", "two sources"),
        ("HIGH", "high", ""),
        ("Medium-High (partial data)", "medium", "partial data"),
        ("medium to high: partial", "medium", "partial"),
        ("low: thin evidence.", "low", "thin evidence."),
        ("**Low** – one source", "low", "one source"),
        ("moderate - mixed", "medium", "mixed"),
        ("Med", "medium", ""),
        ("unknown — no data", "unknown", "no data"),
        ("very high", "unknown", "very high"),
        ("80%", "unknown", "80%"),
        ("highly likely", "unknown", "highly likely"),
    ],
)
def test_confidence(line: str, level: str, reason: str) -> None:
    report = parse_report(f"<handoff>\nSUMMARY: s\nCONFIDENCE: {line}\n</handoff>")
    assert (report.confidence, report.confidence_reason) == (level, reason)


def test_confidence_reason_on_following_lines() -> None:
    report = parse_report("<handoff>\nCONFIDENCE:\nmedium\nbecause of X\n</handoff>")
    assert (report.confidence, report.confidence_reason) == ("medium", "because of X")


def test_no_block_keeps_the_whole_answer_as_summary() -> None:
    long = "  " + "A long plain answer. " * 2000 + "\n"
    report = parse_report(long)
    assert report.summary == long.strip()
    assert report.confidence == "unknown"
    assert report.render() == long.strip()


@pytest.mark.parametrize("text", ["", "   \n\t ", "<handoff></handoff>", "<handoff>\n\n</handoff>"])
def test_empty_answers(text: str) -> None:
    report = parse_report(text)
    assert report.is_empty
    assert report.summary == ""
    assert report.render() == EMPTY_ANSWER == "(the agent returned an empty answer)"


# --------------------------------------------------------------------------- rendering


def test_render_is_compact_and_never_the_transcript() -> None:
    rendered = parse_report(CANONICAL).render()
    assert rendered == (
        "SUMMARY: Acme's revenue grew 12% in 2024.\n"
        "KEY FINDINGS:\n- Revenue rose 12%, driven by the EU\n- Margins were flat\n"
        "SOURCES:\n- web_search\n- docs/acme-10k.pdf\n"
        "CONFIDENCE: high — two independent sources agree\n"
        "GAPS:\n- Q4 guidance not published"
    )
    assert "I searched the web" not in rendered


def test_render_omits_empty_sections() -> None:
    rendered = DelegationReport(summary="S", gaps=["g"]).render()
    assert rendered == "SUMMARY: S\nGAPS:\n- g"
    assert DelegationReport(key_findings=["f"], confidence="low").render() == (
        "KEY FINDINGS:\n- f\nCONFIDENCE: low")  # fmt: skip
    assert DelegationReport(summary="S", confidence_reason="unsure").render() == (
        "SUMMARY: S\nCONFIDENCE: unknown — unsure")  # fmt: skip


def test_render_of_a_summary_only_report_is_the_summary() -> None:
    assert DelegationReport(summary="Just this.", raw="x").render() == "Just this."


# --------------------------------------------------------------------------- data and sources


def test_to_dict_from_dict_round_trip() -> None:
    report = parse_report(CANONICAL)
    data = report.to_dict()
    assert data["confidence"] == "high" and data["raw"] == CANONICAL
    assert DelegationReport.from_dict(data) == report
    data["key_findings"].append("mutating the dict does not touch the report")
    assert len(report.key_findings) == 2


def test_from_dict_tolerates_missing_and_bad_fields() -> None:
    report = DelegationReport.from_dict({"summary": 3, "sources": "not a list",
                                         "confidence": "sure", "gaps": ("a", 1)})
    assert report == DelegationReport(gaps=["a", "1"])


def test_merge_sources() -> None:
    report = DelegationReport(sources=["Web_Search: 'acme revenue'", "docs/a.md", "DOCS/A.MD"])
    report.merge_sources(["web_search", "fetch_url", "docs/a.md", "FETCH_URL", "  ", "search"])
    assert report.sources == ["Web_Search: 'acme revenue'", "docs/a.md", "fetch_url", "search"]


def test_merge_sources_fills_an_uncited_report() -> None:
    report = parse_report("<handoff>\nSUMMARY: s\n</handoff>")
    report.merge_sources(iter(["kb_lookup", "kb_lookup"]))
    assert report.sources == ["kb_lookup"]
    assert "SOURCES:\n- kb_lookup" in report.render()


# --------------------------------------------------------------------------- properties

FRAGMENTS = st.sampled_from([
    "<handoff>", "</handoff>", "<HANDOFF>", "< / handoff >", "SUMMARY:", "## Summary", "**Gaps:**",
    "KEY_FINDINGS:", "Key-Findings", "SOURCES:", "CONFIDENCE:", "high", "Medium-High", "low —",
    "(", ")", "GAPS:", "- ", "* ", "• ", "1. ", "2) ", "none", "\n", "\r\n", " ", ":", ";", ",",
    "```", "**", "__", "—", "\t",
])  # fmt: skip
ANSWERS = st.lists(FRAGMENTS | st.text(max_size=8), max_size=30).map("".join) | st.text()


@settings(max_examples=500)
@given(ANSWERS)
def test_parse_report_never_raises(text: str) -> None:
    report = parse_report(text)
    assert report.raw == text
    assert report.confidence in ("high", "medium", "low", "unknown")
    for items in (report.key_findings, report.sources, report.gaps):
        assert all(isinstance(item, str) and item.strip() for item in items)
    rendered = report.render()
    assert rendered.strip()
    assert report.is_empty == (rendered == EMPTY_ANSWER)
    assert DelegationReport.from_dict(report.to_dict()) == report


_HEADINGLIKE = re.compile(
    r"(summary|key\W*findings|findings|sources|references|confidence( level)?|gaps)\W*", re.I
)
_NONE_LIKE = {"none", "n/a", "na", "nil", "nothing", "no gaps", "none identified"}
PHRASES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ,.%]{0,30}[A-Za-z0-9.%]", fullmatch=True).filter(
    lambda s: not _HEADINGLIKE.fullmatch(s) and s.lower().strip(" .") not in _NONE_LIKE
)
REPORTS = st.builds(
    DelegationReport,
    summary=st.just("") | PHRASES,
    key_findings=st.lists(PHRASES, max_size=3),
    sources=st.lists(PHRASES, max_size=3),
    confidence=st.sampled_from(["high", "medium", "low", "unknown"]),
    confidence_reason=st.just("") | PHRASES,
    gaps=st.lists(PHRASES, max_size=3),
)


@given(REPORTS)
def test_rendered_reports_parse_back(report: DelegationReport) -> None:
    if report.is_empty:
        return
    block = f"<handoff>\n{report.render()}\n</handoff>"
    back = parse_report(block)
    assert back.summary == report.summary
    assert back.key_findings == report.key_findings
    assert back.sources == report.sources
    assert back.gaps == report.gaps
    assert back.confidence_reason == report.confidence_reason
    assert back.confidence == report.confidence
