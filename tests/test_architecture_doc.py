"""docs/architecture.md's five walks (a turn, a handoff, a delegation, a durable step, a served
request) name files and functions in the order a run reaches them: every file must exist,
every name must be defined, and every link to a line must land on the definition it names, so
the walks stay true as the code moves."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "relayrace"
DOC = (ROOT / "docs" / "architecture.md").read_text()
WALKS = ("One turn", "One handoff", "One delegation", "One durable step", "One served request")


def _walk_rows(title: str) -> list[tuple[str, str]]:
    section = DOC.split(f"### {title}\n", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| \d+ \| `([^`]+)` \| (.+) \|$", section, re.M)
    assert rows, f"the walk {title!r} has no table"
    return rows


def _definitions() -> tuple[set[str], dict[str, set[str]]]:
    """Module-level names, and each class's members (methods, fields, class attributes)."""
    names: set[str] = set()
    members: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                own = members.setdefault(node.name, set())
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        own.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        own.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        own.update(t.id for t in item.targets if isinstance(t, ast.Name))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names, members


def test_each_walk_names_files_that_exist_and_functions_they_define() -> None:
    names, members = _definitions()
    missing: list[str] = []
    for title in WALKS:
        for file, steps in _walk_rows(title):
            if not (SRC / file).is_file():
                missing.append(f"{title}: no file src/relayrace/{file}")
            for token in re.findall(r"`([^`]+)`", steps):
                name = token.split("(", 1)[0]
                if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
                    continue
                *owners, last = name.split(".")
                if owners:
                    cls = owners[-1]
                    # a class's member, or an attribute chain ending in a defined method
                    ok = last in members.get(cls, set()) or (
                        len(owners) > 1 and any(last in m for m in members.values()))
                else:
                    ok = name in names or any(name in m for m in members.values())
                if not ok:
                    missing.append(f"{title}: `{token}` ({file})")
    assert missing == []


def test_the_walks_start_at_the_entry_points_and_reach_the_engine() -> None:
    files = {title: [f for f, _ in _walk_rows(title)] for title in WALKS}
    assert files["One turn"][0] == "runner.py"
    assert files["One durable step"][0].startswith("durable/")
    assert files["One served request"][0].startswith("server/")
    for title in WALKS:
        assert any(f.startswith("_engine/") for f in files[title]), title


def test_each_link_to_a_line_lands_on_the_definition_it_names() -> None:
    # `name` ([file.py:N](../src/relayrace/path#LN)): line N of the file defines ``name``.
    links = re.findall(r"`([\w.]+)` \(\[[\w.]+:(\d+)\]\(\.\./src/relayrace/([\w/.]+)#L(\d+)\)",
                       DOC)
    assert len(links) > 40
    wrong = []
    for name, shown, path, line in links:
        text = (SRC / path).read_text().splitlines()[int(line) - 1].strip()
        defined = re.match(r"(?:async )?(?:def|class) (\w+)", text)
        if shown != line or defined is None or defined.group(1) != name.rsplit(".", 1)[-1]:
            wrong.append(f"{name} -> {path}:{line}: {text!r}")
    assert wrong == []
