"""What a real llama.cpp server returned, replayed through relayrace's real OpenAI provider.

``python3 dev realmodel --record`` ran each scenario (bench/realmodel_scenarios.py) on
Qwen2.5-Coder-1.5B-Instruct served by llama.cpp's ``llama-server --jinja``, and kept the wire
in tests/fixtures/realmodel/: every request, and every response as it came (a stream in the
chunks it arrived in). Here each scenario runs again on that wire, through the SDK client and
``OpenAIChatModel`` (only the HTTP transport is a replay), so every test run sees what a real
server sends: llama.cpp's extra fields, its stream chunking, its usage, and the tool calls a
small model writes as text. The checks are those of the live run, on what happened (the tools
that ran, the handoffs, the path); each must come out as it did live.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx2
import pytest

from relayrace import ModelSettings

BENCH = Path(__file__).resolve().parent.parent / "bench"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "realmodel"
RECORDED = sorted(p.stem for p in FIXTURES.glob("*.json") if p.stem != "routing")
# The fields of a chat completion (and of a chunk) in OpenAI's API; llama.cpp sends more.
OPENAI_FIELDS = {"id", "object", "created", "model", "choices", "usage", "system_fingerprint",
                 "service_tier"}


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, ModuleType]]:
    """bench/realmodel_scenarios.py and bench/realmodel_wire.py."""
    monkeypatch.syspath_prepend(str(BENCH))
    import realmodel_scenarios
    import realmodel_wire

    yield realmodel_scenarios, realmodel_wire


def _fixture(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text()))


def _completions(fixture: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded chat completions that are not streams, as the server sent them."""
    return [json.loads(x["body"]) for x in fixture["exchanges"]
            if x["path"].endswith("/chat/completions") and "body" in x and x["status"] == 200]


def _events(exchange: dict[str, Any]) -> list[Any]:
    """A recorded stream's server-sent events, parsed ("[DONE]" as is)."""
    text = "".join(exchange["chunks"])
    data = [line.removeprefix("data: ") for line in text.splitlines()
            if line.startswith("data: ")]
    return [d if d == "[DONE]" else json.loads(d) for d in data]


async def _replay(bench: tuple[ModuleType, ModuleType], name: str,
                  settings: ModelSettings | None = None) -> tuple[Any, Any]:
    scenarios, wire = bench
    fixture = _fixture(name)
    replayer = wire.Replayer(fixture["exchanges"])
    transport = httpx2.MockTransport(replayer.handle)

    def make(own: ModelSettings | None) -> Any:
        return wire.local_model(transport, fixture["base_url"], own or settings)

    return await scenarios.run_scenario(name, make), replayer


def _comparable(facts: Any) -> Any:
    """Facts as JSON keeps them, without what differs by run (a server's session id)."""
    plain = json.loads(json.dumps(facts))
    if isinstance(plain, dict):
        plain.pop("session", None)
    return plain


def test_every_scenario_was_recorded(bench: tuple[ModuleType, ModuleType]) -> None:
    scenarios, _ = bench
    assert sorted(scenarios.SCENARIOS) == RECORDED
    for name in RECORDED:
        fixture = _fixture(name)
        assert "llama.cpp" in fixture["server"] and fixture["exchanges"], name
        assert (FIXTURES / f"{name}.json").stat().st_size < 200_000, name  # kept small


# serve_openai_client serves on a real socket (uvicorn): tests/conftest.py marks it slow.
@pytest.mark.parametrize("name", RECORDED)
async def test_a_recorded_run_replays_to_what_it_saw(
        bench: tuple[ModuleType, ModuleType], name: str) -> None:
    fixture = _fixture(name)
    outcome, replayer = await _replay(bench, name)
    assert replayer.left == 0, "every recorded request was made again"
    assert outcome.checks == fixture["checks"]
    assert _comparable(outcome.facts) == _comparable(fixture["facts"])


def test_llama_cpp_sends_more_than_openai_and_the_provider_reads_past_it() -> None:
    """llama.cpp's completions carry fields of its own (its timings among them); the
    scenarios above parsed every one of them through the SDK and the provider."""
    extra: set[str] = set()
    for name in RECORDED:
        for completion in _completions(_fixture(name)):
            extra |= set(completion) - OPENAI_FIELDS
    assert "timings" in extra, extra


def _usage_of(fixture: dict[str, Any]) -> dict[str, int]:
    """Requests and tokens as the server counted them, over a fixture's exchanges."""
    usages = [c["usage"] for c in _completions(fixture)]
    for exchange in fixture["exchanges"]:
        if "chunks" in exchange:
            usages += [e["usage"] for e in _events(exchange)
                       if isinstance(e, dict) and e.get("usage")]
    return {"requests": len(usages), "input_tokens": sum(u["prompt_tokens"] for u in usages),
            "output_tokens": sum(u["completion_tokens"] for u in usages)}


@pytest.mark.parametrize("name", ["one_tool", "support_demo", "delegation_report"])
async def test_the_usage_of_a_run_is_the_servers(name: str) -> None:
    """A run's usage (children's included) adds up what llama.cpp counted, request by
    request."""
    fixture = _fixture(name)
    assert fixture["facts"]["usage"] == _usage_of(fixture)


