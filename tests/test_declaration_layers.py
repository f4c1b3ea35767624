"""The declarations import downward only, type-checking imports included: no module of
``agents/``, ``teams/`` or the ``connect`` clients takes part in an import cycle, ``agents/``
imports neither ``teams/`` nor the engine, and the import contract counts every import."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).parent.parent
DECLARATIONS = ("relayrace.agents", "relayrace.teams", "relayrace.connect.mcp",
                "relayrace.connect.a2a")


def _declarations_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("relayrace", exclude_type_checking_imports=False, cache_dir=None)
    modules = {m for m in graph.modules if m.startswith(DECLARATIONS)}
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def _cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        for n in imports[m]:
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            part = []
            while True:
                n = stack.pop()
                part.append(n)
                if n == m:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for m in sorted(imports):
        if m not in index:
            visit(m)
    return found


def test_no_declaration_module_is_in_an_import_cycle() -> None:
    assert _cycles(_declarations_graph()) == []


def test_agents_import_neither_teams_nor_the_engine() -> None:
    graph = grimp.build_graph("relayrace", exclude_type_checking_imports=False, cache_dir=None)
    upward = [(m, n) for m in graph.modules if m.startswith("relayrace.agents")
              for n in graph.find_modules_directly_imported_by(m)
              if n.startswith(("relayrace.teams", "relayrace._engine", "relayrace.runner"))]
    assert upward == []


def test_the_contract_splits_the_declarations_and_counts_type_checking_imports() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert not config.get("exclude_type_checking_imports", False)
    contracts = config["contracts"]
    assert not any(c.get("exclude_type_checking_imports", False) for c in contracts)
    layers = contracts[0]["layers"]
    below_teams = layers[layers.index("teams") + 1].split(" : ")
    assert below_teams[0] == "agents" and {"connect.mcp", "connect.a2a"} <= set(below_teams)
    inner = next(c for c in contracts if c.get("containers") == ["relayrace.agents"])
    assert inner["exhaustive"] is True and inner["layers"][1] == "agent"
