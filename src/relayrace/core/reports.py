"""The structured report a delegated child agent ends its work with.

A child whose model calls tools is asked (``REPORT_TOOL_SUFFIX``) to finish by calling the
``submit_report`` tool, whose validated arguments are the report; its final answer is then
that report as JSON. Otherwise its instructions get ``DEFAULT_REPORT_SUFFIX`` (see
``report_instructions``), asking it to close with a ``<handoff>`` block. ``parse_report``
reads either back, tolerating what models actually write, and never raises.
``DelegationReport.render`` is the one compact text the parent model receives as the tool
result: the report, never the child's transcript.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, cast

from .templates import render_instructions

__all__ = [
    "DEFAULT_REPORT_SUFFIX",
    "EMPTY_ANSWER",
    "REPORT_TOOL_SUFFIX",
    "SUBMIT_REPORT",
    "Confidence",
    "DelegationReport",
    "parse_report",
    "report_instructions",
]

Confidence = Literal["high", "medium", "low", "unknown"]

EMPTY_ANSWER = "(the agent returned an empty answer)"
"""What ``DelegationReport.render`` gives for an empty answer."""

DEFAULT_REPORT_SUFFIX = """

When your work is done, end your final answer with this block, filled in, and put nothing \
after it:

<handoff>
SUMMARY: the answer in one to three sentences
KEY_FINDINGS:
- one finding per line, with the names and figures that matter
SOURCES:
- each tool, document or URL your findings come from
CONFIDENCE: high|medium|low — why
GAPS:
- what you could not find or verify (write "none" if nothing is missing)
</handoff>
{%- if audience %}

The report will be read by {{ audience }}: choose what to include, and how to word it, for them.
{%- endif %}
"""
"""Jinja2 text appended to a delegated child's instructions; it receives ``audience``."""

SUBMIT_REPORT = "submit_report"
"""The tool a delegated child calls to finish with its report."""

REPORT_TOOL_SUFFIX = """

When your work is done, call the submit_report tool with your report: the summary, the key \
findings, the sources they come from, your confidence and why, and the gaps. Calling it ends \
your task, so make it your last call; the report is all the agent that asked you receives.
{%- if audience %}

The report will be read by {{ audience }}: choose what to include, and how to word it, for them.
{%- endif %}
"""
"""Jinja2 text appended to the instructions of a delegated child that reports through the
``submit_report`` tool; it receives ``audience``."""

_REPORT_KEYS = frozenset({"summary", "key_findings", "sources", "confidence",
                          "confidence_reason", "gaps"})

_OPEN = re.compile(r"<\s*handoff\s*>", re.IGNORECASE)
_CLOSE = re.compile(r"<\s*/\s*handoff\s*>", re.IGNORECASE)
_HEADING = re.compile(
    r"[ \t]*(?:#{1,6}[ \t]*)?(?:[*_]{1,2}[ \t]*)?"
    r"(?P<name>summary|key[ \t_-]*findings|findings|sources|references"
    r"|confidence(?:[ \t_-]*level)?|gaps)"
    r"[ \t]*(?:[*_]{1,2}[ \t]*)?"
    r"(?:(?:[:：]|[-–—](?=[ \t]))[ \t]*(?:[*_]{1,2}[ \t]*)?(?P<rest>.*))?",
    re.IGNORECASE,
)
_SECTIONS = {"summary": "summary", "keyfindings": "key_findings", "findings": "key_findings",
             "sources": "sources", "references": "sources", "confidence": "confidence",
             "confidencelevel": "confidence", "gaps": "gaps"}  # fmt: skip
_BULLET = re.compile(r"[ \t]*(?:[-*•+‣◦▪]|\d{1,3}[.)])[ \t]+")
_LEVEL = re.compile(
    r"[^\w\n]*(high|medium|med|moderate|low|unknown)\b"
    r"(?:[ \t]*(?:-|/|–|to)[ \t]*(?:high|medium|low)\b)?",
    re.IGNORECASE,
)
_LEVELS: dict[str, Confidence] = {"high": "high", "medium": "medium", "med": "medium",
                                  "moderate": "medium", "low": "low",
                                  "unknown": "unknown"}  # fmt: skip
_NOTHING = {"", "none", "n/a", "na", "nil", "nothing", "no gaps", "none identified", "-"}


