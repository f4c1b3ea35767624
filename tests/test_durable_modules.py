"""`relayrace.durable` in modules of one concept each, its public names unchanged (fast: no
worker, no database)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("dbos")

import relayrace.durable as durable  # noqa: E402
from relayrace.durable import results, runs, workflow  # noqa: E402

DURABLE = Path(durable.__file__).parent


@pytest.mark.parametrize("path", sorted(DURABLE.glob("*.py")), ids=lambda p: p.name)
def test_each_durable_module_stays_near_500_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 500


def test_the_package_keeps_its_public_names_each_from_its_concepts_module() -> None:
    assert durable.__all__ == ["DurableResult", "DurableRunner", "RunInfo", "RunStatus",
                               "SubmittedRun"]
    assert durable.DurableRunner is runs.DurableRunner
    for name in ("DurableResult", "RunInfo", "SubmittedRun"):
        assert getattr(durable, name).__module__ == results.__name__
    # The workflow every run is, and its steps, live beside the runner, not in it.
    assert workflow.WORKFLOW == "relayrace.run"
    assert runs._DbosSteps.__module__ == workflow.__name__


def test_a_workflow_output_comes_back_as_the_same_result() -> None:
    from relayrace import Agent
    from relayrace.sessions.store import open_store

    value = {"run_id": "r", "session_id": "s", "status": "completed", "output": "hi",
             "last_agent": "a", "reason": "", "pending": None,
             "usage": {"requests": 1, "input_tokens": 3, "output_tokens": 2, "newer": 9},
             "a_field_of_a_newer_worker": 1}
    got = results.result_of(value, Agent("a", instructions="."), open_store("memory://"))
    assert (got.output, got.last_agent, got.usage.requests) == ("hi", "a", 1)
