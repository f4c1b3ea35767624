"""Usage per model, per run: ``RunResult.usage.per_model`` and ``per_agent_model`` say which
model served how many requests and tokens in this run, children and fallbacks included."""

from __future__ import annotations

from pathlib import Path

from provider_helpers import FakeServer, openai_model, replay
from relayrace import Agent, FallbackModel, ModelProviderError, Runner, Usage
from relayrace.models import ModelRequest
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call

PAYLOADS = Path(__file__).parent / "payloads"


def _down(name: str) -> FunctionModel:
    def answer(request: ModelRequest) -> BaseException:
        return ModelProviderError("HTTP 503", status_code=503)

    return FunctionModel(answer, name=name)


def _tokens(usage: Usage) -> tuple[int, int]:
    return usage.input_tokens, usage.output_tokens


async def test_per_model_counts_this_run_only_and_names_the_fallback_that_served() -> None:
    backup = ScriptedModel(["one", "two"], name="backup")
    model = FallbackModel(_down("primary"), backup)
    helper = Agent("helper", instructions="Help.", model=model)
    first = await Runner.run(helper, "hi")
    second = await Runner.run(helper, "again")
    for result in (first, second):
        usage = result.usage
        assert list(usage.per_model) == ["backup"]   # the primary failed: it served nothing
        assert usage.per_model["backup"].requests == 1
        assert _tokens(usage.per_model["backup"]) == _tokens(usage.total)
        assert usage.per_agent_model == {"helper": {"backup": usage.per_model["backup"]}}
    # The model object's own tally spans every run that used it.
    assert model.usage_by_model["backup"].requests == 2


async def test_children_are_counted_per_agent_and_per_model() -> None:
    big = ScriptedModel([tool_call("researcher", {"query": "find the invoice"}),
                         text("It is paid.")], name="big")
    small = ScriptedModel(["INV-7 is paid."], name="small")
    researcher = Agent("researcher", instructions="Research.",
                       model=FallbackModel(_down("flaky"), small))
    coordinator = Agent("coordinator", instructions="Coordinate.", model=big,
                        tools=[researcher.as_tool(report=False)])
    usage = (await Runner.run(coordinator, "is INV-7 paid?")).usage
    assert {name: u.requests for name, u in usage.per_model.items()} == {"big": 2, "small": 1}
    assert {path: {name: u.requests for name, u in models.items()}
            for path, models in usage.per_agent_model.items()} == {
        "coordinator": {"big": 2}, "coordinator/researcher": {"small": 1}}
    for path, models in usage.per_agent_model.items():
        (used,) = models.values()
        assert _tokens(used) == _tokens(usage.per_agent[path])
    assert sum(u.total_tokens for u in usage.per_model.values()) == usage.total.total_tokens


async def test_a_refusal_moved_on_from_is_counted_for_the_model_that_refused() -> None:
    server = FakeServer(replay(PAYLOADS / "openai/refusal.json"))
    refusing = openai_model(server)
    backup = ScriptedModel(["Here is the answer."], name="backup")
    result = await Runner.run(
        Agent("helper", instructions="Help.", model=FallbackModel(refusing, backup)), "hi")
    usage = result.usage
    assert usage.total.requests == 1   # the agent asked once
    assert {name: u.requests for name, u in usage.per_model.items()} == {
        refusing.name: 1, "backup": 1}
    assert usage.per_model[refusing.name].output_tokens > 0   # the refusal was paid for
    assert tuple(map(sum, zip(*(_tokens(u) for u in usage.per_model.values()),
                              strict=True))) == _tokens(usage.total)


async def test_the_usage_table_shows_the_models_of_an_agent_served_by_several() -> None:
    from rich.console import Console

    from relayrace.cli._render import usage_table

    server = FakeServer(replay(PAYLOADS / "openai/refusal.json"))
    refusing = openai_model(server)
    backup = ScriptedModel(["Here is the answer."], name="backup")
    result = await Runner.run(
        Agent("helper", instructions="Help.", model=FallbackModel(refusing, backup)), "hi")
    console = Console(width=120, record=True)
    console.print(usage_table(result.usage))
    rows = [[cell.strip() for cell in line.split("│")[1:-1]]
            for line in console.export_text().splitlines() if line.startswith("│")]
    assert [r[:2] for r in rows] == [["helper", "1"], ["backup", "1"], [refusing.name, "1"],
                                     ["total", "1"]]


async def test_a_streamed_run_counts_the_model_that_streamed_its_answer() -> None:
    backup = ScriptedModel(["streamed"], name="backup")
    stream = Runner.stream(Agent("helper", instructions="Help.",
                                 model=FallbackModel(_down("primary"), backup)), "hi")
    async for _ in stream:
        pass
    assert stream.result is not None
    assert {name: u.requests for name, u in stream.result.usage.per_model.items()} == {
        "backup": 1}
