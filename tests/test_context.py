"""Result limits, compression and memory, through the public API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from relayrace import (
    Agent,
    Compression,
    ContextCompactedEvent,
    Memory,
    MemoryEvent,
    Message,
    Runner,
    ToolResultEvent,
    UserError,
    read_result,
    tool,
)
from relayrace.models.interface import ModelRequest
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call

BIG = "".join(f"line {i:05d} of a long report\n" for i in range(2000))  # ~54,000 characters


@tool
def report() -> str:
    """A long report."""
    return BIG


def tool_messages(model: ScriptedModel | FunctionModel, n: int = -1) -> list[Message]:
    return [m for m in model.requests[n].messages if m.role == "tool"]


def assert_pairs_valid(messages: list[Message]) -> None:
    """Every tool result answers a call of the assistant message before it."""
    open_ids: set[str] = set()
    for m in messages:
        if m.role == "assistant":
            open_ids = {c.id for c in m.tool_calls}
        elif m.role == "tool":
            assert m.tool_call_id in open_ids, m
            open_ids.discard(m.tool_call_id)
        else:
            assert not open_ids, "a call was left without its result"


# -- result limits ----------------------------------------------------------------------------


async def test_a_long_result_is_cut_for_the_model_and_kept_whole_in_the_log() -> None:
    model = ScriptedModel([tool_call("report", {}, id="c1"), text("done")])
    agent = Agent("a", instructions="x", model=model, tools=[report, read_result],
                  max_result_tokens=500)
    result = await Runner.run(agent, "go")
    (seen,) = tool_messages(model)
    assert len(seen.content) <= 500 * 4
    assert seen.content.startswith(BIG[:1000])
    assert "left out; read_result(call_id='c1', offset=" in seen.content
    (event,) = result.tool_results
    assert event.full_content == BIG and event.message.content == seen.content


async def test_a_tool_limit_wins_over_the_agent_and_none_means_no_limit() -> None:
    @tool(max_result_tokens=100)
    def short() -> str:
        """Short."""
        return BIG

    model = ScriptedModel([tool_call("short", {}, id="s"), tool_call("report", {}, id="r"),
                           text("done")])
    agent = Agent("a", instructions="x", model=model, tools=[short, report],
                  max_result_tokens=None)
    await Runner.run(agent, "go")
    cut, whole = tool_messages(model)
    assert len(cut.content) <= 400 and "ask for something narrower" in cut.content
    assert whole.content == BIG


async def test_read_result_reads_the_rest_from_the_log() -> None:
    model = ScriptedModel([tool_call("report", {}, id="c1"), text("?")])
    agent = Agent("a", instructions="x", model=model, tools=[report, read_result],
                  max_result_tokens=1000)
    session = MemorySession()
    await Runner.run(agent, "go", session=session)
    offset = int(tool_messages(model)[0].content.rsplit("offset=", 1)[1].split(")")[0])
    model.extend([tool_call("read_result", {"call_id": "c1", "offset": offset}, id="r1"),
                  text("read")])
    result = await Runner.run(agent, "more", session=session)
    chunk = result.tool_results[0].message.content
    assert not result.tool_results[0].is_error and len(chunk) <= 4000
    header, body = chunk.split("\n", 1)
    assert BIG[offset:].startswith(body) and len(body) > 3000
    assert f"offset={offset + len(body)}) reads on" in header


@pytest.mark.parametrize(("args", "expected"), [
    ({"call_id": "nope"}, "No tool result or archive 'nope'"),
    ({"call_id": "c1", "offset": 10**9}, "give an offset from 0 to"),
    ({"call_id": "c1", "offset": -1}, "give an offset from 0 to"),
])
async def test_read_result_bad_inputs_are_told_to_the_model(args: dict[str, Any],
                                                            expected: str) -> None:
    model = ScriptedModel([tool_call("report", {}, id="c1"), text("ok"),
                           tool_call("read_result", args, id="r1"), text("ok")])
    agent = Agent("a", instructions="x", model=model, tools=[report, read_result],
                  max_result_tokens=1000)
    session = MemorySession()
    await Runner.run(agent, "go", session=session)
    result = await Runner.run(agent, "again", session=session)
    (event,) = result.tool_results
    assert event.is_error and expected in event.message.content


def test_limit_options_are_checked() -> None:
    with pytest.raises(UserError, match="max_result_tokens must be an integer of at least 1"):
        Agent("a", instructions="x", max_result_tokens=0)
    with pytest.raises(UserError, match="max_result_tokens must be at least 1"):
        tool(name="t", max_result_tokens=0)(lambda: "x")
    with pytest.raises(UserError, match="both protected"):
        tool(name="t", protected=True, compactable=True)(lambda: "x")


# -- compression ------------------------------------------------------------------------------


@tool(compactable=True)
def search(q: str) -> str:
    """Search."""
    return f"search {q}: " + "s" * 4000


@tool
def lookup(q: str) -> str:
    """Lookup."""
    return f"lookup {q}: " + "l" * 4000


@tool(protected=True)
def save(q: str) -> str:
    """Save."""
    return f"saved {q}: " + "p" * 4000


def answer_turns(name: str, i: int) -> list[Any]:
    return [tool_call(name, {"q": str(i)}, id=f"{name}{i}"), text(f"answer {i}")]


async def test_compression_clears_compactable_then_other_results_never_protected_nor_current(
) -> None:
    model = ScriptedModel()
    agent = Agent("a", instructions="x", model=model, tools=[search, lookup, save, read_result],
                  compression=Compression(max_tokens=3000, summarize=False))
    session = MemorySession()
    for i, name in enumerate(["search", "lookup", "save", "search", "lookup"]):
        model.extend(answer_turns(name, i))
        await Runner.run(agent, f"question {i}", session=session)
    seen = {m.tool_call_id: m.content for m in tool_messages(model)}
    assert seen["search0"].startswith("[Result cleared") and seen["search3"].startswith(
        "[Result cleared")
    assert "read_result(call_id='search0') brings it back" in seen["search0"]
    assert seen["lookup1"].startswith("[Result cleared")
    assert seen["save2"].startswith("saved 2")  # protected
    assert seen["lookup4"].startswith("lookup 4")  # the current run's
    assert_pairs_valid(model.requests[-1].messages)
    # The log keeps everything.
    logged = [e.message.content for e in session.events if isinstance(e, ToolResultEvent)]
    assert all(not c.startswith("[Result cleared") for c in logged)


async def test_compression_off_below_the_budget_sends_the_view_unchanged() -> None:
    model = ScriptedModel(answer_turns("search", 0))
    agent = Agent("a", instructions="x", model=model, tools=[search],
                  compression=Compression(max_tokens=100_000))
    await Runner.run(agent, "q", session=MemorySession())
    assert tool_messages(model)[0].content.startswith("search 0")


def summarizer(replies: list[str]) -> FunctionModel:
    def answer(request: ModelRequest) -> Any:
        if request.tools == [] and "Conversation:" in request.messages[-1].content:
            replies.append(request.messages[-1].content)
            return text(f"SUMMARY #{len(replies)}")
        return text("fine")

    return FunctionModel(answer)


async def test_compression_summarizes_old_turns_archives_them_and_reads_them_back() -> None:
    prompts: list[str] = []
    model = summarizer(prompts)
    agent = Agent("a", instructions="x", model=model, tools=[read_result],
                  compression=Compression(max_tokens=1000))
    session = MemorySession()
    for i in range(6):
        await Runner.run(agent, f"turn {i}: " + "w" * 1200, session=session)
    compactions = [e for e in session.events if isinstance(e, ContextCompactedEvent)]
    assert compactions and compactions[0].archive_id == "archive-1"
    assert len(prompts) == len(compactions)  # one summary per archive, none repeated
    last = model.requests[-1].messages
    assert last[0].content.startswith("[Summary of this conversation") and (
        f"SUMMARY #{len(prompts)}" in last[0].content)
    assert last[-1].content.startswith("turn 5")
    # The archive reads back what it replaced.
    model.fn = lambda r: tool_call("read_result", {"call_id": "archive-1"}, id="r") \
        if r.messages[-1].role == "user" else text("ok")
    result = await Runner.run(agent, "what did I say first?", session=session)
    assert "turn 0: www" in result.tool_results[0].message.content
    assert_pairs_valid(model.requests[-1].messages)


async def test_a_summary_is_read_back_from_a_durable_log_not_made_again(tmp_path: Path) -> None:
    prompts: list[str] = []
    model = summarizer(prompts)
    agent = Agent("a", instructions="x", model=model,
                  compression=Compression(max_tokens=1000))
    db = tmp_path / "s.db"
    for i in range(4):
        await Runner.run(agent, f"turn {i}: " + "w" * 1200, session=SQLiteSession("c", db))
    made = len(prompts)
    assert made >= 1
    await Runner.run(agent, "short", session=SQLiteSession("c", db))  # a fresh object
    assert len(prompts) == made
    assert model.requests[-1].messages[0].content.startswith("[Summary of this conversation")


async def test_a_failing_summary_model_archives_without_a_summary_and_the_run_goes_on() -> None:
    def broken(request: ModelRequest) -> Any:
        raise RuntimeError("summarizer down")

    model = ScriptedModel([text(f"reply {i}") for i in range(5)])
    agent = Agent("a", instructions="x", model=model, tools=[read_result],
                  compression=Compression(max_tokens=1000, summary_model=FunctionModel(broken)))
    session = MemorySession()
    for i in range(5):
        result = await Runner.run(agent, f"turn {i}: " + "w" * 1200, session=session)
    assert result.final_output == "reply 4"
    failed = [e for e in session.events if isinstance(e, ContextCompactedEvent)]
    assert failed and all("RuntimeError: summarizer down" in e.error for e in failed)
    note = model.requests[-1].messages[0].content
    assert "without a summary (the summary model failed)" in note
    assert sum(len(m.content) for m in model.requests[-1].messages) < 1000 * 4


async def test_compression_counts_the_memory_note_in_its_budget() -> None:
    def play(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "user" and last.content.startswith("q"):
            return tool_call("search", {"q": last.content}, id=f"id-{last.content}")
        return text("ok")

    model = FunctionModel(play)
    agent = Agent("a", instructions="x", model=model, tools=[search], memory=Memory(),
                  compression=Compression(max_tokens=2500, summarize=False))
    store = MemorySession()
    await Runner.run(agent, "remember: " + "m" * 4000, session=store.open("old"), user_id="u")
    new = store.open("new")
    for q in ("q1", "q2", "q3"):
        await Runner.run(agent, q, session=new, user_id="u")
    first_of_q3 = next(r for r in model.requests
                       if r.messages[-1].content == "q3").messages
    assert first_of_q3[0].content.startswith("[Your memory")
    results = {m.tool_call_id: m.content for m in first_of_q3 if m.role == "tool"}
    assert results["id-q1"].startswith("[Result cleared")  # only because memory counts
    assert results["id-q2"].startswith("search q2")


def test_compression_options_are_checked() -> None:
    with pytest.raises(UserError, match="at least 100"):
        Compression(max_tokens=5)
    with pytest.raises(UserError, match="compression takes a Compression"):
        Agent("a", instructions="x", compression="small")  # type: ignore[arg-type]


# -- memory -----------------------------------------------------------------------------------


def echo_model() -> FunctionModel:
    return FunctionModel(lambda r: text(f"noted: {r.messages[-1].content}"))


async def test_memory_carries_across_sessions_of_one_user_only() -> None:
    model = echo_model()
    agent = Agent("a", instructions="x", model=model, memory=Memory(max_turns=5))
    first = MemorySession()
    await Runner.run(agent, "My name is Ann.", session=first, user_id="ann")
    await Runner.run(agent, "Still here.", session=first, user_id="ann")
    assert model.requests[-1].messages[0].content == "My name is Ann."  # no repeat from memory
    await Runner.run(agent, "Who am I?", session=first.open("second"), user_id="ann")
    recalled = model.requests[-1].messages[0]
    assert recalled.content.startswith("[Your memory of earlier conversations")
    assert "user: My name is Ann." in recalled.content and "a: noted: My name is Ann." in \
        recalled.content
    await Runner.run(agent, "Who am I?", session=first.open("third"), user_id="bob")
    assert model.requests[-1].messages[0].content == "Who am I?"


async def test_a_remembered_turn_and_what_is_recalled_of_it_are_bounded() -> None:
    @tool
    def step() -> str:
        """A step."""
        return "ok"

    model = ScriptedModel([[text(f"thinking {i}"), tool_call("step", {})] for i in range(22)]
                          + [text("final " + "z" * 5000), text("hi again")])
    agent = Agent("a", instructions="x", model=model, tools=[step], memory=Memory())
    store = MemorySession()
    await Runner.run(agent, "start", session=store, user_id="u")
    (turn,) = [e for e in store.open("u::a").events if isinstance(e, MemoryEvent)]
    assert len(turn.messages) == 20 and turn.messages[0].content == "start"
    assert turn.messages[-1].content.startswith("final") and len(turn.messages[-1].content) > 5000
    await Runner.run(agent, "back", session=store.open("next"), user_id="u")
    recalled = model.requests[-1].messages[0].content
    assert "z" * 1994 + " [...]" in recalled  # 2,000 characters, "final " included


async def test_sliding_window_keeps_the_last_turns(tmp_path: Path) -> None:
    model = echo_model()
    agent = Agent("a", instructions="x", model=model, memory=Memory(max_turns=2))
    db = tmp_path / "s.db"
    for i in range(4):
        await Runner.run(agent, f"fact {i}", session=SQLiteSession(f"s{i}", db), user_id="u")
    await Runner.run(agent, "recall", session=SQLiteSession("last", db), user_id="u")
    recalled = model.requests[-1].messages[0].content
    assert "fact 2" in recalled and "fact 3" in recalled and "fact 1" not in recalled
    assert SQLiteSession.exists("u::a", db)  # kept in the same store


async def test_summary_strategy_folds_older_turns_and_survives_a_failing_model() -> None:
    calls: list[str] = []

    def summarize(request: ModelRequest) -> Any:
        calls.append(request.messages[-1].content)
        if len(calls) == 1:
            raise RuntimeError("summary model down")
        return text("SUMMARY: facts 0 to 2")

    model = echo_model()
    agent = Agent("a", instructions="x", model=model,
                  memory=Memory(strategy="summary", max_turns=1,
                                summary_model=FunctionModel(summarize)))
    store = MemorySession()
    for i in range(4):
        await Runner.run(agent, f"fact {i}", session=store.open(f"s{i}"), user_id="u")
    log = store.open("u::a").events
    compactions = [e for e in log if isinstance(e, ContextCompactedEvent)]
    assert "summary model down" in compactions[0].error and compactions[0].end == 0
    assert compactions[-1].summary == "SUMMARY: facts 0 to 2" and compactions[-1].end == 3
    assert len([e for e in log if isinstance(e, MemoryEvent)]) == 4  # every turn kept
    await Runner.run(agent, "recall", session=store.open("last"), user_id="u")
    recalled = model.requests[-1].messages[0].content
    assert "SUMMARY: facts 0 to 2" in recalled and "fact 3" in recalled
    assert "fact 1" not in recalled


async def test_a_delegated_childs_memory_is_namespaced_by_its_path() -> None:
    child_model = echo_model()
    child = Agent("researcher", instructions="x", model=child_model, memory=Memory())
    parent_model = ScriptedModel([tool_call("researcher", {"query": "find A"}), text("done")])
    parent = Agent("lead", instructions="x", model=parent_model,
                   tools=[child.as_tool(report=False)])
    session = MemorySession()
    await Runner.run(parent, "go", session=session, user_id="u")
    (turn,) = [e for e in session.open("u::lead/researcher").events
               if isinstance(e, MemoryEvent)]
    assert [m.content for m in turn.messages][0] == "find A"
    assert "u::lead" not in session.store  # the parent keeps no memory


async def test_without_user_id_a_child_remembers_its_calls_in_the_same_top_session() -> None:
    child_model = echo_model()
    child = Agent("researcher", instructions="x", model=child_model, memory=Memory())
    parent = Agent("lead", instructions="x", model=ScriptedModel([
        tool_call("researcher", {"query": "find A"}), text("done"),
        tool_call("researcher", {"query": "find B"}), text("done"),
        tool_call("researcher", {"query": "find C"}), text("done")]),
        tools=[child.as_tool(report=False)])
    session = MemorySession()
    await Runner.run(parent, "one", session=session)
    await Runner.run(parent, "two", session=session)
    assert "user: find A" in child_model.requests[-1].messages[0].content
    await Runner.run(parent, "three", session=MemorySession())  # another top session
    assert child_model.requests[-1].messages[0].content == "find C"


async def test_a_swarm_target_can_store_the_request_not_the_transcript() -> None:
    from relayrace.teams.patterns import swarm

    model = ScriptedModel([text("triage says hi"),
                           [text("Passing you to billing."), tool_call("transfer_to_billing", {})],
                           text("billing answer")])
    billing = Agent("billing", instructions="x", model=model,
                    memory=Memory(store="request"))
    triage = Agent("triage", instructions="x", model=model, memory=Memory())
    team = swarm("desk", [triage, billing])
    session = MemorySession()
    await Runner.run(team, "hello", session=session, user_id="u")
    await Runner.run(team, "refund please", session=session, user_id="u")
    (turn,) = [e for e in session.open("u::billing").events if isinstance(e, MemoryEvent)]
    assert [m.content for m in turn.messages] == ["refund please", "billing answer"]
    triage_turns = [e for e in session.open("u::triage").events if isinstance(e, MemoryEvent)]
    assert [m.content for m in triage_turns[-1].messages] == [
        "refund please", "Passing you to billing.", "billing answer"]  # the run's transcript


async def test_concurrent_runs_of_one_user_both_land_in_memory(tmp_path: Path) -> None:
    async def slow(request: ModelRequest) -> Any:
        await asyncio.sleep(0.01)  # a model's latency: the runs interleave
        return text("ok")

    agent = Agent("a", instructions="x", model=FunctionModel(slow), memory=Memory())
    db = tmp_path / "s.db"
    await asyncio.gather(*[Runner.run(agent, f"in {i}", session=SQLiteSession(f"c{i}", db),
                                      user_id="u") for i in range(4)])
    turns = [e for e in await SQLiteSession("u::a", db).get_events()
             if isinstance(e, MemoryEvent)]
    assert sorted(t.messages[0].content for t in turns) == [f"in {i}" for i in range(4)]


def test_memory_options_are_checked() -> None:
    with pytest.raises(UserError, match="'sliding_window' or 'summary'"):
        Memory(strategy="vector")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="at least 1"):
        Memory(max_turns=0)
    with pytest.raises(UserError, match="memory takes a Memory"):
        Agent("a", instructions="x", memory={"strategy": "summary"})  # type: ignore[arg-type]
    with pytest.raises(UserError, match="user_id names whose memory"):
        Runner.run_sync(Agent("a", instructions="x"), "hi", user_id="")


# -- YAML -------------------------------------------------------------------------------------

YAML = """\
apiVersion: astromesh/v1
kind: Agent
metadata: {name: helper}
spec:
  prompts: {system: Help.}
  max_result_tokens: 3000
  read_result: true
  compression: {max_tokens: 6000, summarize: false}
  memory:
    conversational: {strategy: summary, max_turns: 4, store: request, backend: redis}
  tools:
    - {type: python, function: "ctx_tools:fetch", max_result_tokens: 500, compactable: true}
    - {type: agent, agent: writer, max_result_tokens: 900, protected: true}
