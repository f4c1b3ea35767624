"""Every ```python block in the README and docs/ runs, and so do the YAML guide's commands
and its script example, so the documentation cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, code in enumerate(FENCE.findall(doc.read_text())):
            found.append((f"{doc.name}#{i + 1}", code))
    return found


BLOCKS = _blocks()


def test_the_readme_has_examples() -> None:
    assert sum(name.startswith("README") for name, _ in BLOCKS) >= 4


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_doc_example_runs(name: str, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # examples use paths relative to the repository
    exec(compile(code, name, "exec"), {"__name__": f"docs_{name}"})


def test_the_cli_section_says_how_to_get_the_command_and_what_it_exits_with() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Command line") :]
    section = section[: section.index("\n## ")]
    # Its commands assume `relayrace` on the PATH: it says how to get it there.
    before = section[: section.index("```sh")]
    assert "source .venv/bin/activate" in before and ".venv/bin/relayrace" in before
    assert "pip install /path/to/relayrace" in before
    from relayrace.cli import EXIT_APPROVAL

    assert f"**{EXIT_APPROVAL} the run stopped for approval**" in section


def _commands(doc: Path) -> list[str]:
    """The ``relayrace`` command lines of a doc's ```sh blocks (continuations joined,
    comments dropped)."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", doc.read_text(), re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("relayrace "):
                commands.append(line)
    return commands


YAML_COMMANDS = _commands(ROOT / "docs" / "yaml.md")


@pytest.mark.parametrize("command", YAML_COMMANDS)
def test_the_yaml_guides_commands_run(command: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex
    import shutil

    from typer.testing import CliRunner

    from relayrace.cli import app

    words = shlex.split(command)[1:]
    if "openai:gpt-4o-mini" in words:
        pytest.skip("the same run on a real model: it needs OPENAI_API_KEY")
    monkeypatch.chdir(ROOT)
    svg = tmp_path / "team.svg"
    words = [str(svg) if w == "team.svg" else w for w in words]
    result = CliRunner(env={"RELAYRACE_DB": str(tmp_path / "s.db")}).invoke(app, words)
    if "--svg" in words and shutil.which("dot") is None:  # said, with the Mermaid text
        assert result.exit_code == 1 and result.stdout.startswith("flowchart"), result.output
        return
    assert result.exit_code == 0, result.output
    if words[0] == "run":
        assert "answered by lead" in result.stdout


def test_the_yaml_guide_runs_the_team_offline_and_its_script_example_loads(
        tmp_path: Path) -> None:
    from relayrace.config import load_script

    assert any("--model scripted:" in c for c in YAML_COMMANDS)
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "yaml.md").read_text(),
                        re.DOTALL)
    [script] = [b for b in blocks if b.startswith("turns:")]
    (tmp_path / "script.yaml").write_text(script)
    model = load_script(tmp_path / "script.yaml")
    assert len(model.turns) == 4 and list(model.by_agent) == ["writer"]
