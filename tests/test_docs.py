"""Every ```python block in the README and docs/ runs, so the documentation cannot rot."""

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