---
apiVersion: relayrace/v1
kind: Agent
metadata: {name: writer}
spec:
  prompts: {system: Write.}
"""


def test_yaml_keys_build_limits_compression_and_memory(tmp_path: Path) -> None:
    from relayrace.config import load_team

    (tmp_path / "ctx_tools.py").write_text(
        "def fetch(url: str) -> str:\n    '''Fetch.'''\n    return url\n")
    (tmp_path / "team.yaml").write_text(YAML)
    loaded = load_team(tmp_path, model=ScriptedModel())
    agent = loaded["helper"]
    assert agent.max_result_tokens == 3000
    assert agent.compression == Compression(max_tokens=6000, summarize=False)
    assert agent.memory == Memory(strategy="summary", max_turns=4, store="request")
    fetch, writer, reader = agent.tools
    assert (fetch.max_result_tokens, fetch.compactable) == (500, True)
    assert (writer.max_result_tokens, writer.protected) == (900, True)
    assert reader is read_result
    assert [w.key for w in loaded.warnings] == ["spec.memory.conversational.backend"]


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("strategy: summary", "strategy: vector", "spec.memory.conversational.strategy"),
    ("max_tokens: 6000", "max_tokens: 5", "spec.compression.max_tokens"),
    ("max_result_tokens: 3000", "max_result_tokens: 0", "spec.max_result_tokens"),
    ("max_turns: 4", "max_turns: 0", "spec.memory.conversational.max_turns"),
    ("summarize: false}", "summary_model: {provider: opneai, model: m}}",
     "spec.compression.summary_model.provider: unknown provider 'opneai'"),
])
def test_yaml_bad_context_keys_are_located_errors(tmp_path: Path, old: str, new: str,
                                                  expected: str) -> None:
    from relayrace import ConfigError
    from relayrace.config import load_team

    (tmp_path / "ctx_tools.py").write_text("def fetch(url: str) -> str:\n    return url\n")
    (tmp_path / "team.yaml").write_text(YAML.replace(old, new))
    with pytest.raises(ConfigError, match=expected.replace(".", r"\.")):
        load_team(tmp_path, model=ScriptedModel())
