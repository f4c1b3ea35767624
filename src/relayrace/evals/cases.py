"""Eval cases as data: what to say to a team, and what should happen.

The same dataclasses are what a case file (YAML or JSONL) is read into and what Python users
write; pydantic validates both, and ``case_schema()`` is the JSON Schema of a case file.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from pydantic import ConfigDict, TypeAdapter
from pydantic.dataclasses import dataclass
from pydantic.json_schema import SkipJsonSchema

from .patterns import compile_pattern

__all__ = [
    "CASE_ADAPTER",
    "EXPECT_ADAPTER",
    "ArgsMode",
    "Case",
    "Decision",
    "Expect",
    "ExpectCall",
    "ExpectDelegation",
    "ExpectFinal",
    "ExpectLimits",
    "ExpectPath",
    "ExpectTools",
    "Match",
    "PathMode",
    "Rubric",
    "ToolsMode",
    "case_schema",
]

_STRICT = ConfigDict(extra="forbid", use_attribute_docstrings=True)

PathMode = Literal["exact", "in_order", "contains"]
"""How the handoff path compares: the same agents in the same order (``exact``), the expected
agents in this order with others between (``in_order``), or all of them in any order
(``contains``)."""
ToolsMode = Literal["strict", "unordered", "subset", "superset"]
"""How the tool calls compare, as ``agentevals`` defines it: ``strict`` the same model turns
in order (calls within one turn in any order); ``unordered`` the same calls in any order;
``subset`` every call made was expected; ``superset`` every expected call was made."""
Decision = Literal["approve", "reject"]
"""A person's decision on a tool call that needs approval."""
ArgsMode = Literal["exact", "ignore", "subset", "superset"]
"""How a call's arguments compare with the expected ones: equal, not at all, the actual
arguments all among the expected (``subset``), or the expected all among the actual
(``superset``)."""


@dataclass(config=_STRICT, kw_only=True)
class Match:
    """Checks on one value; every check given must hold.

    ``equals`` compares JSON data; ``contains`` looks for text (each of a list); ``regex``
    searches the text; ``schema`` validates JSON data (text holding JSON is parsed first).
    """

    equals: Any = None
    """The value itself (use ``schema: {type: "null"}`` to expect null)."""
    contains: str | list[str] | None = None
    """Text the value must contain (every one of a list), case-insensitively."""
    regex: str | None = None
    """A regular expression (RE2 syntax: no backreferences or lookaround, matched in linear
    time) the value's text must match somewhere."""
    schema: dict[str, Any] | None = None
    """A JSON Schema the value must satisfy."""

    def __post_init__(self) -> None:
        if self.equals is None and self.contains is None and self.regex is None \
                and self.schema is None:
            raise ValueError("a match needs at least one of equals, contains, regex, schema")
        if self.regex is not None:
            compile_pattern(self.regex)  # refused when the case is read, not when it runs


@dataclass(config=_STRICT, kw_only=True)
class ExpectPath:
    """The agents that should hold the conversation, from the first to the last."""

    agents: list[str]
    """Agent names, in order."""
    match: PathMode = "exact"
    """How to compare: ``exact``, ``in_order`` or ``contains``."""


@dataclass(config=_STRICT, kw_only=True)
class ExpectCall:
    """One expected tool call (handoffs are the path's, not tool calls)."""

    name: str
    """The tool's name."""
    args: dict[str, Any] | None = None
    """The arguments, compared as ``args_match`` says (none given: any arguments)."""
    args_match: ArgsMode | None = None
    """How ``args`` compare, for this call (default: the ``tools`` section's)."""
    where: dict[str, Match] = field(default_factory=dict)
    """Per-argument checks, by name or dotted path (``time.start``); these arguments are left
    out of the ``args`` comparison (e.g. generated ids checked by a regex)."""
    agent: str | None = None
    """The agent that must have made the call."""


@dataclass(config=_STRICT, kw_only=True)
class ExpectTools:
    """The tool calls the team should make."""

    calls: list[ExpectCall | list[ExpectCall]]
    """The calls; a list inside is the calls of one model turn (a parallel batch)."""
    mode: ToolsMode = "strict"
    """``strict``, ``unordered``, ``subset`` or ``superset``."""
    args: ArgsMode = "exact"
    """How arguments compare unless a call says otherwise."""


@dataclass(config=_STRICT, kw_only=True)
class ExpectDelegation:
    """A delegated child run and checks on the structured report it came back with."""

    child: str
    """The child agent's name."""
    by: str | None = None
    """The agent that delegated."""
    ok: bool | None = True
    """Whether the child should have finished with an answer (``None``: either)."""
    confidence: str | list[str] | None = None
    """The report's confidence (one of a list): high, medium, low or unknown."""
    sources: bool | None = None
    """Whether the report cites at least one source."""
    gaps: bool | None = None
    """Whether the report names gaps (``false``: none)."""
    summary: Match | None = None
    """Checks on the report's summary."""


@dataclass(config=_STRICT, kw_only=True)
class ExpectFinal(Match):
    """The final answer (for a typed agent, its JSON data), and who gave it."""

    agent: str | None = None
    """The agent that should give the final answer."""

    def __post_init__(self) -> None:
        if self.agent is None and self.equals is None and self.contains is None \
                and self.regex is None and self.schema is None:
            raise ValueError("final needs agent, or at least one of equals, contains, regex, "
                             "schema")
        if self.regex is not None:
            compile_pattern(self.regex)