@dataclass(slots=True, kw_only=True)
class DelegationReport:
    """What a delegated child agent reports back to its parent."""

    summary: str = ""
    """The answer in brief; with no ``<handoff>`` block, the child's whole answer (stripped)."""
    key_findings: list[str] = field(default_factory=list)
    """One finding per item, in the child's order."""
    sources: list[str] = field(default_factory=list)
    """Tools, documents or URLs the findings come from; see ``merge_sources``."""
    confidence: Confidence = "unknown"
    """``high``, ``medium`` or ``low`` as the child rated itself; ``unknown`` if it did not."""
    confidence_reason: str = ""
    """Why that confidence; with ``unknown``, whatever the child wrote under CONFIDENCE."""
    gaps: list[str] = field(default_factory=list)
    """What the child could not find or verify ("none" and the like are dropped)."""
    raw: str = ""
    """The child's whole final answer, as written."""

    @property
    def is_empty(self) -> bool:
        """True when the report carries nothing: an empty or blank answer (or an empty block)."""
        return not (self.summary or self.key_findings or self.sources or self.gaps
                    or self.confidence != "unknown" or self.confidence_reason)  # fmt: skip

    def render(self) -> str:
        """The compact text the parent model receives as the tool result.

        Empty sections are left out; a report with nothing but a summary renders as that text
        alone. Nothing is cut here: the caller caps the tool result's length if it must.
        """
        if self.is_empty:
            return EMPTY_ANSWER
        rated = self.confidence != "unknown" or self.confidence_reason
        confidence = self.confidence if rated else ""
        if not (self.key_findings or self.sources or self.gaps or confidence):
            return self.summary
        parts = [f"SUMMARY: {self.summary}"] if self.summary else []
        parts += _section("KEY FINDINGS", self.key_findings) + _section("SOURCES", self.sources)
        if confidence:
            reason = f" — {self.confidence_reason}" if self.confidence_reason else ""
            parts.append(f"CONFIDENCE: {confidence}{reason}")
        return "\n".join(parts + _section("GAPS", self.gaps))

    def merge_sources(self, used: Iterable[str]) -> None:
        """Complete ``sources`` with the tools and documents the child actually ``used``.

        The child's own citations stay first, in order; duplicates (ignoring case) are
        dropped, and a used name already mentioned inside a citation (``web_search`` in
        ``web_search: "acme revenue"``) is not added again.
        """
        merged: list[str] = []
        for name in (source.strip() for source in self.sources):
            if name and name.casefold() not in (cited.casefold() for cited in merged):
                merged.append(name)
        for name in (source.strip() for source in used):
            if name and not any(_mentions(cited, name) for cited in merged):
                merged.append(name)
        self.sources[:] = merged

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        return {"summary": self.summary, "key_findings": list(self.key_findings),
                "sources": list(self.sources), "confidence": self.confidence,
                "confidence_reason": self.confidence_reason, "gaps": list(self.gaps),
                "raw": self.raw}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DelegationReport:
        """Rebuild a report from ``to_dict`` data; missing or ill-typed fields get defaults."""
        def text(key: str) -> str:
            value = data.get(key)
            return value if isinstance(value, str) else ""

        def items(key: str) -> list[str]:
            value = data.get(key)
            return [str(v) for v in value] if isinstance(value, (list, tuple)) else []

        level = text("confidence")
        return cls(summary=text("summary"), key_findings=items("key_findings"),
                   sources=items("sources"), gaps=items("gaps"),
                   confidence=cast(Confidence, level) if level in _LEVELS.values() else "unknown",
                   confidence_reason=text("confidence_reason"), raw=text("raw"))  # fmt: skip


@lru_cache(maxsize=256)
def report_instructions(audience: str = "", template: str = DEFAULT_REPORT_SUFFIX) -> str:
    """Render the report request (``template``) appended to a delegated child's instructions."""
    return render_instructions(template, {"audience": audience})


def parse_report(text: str) -> DelegationReport:
    """Read a child's final answer into a ``DelegationReport``; never raises.

    A report submitted through ``submit_report`` (the final answer is then its JSON) is read
    as it is.
    Takes the last ``<handoff>`` block holding a section (any case and spacing; the closing
    tag may be missing). Without tags, a ``SUMMARY`` heading followed by another section
    heading starts the block, and the text before it opens the summary (it may be the answer
    itself). Headings may be ``SUMMARY:``, ``## Summary``, ``**Summary:**``,
    ``Key-Findings``...; items may be bulleted (``-``, ``*``, ``•``), numbered (``1.``, ``1)``)
    or inline (``a; b``, and ``a, b`` for sources). A block without SUMMARY takes its summary
    from its untitled text, else from the text before it. Confidence is the first word if it
    is high, medium (also med, moderate) or low, a range like "medium-high" counting as its
    first word; the rest, minus separators, is the reason. Otherwise it is ``unknown`` and
    the reason keeps the text. With no block at all, the summary is the whole answer.
    """
    raw = text if isinstance(text, str) else ""
    submitted = _submitted(raw)
    if submitted is not None:
        report = DelegationReport.from_dict(submitted)
        report.raw = raw
        return report
    sections, before = _find_block(raw)
    if sections is None:
        return DelegationReport(summary=raw.strip(), raw=raw)
    summary = _join(sections.get("summary", ()), "\n") or _join(sections.get("", ()), "\n")
    level, reason = _confidence(_join(sections.get("confidence", ()), " "))
    return DelegationReport(
        summary=summary or before.strip(),
        key_findings=_items(sections.get("key_findings", ()), commas=False),
        sources=_items(sections.get("sources", ()), commas=True),
        confidence=level,
        confidence_reason=reason,
        gaps=_items(sections.get("gaps", ()), commas=False),
        raw=raw,
    )


