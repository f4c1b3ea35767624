"""Hostile YAML team files: each ends as a ConfigError naming the file, quickly and in bounds."""

from __future__ import annotations

import asyncio
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from relayrace import ConfigError, Runner, UserError
from relayrace.cli import app
from relayrace.config import load_team
from relayrace.testing import ScriptedModel, text


def _laughs(anchor: str, levels: int = 9) -> str:
    """Anchors ``l0..l<levels>``, each ten aliases of the previous: 10**levels values."""
    lines = [f"{anchor}0: &{anchor}0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{anchor}{i}: &{anchor}{i} [" + ", ".join([f"*{anchor}{i - 1}"] * 10) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines)


_AGENT = "apiVersion: relayrace/v1\nkind: Agent\nmetadata:\n  name: a\nspec:\n" \
         "  prompts:\n    system: hi\n"

_TEAM_WITH_LAUGHS_IN_RULE = textwrap.dedent("""\
    apiVersion: relayrace/v1
    kind: Team
    metadata:
      name: t
      x-laughs:
    {laughs}
    spec:
      agents: [a]
      rules:
        - when: {{context_equals: {{key: k, value: *l9}}}}
          then: {{agent: a}}
    """)

HOSTILE: dict[str, tuple[str, str]] = {
    "laughs in a rule": (
        _TEAM_WITH_LAUGHS_IN_RULE.format(laughs=textwrap.indent(_laughs("l"), "        ")),
        "aliases expand"),
    "laughs in tool parameters": (
        _laughs("l") + "\n---\n" + _AGENT
        + "  tools:\n    - type: agent\n      agent: a\n      parameters: *l9\n",
        "aliases expand"),
    "laughs in a document": (_laughs("l") + "\n", "aliases expand"),
    "a long text repeated through aliases": (
        "s: &s " + "x" * 200_000 + "\n" + "\n".join(
            f"{k}: &{k} [" + ", ".join([f"*{prev}"] * 10) + "]"
            for prev, k in (("s", "a"), ("a", "b"), ("b", "c"), ("c", "d"))) + "\n",
        "aliases expand this value by more than"),
    "deep brackets": ("x: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested deeper than"),
    "deep braces": ("x: " + "{a: " * 5_000 + "1" + "}" * 5_000 + "\n", "nested deeper than"),
    "deep through aliases": (
        "\n".join([f"d0: &d0 {'[' * 60}1{']' * 60}"]
                  + [f"d{i}: &d{i} {'[' * 60}*d{i - 1}{']' * 60}" for i in range(1, 4)]) + "\n",
        "deeper than"),
    "alias inside itself": ("x: &a [1, *a]\n", "contains it"),
    "NUL byte": (_AGENT.replace("kind: Agent", "kind: Ag\x00ent"), "#x0000"),
    "5000-digit integer": (_AGENT + "  orchestration:\n    max_iterations: " + "9" * 5000 + "\n",
                           "too long to read"),
    "month 13": ("x: 2024-13-01\n", "month must be in 1..12"),
    "undefined alias": ("x: *nowhere\n", "undefined alias"),
    "template nested 3,000 deep": (
        _AGENT.replace("system: hi", "system: '{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}'"),
        "spec.prompts.system: the template nests its expressions too deeply"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_file_is_a_located_config_error(tmp_path: Path, name: str) -> None:
    body, expected = HOSTILE[name]
    path = tmp_path / "team.yaml"
    path.write_text(body)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(ConfigError) as info:
            load_team(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Refused within 50 MB: an expansion (aliases, nesting) would have to build its result.
    # The time is only a guard against a hang, loose enough for a loaded CI machine (this
    # takes well under a second alone, and 6 s under tracemalloc with both cores busy).
    assert peak < 50_000_000
    assert time.monotonic() - started < 60
    message = str(info.value)
    assert message.startswith(f"{path}:") and expected in message, message


def test_anchors_and_aliases_within_bounds_still_load(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(_AGENT
                    + "  tools:\n"
                    + "    - {type: agent, agent: b, name: one,\n"
                    + "       rate_limit: &limit {max_calls: 2, window_seconds: 60}}\n"
                    + "    - {type: agent, agent: c, name: two, rate_limit: *limit}\n"
                    + "---\n" + _AGENT.replace("name: a", "name: b")
                    + "---\n" + _AGENT.replace("name: a", "name: c"))
    one, two = load_team(path)["a"].tools
    assert one.rate_limit == two.rate_limit is not None


@pytest.mark.parametrize(("module", "code", "expected"), [
    ("raises_value_error", "raise ValueError('bad tool module')",
     "importing 'raises_value_error' failed: ValueError: bad tool module"),
    ("calls_exit", "import sys\nsys.exit(0)", "importing 'calls_exit' failed: SystemExit: 0"),
    ("raises_runtime_error", "raise RuntimeError('boom')",
     "importing 'raises_runtime_error' failed: RuntimeError: boom"),
])
def test_tool_module_failing_on_import(tmp_path: Path, module: str, code: str,
                                       expected: str) -> None:
    (tmp_path / f"{module}.py").write_text(code + "\n")
    (tmp_path / "a.yaml").write_text(
        _AGENT + f"  tools:\n    - type: python\n      function: {module}:f\n")
    message = str(pytest.raises(ConfigError, load_team, tmp_path).value)
    assert f"a.yaml:10: spec.tools[0].function: {expected}" in message, message
    result = CliRunner().invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 1 and expected in result.output, result.output


def test_validate_fails_on_a_hostile_file(tmp_path: Path) -> None:
    (tmp_path / "team.yaml").write_text("x: " + "[" * 20_000 + "]" * 20_000 + "\n")
    result = CliRunner().invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 1 and "nested deeper than 100 levels" in result.output


def test_hostile_instructions_in_yaml_fail_the_run_naming_the_template(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(_AGENT.replace("system: hi", "system: \"{{ 'A' * 10**9 }}\""))
    agent = load_team(tmp_path, model=ScriptedModel([text("never asked")]))["a"]
    with pytest.raises(UserError, match=r"Instructions template \"\{\{ 'A' \* 10\*\*9 \}\}\" "
                                        "went past a rendering limit"):
        asyncio.run(Runner.run(agent, "hello"))