async def test_a_stream_is_replayed_in_its_chunks_and_every_piece_is_passed_on(
        bench: tuple[ModuleType, ModuleType]) -> None:
    fixture = _fixture("streaming")
    (stream,) = [x for x in fixture["exchanges"] if "chunks" in x]
    events = _events(stream)
    assert events[-1] == "[DONE]" and len(stream["chunks"]) > 10
    pieces = [e["choices"][0]["delta"].get("content") for e in events[:-1] if e["choices"]]
    texts = [p for p in pieces if p]
    # llama.cpp ends with a chunk of usage (and its timings) and no choices.
    (last,) = [e for e in events[:-1] if not e["choices"]]
    assert last["usage"]["completion_tokens"] > 0 and "timings" in last
    outcome, replayer = await _replay(bench, "streaming")
    assert replayer.left == 0
    assert outcome.facts["deltas"] == len(texts)  # one text delta per piece with text
    assert outcome.facts["output_tokens"] == last["usage"]["completion_tokens"]
    assert outcome.facts["answer"] == "".join(texts)[:160]


def _written_calls(fixture: dict[str, Any]) -> list[str]:
    """The tools a fixture's completions called in their text (no native tool call): an
    offered tool's name as a JSON "name"."""
    names = []
    for exchange in fixture["exchanges"]:
        if "body" not in exchange or exchange["request"] is None:
            continue
        offered = [t["function"]["name"] for t in exchange["request"].get("tools", ())]
        message = json.loads(exchange["body"])["choices"][0]["message"]
        if message.get("tool_calls") or not message.get("content"):
            continue
        names += [n for n in offered
                  if f'"name": "{n}"' in message["content"].replace('"name":"', '"name": "')]
    return names


def _parsed(facts: Any) -> list[str]:
    """Every "calls parsed from text" in a scenario's facts, its turns' included."""
    if isinstance(facts, dict):
        return list(facts.get("calls parsed from text", [])) + [
            n for value in facts.values() if isinstance(value, dict) for n in _parsed(value)]
    return []


def test_the_model_wrote_calls_as_text_and_each_ran() -> None:
    """Qwen2.5-Coder-1.5B on llama.cpp writes tool calls as text (the reason for
    ``text_tool_calls``); with ``"parse"`` every one of them became a real call."""
    written = {name: _written_calls(_fixture(name)) for name in RECORDED}
    assert any(written.values()), "no call written as text was recorded"
    for name, calls in written.items():
        facts = _fixture(name)["facts"]
        parsed = Counter(_parsed(facts))
        if "delegations" in facts:  # the parent's own; a child's calls are in its session
            assert parsed <= Counter(calls) and parsed, name
        else:
            assert parsed == Counter(calls), name


def _streamed_text(exchange: dict[str, Any]) -> str:
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in _events(exchange)
                   if isinstance(e, dict) and e["choices"])


async def test_a_call_written_as_text_in_a_stream_runs_for_the_served_client(
        bench: tuple[ModuleType, ModuleType]) -> None:
    """relayrace serve streams the agent's model, whose first answer came as a fenced call,
    token by token: relayrace assembles it from the chunks, runs it, and the official
    client's answer is the tool's, with no call in it."""
    fixture = _fixture("serve_openai_client")
    first = _streamed_text(fixture["exchanges"][0])
    assert first.startswith("```") and '"get_weather"' in first
    assert len(fixture["exchanges"][0]["chunks"]) > 10
    outcome, replayer = await _replay(bench, "serve_openai_client")
    assert replayer.left == 0
    assert "get_weather" not in outcome.facts["answer"] + outcome.facts["streamed"]
    assert "21" in outcome.facts["answer"]  # get_weather's "21 C, sunny"


async def test_taken_as_text_the_written_call_is_the_bug_of_issue_37(
        bench: tuple[ModuleType, ModuleType]) -> None:
    """With ``text_tool_calls="off"`` the first recorded answer of one_tool, a call of
    get_weather written as text, would be the run's "successful" final answer, no tool run."""
    fixture = _fixture("one_tool")
    assert _written_calls({"exchanges": fixture["exchanges"][:1]}) == ["get_weather"]
    outcome, replayer = await _replay(bench, "one_tool", ModelSettings(
        temperature=0, text_tool_calls="off"))
    assert replayer.left == len(fixture["exchanges"]) - 1
    assert outcome.facts["tools"] == [] and outcome.checks["get_weather ran"] is False
    first = json.loads(fixture["exchanges"][0]["body"])["choices"][0]["message"]["content"]
    assert outcome.facts["answer"] == first[:160]


async def test_the_routing_figure_replays(bench: tuple[ModuleType, ModuleType]) -> None:
    """The routing eval of bench/README.md, on its recorded wire: the same paths, the same
    figure."""
    from relayrace.evals import load_cases, run_eval

    scenarios, wire = bench
    fixture = _fixture("routing")
    replayer = wire.Replayer(fixture["exchanges"])
    model = wire.local_model(httpx2.MockTransport(replayer.handle), fixture["base_url"])
    cases = load_cases(BENCH / "realmodel_routing.yaml")
    result = await run_eval(scenarios.support_team(model), cases, concurrency=1)
    assert replayer.left == 0
    paths = {r.case_id: r.path for r in result.runs}
    assert paths == fixture["paths"]
    routed = [c.id for c in cases if paths[c.id][1:2] == c.expect.path.agents[1:2]]
    assert len(routed) == fixture["routed"] and len(cases) == fixture["cases"] >= 10