@dataclass(config=_STRICT, kw_only=True)
class ExpectLimits:
    """Upper bounds on what a case run may use (whole conversation, children included)."""

    max_requests: int | None = None
    """Model requests."""
    max_tokens: int | None = None
    """Input plus output tokens."""
    max_handoffs: int | None = None
    """Handoffs."""
    max_tool_calls: int | None = None
    """Tool calls executed."""
    max_seconds: float | None = None
    """Wall-clock seconds."""


@dataclass(config=_STRICT, kw_only=True)
class Rubric:
    """Criteria a judge model scores from 1 (fails) to 5 (fully meets), with its reasons."""

    criteria: str
    """What a good answer does, in words."""
    min_score: int = 4
    """The lowest score that passes."""
    judge: str | None = None
    """The judge's model (provider:model), instead of the eval run's ``--judge``."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_score <= 5:
            raise ValueError(f"min_score is a score from 1 to 5, got {self.min_score}")


@dataclass(config=_STRICT, kw_only=True)
class Expect:
    """What should happen; each expectation given is one check of the case."""

    path: ExpectPath | list[str] | None = None
    """The handoff path (a list: exactly these agents, in order)."""
    tools: ExpectTools | None = None
    """The tool calls."""
    delegations: list[ExpectDelegation] = field(default_factory=list)
    """Delegated children, each matched to a distinct delegation made."""
    final: ExpectFinal | None = None
    """The final answer and the agent that gave it."""
    limits: ExpectLimits | None = None
    """Bounds on requests, tokens, handoffs, time."""
    rubric: Rubric | str | None = None
    """Criteria for a judge model (text: the criteria, min score 4)."""
    pending: list[str] | None = None
    """The tools the run should stop on, waiting for a person (approvals or questions);
    given, the case passes only when the run stops on exactly these."""

    def path_spec(self) -> ExpectPath | None:
        """``path`` as an `ExpectPath`."""
        path = self.path
        return ExpectPath(agents=path) if isinstance(path, list) else path

    def rubric_spec(self) -> Rubric | None:
        """``rubric`` as a `Rubric`."""
        rubric = self.rubric
        return Rubric(criteria=rubric) if isinstance(rubric, str) else rubric

    def expected_agent(self) -> str | None:
        """The agent the case should end with: the final answer's, else the path's last."""
        if self.final is not None and self.final.agent:
            return self.final.agent
        path = self.path_spec()
        if path is not None and path.agents and path.match != "contains":
            return path.agents[-1]
        return None


@dataclass(config=_STRICT, kw_only=True)
class Case:
    """One eval case: a conversation to have with a team, and what should happen."""

    id: str
    """A name unique in its file."""
    input: str | None = None
    """The user's message (or give ``turns``)."""
    turns: list[str] | None = None
    """Several user messages, one run each, in one session."""
    context: dict[str, Any] | None = None
    """The run context (template variables of the instructions, tools' context)."""
    start_agent: str | None = None
    """The agent to start with, by name (default: the team's entry)."""
    expect: Expect = field(default_factory=Expect)
    """What should happen."""
    tags: list[str] = field(default_factory=list)
    """Labels to select and group cases by."""
    approvals: dict[str, Decision | list[Decision]] = field(default_factory=dict)
    """A person's decision per tool name, for the calls that need approval; a list decides
    that tool's pending calls in order (a call past its end stops the run)."""
    answers: list[str] = field(default_factory=list)
    """The person's replies to the questions the run asks (``ask_user``), in order."""
    where: SkipJsonSchema[str] = ""
    """Where the case was read from (``file:line``), for messages; set by the loader."""
    lines: SkipJsonSchema[dict[str, str]] = field(default_factory=dict)
    """Where the keys checked against the team were read (``approvals.TOOL``,
    ``expect.pending``: ``file:line``); set by the loader."""

    def __post_init__(self) -> None:
        if not self.id.strip():
            raise ValueError("a case's id is a non-empty name")
        if (self.input is None) == (self.turns is None):
            raise ValueError("a case has either input (one message) or turns (several)")
        if self.turns is not None and not self.turns:
            raise ValueError("turns holds at least one user message")
        for tool, decided in self.approvals.items():
            if isinstance(decided, list) and not decided:
                raise ValueError(f"approvals.{tool} is a decision (approve or reject) or a "
                                 "non-empty list of them")

    @property
    def messages(self) -> list[str]:
        """The user messages, in order."""
        return list(self.turns) if self.turns is not None else [self.input or ""]

    def where_of(self, key: str) -> str:
        """Where ``key`` (``approvals.TOOL``, ``expect.pending``) was read, else the case's
        own place."""
        return self.lines.get(key) or self.where or self.id

    @property
    def label(self) -> str:
        """``id`` with where it was read from, for messages."""
        return f"{self.id} ({self.where})" if self.where else self.id


CASE_ADAPTER: TypeAdapter[Case] = TypeAdapter(Case)
"""Validates a case's data; dumps a case back to data."""
EXPECT_ADAPTER: TypeAdapter[Expect] = TypeAdapter(Expect)
"""The same for a case's expectations alone (kept with the results, for the report)."""


def case_schema() -> dict[str, Any]:
    """The JSON Schema of a case file: a list of cases, or ``{cases: [...]}``."""
    case = CASE_ADAPTER.json_schema(ref_template="#/$defs/{model}")
    defs = case.pop("$defs", {})
    defs["Case"] = case
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "relayrace eval cases",
        "description": "A YAML case file: a list of cases or {cases: [...]}; a JSONL file: one "
                       "case per line.",
        "oneOf": [
            {"type": "array", "items": {"$ref": "#/$defs/Case"}},
            {"type": "object", "properties": {"cases": {"type": "array",
                                                        "items": {"$ref": "#/$defs/Case"}}},
             "required": ["cases"], "additionalProperties": False},
        ],
        "$defs": defs,
    }