def _submitted(raw: str) -> dict[str, Any] | None:
    """The report a child submitted through ``submit_report`` (its final answer is the
    report's JSON), or ``None`` for any other answer."""
    if not raw.startswith("{") or '"summary"' not in raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or "summary" not in data or not set(data) <= _REPORT_KEYS:
        return None
    return data


def _find_block(text: str) -> tuple[dict[str, list[str]] | None, str]:
    """The report block's sections (``None`` without a block) and the text before it."""
    blocks = []
    for found in list(_OPEN.finditer(text))[-5:]:  # the last block holding a section wins
        close = _CLOSE.search(text, found.end())
        body = text[found.end() : close.start() if close else len(text)]
        blocks.append((_sections(body), found.start()))
    if blocks:
        sections, start = blocks[0] if len(blocks) == 1 else max(
            blocks, key=lambda b: (any(b[0]), b[1]))
        return sections, text[:start]
    lines = text.splitlines()
    heads = [(i, _name(m)) for i, line in enumerate(lines) if (m := _HEADING.fullmatch(line))]
    for i, name in reversed(heads):
        if name == "summary" and any(other != name for j, other in heads if j > i):
            block = "\n".join(lines[i:])
            close = _CLOSE.search(block)
            sections = _sections(block[: close.start() if close else len(block)])
            before = "\n".join(lines[:i]).strip()
            if before:  # untagged, the text before the headings may be the answer itself
                sections["summary"] = [before, *sections.get("summary", ())]
            return sections, before
    return None, text


_NOT_LETTERS = re.compile(r"[^a-z]")


def _name(heading: re.Match[str]) -> str:
    return _section_of(heading["name"])


@lru_cache(maxsize=256)  # models repeat a few spellings of the headings
def _section_of(spelling: str) -> str:
    return _SECTIONS.get(_NOT_LETTERS.sub("", spelling.lower()), "summary")


def _sections(block: str) -> dict[str, list[str]]:
    """The block's lines by section; ``""`` holds the untitled lines before any heading."""
    sections: dict[str, list[str]] = {}
    current = ""
    for line in block.splitlines():
        if line.strip().startswith("```"):
            continue
        heading = _HEADING.fullmatch(line)
        if heading:
            current = _name(heading)
            line = _unbold(heading["rest"] or "")
        sections.setdefault(current, []).append(line)
    return sections


def _unbold(text: str) -> str:
    text = text.strip()
    for mark in ("**", "__"):
        if text.endswith(mark) and text.count(mark) % 2:
            text = text[: -len(mark)].rstrip()
    return text


def _join(lines: Sequence[str], separator: str) -> str:
    return separator.join(line.strip() for line in lines if line.strip()).strip()


def _items(lines: Sequence[str], *, commas: bool) -> list[str]:
    """List items: one per bullet or line, indented lines continuing the item above."""
    if not lines:
        return []
    items: list[str] = []
    for index, line in enumerate(lines):
        bullet = _BULLET.match(line)
        if not line.strip():
            continue
        if bullet:
            items.append(line[bullet.end() :])
        elif index == 0:  # the heading line's own text: an inline list
            parts = [p for chunk in line.split("•") for p in _split_outside_brackets(chunk, ";")]
            if commas and len(parts) == 1:
                parts = _split_outside_brackets(line, ",")
            items += [p[m.end() :] if (m := _BULLET.match(p)) else p for p in parts]
        elif items and line[:1] in " \t":
            items[-1] += " " + line.strip()
        else:
            items.append(line)
    cleaned = (_unbold(item) for item in items)
    return [item for item in cleaned if item.lower().strip(" .!()[]*_") not in _NOTHING]


def _split_outside_brackets(text: str, separator: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def _confidence(text: str) -> tuple[Confidence, str]:
    level = _LEVEL.match(text)
    if level is None:
        return "unknown", text.strip()
    reason = text[level.end() :].strip(" \t*_—–-:;,")
    if reason.startswith("(") and reason.endswith(")"):
        reason = reason[1:-1].strip()
    return _LEVELS[level[1].lower()], reason


def _section(label: str, items: list[str]) -> list[str]:
    return [f"{label}:", *(f"- {item}" for item in items)] if items else []


def _mentions(cited: str, name: str) -> bool:
    """Whether citation ``cited`` already names ``name`` (ignoring case, as a whole word)."""
    pattern = r"(?<!\w)" + re.escape(name) + r"(?!\w)"
    return re.search(pattern, cited, re.IGNORECASE) is not None
