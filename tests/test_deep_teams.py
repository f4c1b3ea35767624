"""Deep teams (issue 43 item 3): a handoff chain of 1,000 agents and a tree of 10,000 are
built, walked, checked, cloned, loaded from YAML, drawn and run, with no recursion over the
tree, and the work of building one and of a handoff does not grow with the depth."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relayrace import Agent, Runner, UserError
from relayrace.config import load_team
from relayrace.config.graph import agent_graph
from relayrace.server._graph import team_graph
from relayrace.testing import ScriptedModel, text, tool_call

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from deep_teams import chain  # noqa: E402 - the benchmark's own chain: both measure one shape

CHAIN = 1_000


def tree(fanout: int, depth: int) -> Agent[Any]:
    """A full tree: ``fanout`` children per agent, ``depth`` levels below the root; agent
    ``t`` has children ``t_0``, ``t_1``, ...; built level by level from the leaves."""
    level = [Agent(f"t_{'_'.join(map(str, p))}", instructions="Leaf.")
             for p in _paths(fanout, depth)]
    for d in range(depth - 1, -1, -1):
        level = [Agent(f"t_{'_'.join(map(str, p))}" if p else "t", instructions="Route.",
                       sub_agents=level[i * fanout:(i + 1) * fanout])
                 for i, p in enumerate(_paths(fanout, d))]
    (root,) = level
    return root


def _paths(fanout: int, depth: int) -> Iterator[tuple[int, ...]]:
    if depth == 0:
        yield ()
        return
    for p in _paths(fanout, depth - 1):  # recursion over the (small) depth of a test tree
        for i in range(fanout):
            yield (*p, i)


def test_a_chain_of_1000_is_built_walked_cloned_and_drawn() -> None:
    root = chain(CHAIN)
    names = [a.name for a in root.walk()]
    assert names == [f"a{i}" for i in range(CHAIN)]
    leaf = root.find_agent(f"a{CHAIN - 1}")
    assert leaf is not None and leaf.root is root and not leaf.sub_agents
    copy = root.clone(description="copied")
    assert [a.name for a in copy.walk()] == names and copy.description == "copied"
    assert all(a is not b for a, b in zip(copy.walk(), root.walk(), strict=True))
    assert copy.find_agent(f"a{CHAIN - 1}").root is copy  # type: ignore[union-attr]
    graph = agent_graph(root)
    assert len(graph.nodes) == CHAIN and len(graph.edges) == CHAIN - 1
    served = team_graph(root)
    assert len(served["nodes"]) == CHAIN and len(served["edges"]) == CHAIN - 1


def test_a_chain_of_1000_runs_every_handoff() -> None:
    model = ScriptedModel([*(tool_call(f"transfer_to_a{i}", {}) for i in range(1, CHAIN)),
                           text("answered at the end")])
    result = asyncio.run(Runner.run(chain(CHAIN, model), "go", max_turns=CHAIN + 1))
    assert result.final_output == "answered at the end"
    assert result.last_agent.name == f"a{CHAIN - 1}" and len(result.handoffs) == CHAIN - 1


def test_a_tree_of_10000_is_built_walked_drawn_and_run_to_a_leaf() -> None:
    root = tree(10, 4)  # 1 + 10 + 100 + 1,000 + 10,000 agents
    agents = list(root.walk())
    assert len(agents) == 11_111 == len({a.name for a in agents})
    assert agents[1].name == "t_0" and agents[2].name == "t_0_0"  # depth first, in order
    assert len(agent_graph(root).nodes) == 11_111
    route = ["t_3", "t_3_1", "t_3_1_4", "t_3_1_4_1"]
    model = ScriptedModel([*(tool_call(f"transfer_to_{n}", {}) for n in route), text("leaf")])
    result = asyncio.run(Runner.run(root, "go", model=model))
    assert result.final_output == "leaf" and result.last_agent.name == "t_3_1_4_1"
    assert [h.to_agent for h in result.handoffs] == route


def test_a_chain_of_1000_loads_from_yaml_and_runs(tmp_path: Path) -> None:
    docs = [f"apiVersion: relayrace/v1\nkind: Agent\nmetadata: {{name: a{i}}}\nspec:\n"
            f"  prompts: {{system: Route.}}\n"
            + (f"  sub_agents: [a{i + 1}]\n" if i < CHAIN - 1 else "")
            for i in range(CHAIN)]
    # A workflow whose step is a1, placed under a0 already: it gets a new chain of its own.
    docs.append("apiVersion: relayrace/v1\nkind: Workflow\nmetadata: {name: flow}\n"
                "spec: {type: sequential, steps: [a1]}\n")
    (tmp_path / "team.yaml").write_text("---\n".join(docs))
    team = load_team(tmp_path)
    head = team["a0"]
    assert [a.name for a in head.walk()] == [f"a{i}" for i in range(CHAIN)]
    step, placed = team["flow"].sub_agents[0], head.sub_agents[0]
    assert step is not placed and step.parent is team["flow"]
    assert [a.name for a in step.walk()] == [a.name for a in placed.walk()]
    assert not {id(a) for a in step.walk()} & {id(a) for a in head.walk()}
    model = ScriptedModel([*(tool_call(f"transfer_to_a{i}", {}) for i in range(1, CHAIN)),
                           text("done")])
    result = asyncio.run(Runner.run(head, "go", model=model, max_turns=CHAIN + 1))
    assert result.final_output == "done" and len(result.handoffs) == CHAIN - 1


def _calls(work: Callable[[], object]) -> int:
    """The Python function calls ``work`` makes (a count that does not move with the
    machine's load)."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def test_building_a_chain_is_linear_in_its_length() -> None:
    # Each agent's checks used to walk its whole subtree (with one generator per level on
    # the way down): a chain cost O(n^2) to build, or worse.
    small, large = _calls(lambda: chain(250)), _calls(lambda: chain(1_000))
    assert large <= 4.2 * small, (small, large)


def test_a_handoff_costs_the_same_at_any_depth() -> None:
    def run(length: int) -> Callable[[], object]:
        model = ScriptedModel([*(tool_call(f"transfer_to_a{i}", {}) for i in range(1, length)),
                               text("done")])
        root = chain(length, model)
        return lambda: asyncio.run(Runner.run(root, "go", max_turns=length + 1))

    short, long = _calls(run(100)), _calls(run(1_000))
    per_short, per_long = short / 99, long / 999
    assert per_long <= 1.1 * per_short, (per_short, per_long)


# -- the incremental checks agree with a walk of the whole tree ------------------------------


def _expected_error(name: str, mode: str, answers: Any, children: list[Agent[Any]]) -> str | None:
    """What the checks of an agent built over ``children`` refuse, found by walking every
    subtree (the definition the incremental checks must agree with)."""
    seen = {name}
    for agent in (a for c in children for a in c.walk()):
        if agent.name in seen:
            return f"Two agents named {agent.name!r} in the tree of {name!r}"
        seen.add(agent.name)
    if children:
        for other in (a for c in children for a in c.walk()):
            theirs = other.output_type if other.output is not None else None
            if other.mode == "chat" and theirs != answers:
                return f"Agent {name!r} answers with"
    return None


@st.composite
def _shapes(draw: st.DrawFn) -> list[tuple[str, str, Any, list[int]]]:
    """Agents in build order: (name, mode, output_type, indexes of earlier, unplaced ones)."""
    shapes: list[tuple[str, str, Any, list[int]]] = []
    free: list[int] = []
    for i in range(draw(st.integers(1, 14))):
        take = draw(st.lists(st.sampled_from(free), unique=True, max_size=3)) if free else []
        shapes.append((draw(st.sampled_from("abcdefghijklmnop")),
                       draw(st.sampled_from(["chat", "task"])),
                       draw(st.sampled_from([None, int, str])), take))
        free = [f for f in free if f not in take] + [i]
    return shapes


@settings(max_examples=200, deadline=None)
@given(_shapes())
def test_names_and_answer_types_are_checked_as_a_walk_of_the_tree_would(
        shapes: list[tuple[str, str, Any, list[int]]]) -> None:
    built: dict[int, Agent[Any]] = {}
    for i, (name, mode, output_type, take) in enumerate(shapes):
        children = [built[t] for t in take]
        answers = None if output_type in (None, str) else output_type
        expected = _expected_error(name, mode, answers, children)
        try:
            agent = Agent(name, instructions="x", mode=mode,  # type: ignore[arg-type]
                          output_type=output_type, sub_agents=children)
        except UserError as exc:
            assert expected is not None and str(exc).startswith(expected), (exc, expected)
            assert all(c.parent is None for c in children)  # a failed build changes no child
            return
        assert expected is None
        assert [a.name for a in agent.walk()][1:] == [a.name for c in children for a in c.walk()]
        built[i] = agent


def test_a_deep_duplicate_name_is_named() -> None:
    deep = chain(CHAIN)
    with pytest.raises(UserError, match="Two agents named 'a999' in the tree of 'top'"):
        Agent("top", instructions="x", sub_agents=[deep, Agent("a999", instructions="x")])
    assert deep.parent is None
