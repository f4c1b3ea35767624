"""The engine's shape, checked from its source: functions a reader can hold in view, and a
loop that holds its pieces rather than being them."""

from __future__ import annotations

import ast
from pathlib import Path

from relayrace._engine.loop import AgentLoop
from relayrace._engine.pieces import Pieces

ENGINE = Path(__file__).resolve().parents[1] / "src" / "relayrace" / "_engine"
LONGEST = 60


def functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in sorted(ENGINE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((path.name, node))
    return found


def test_no_engine_function_is_longer_than_sixty_lines() -> None:
    assert len(functions()) > 100  # the engine was read
    long = [f"{file}:{f.lineno} {f.name} ({f.end_lineno - f.lineno + 1} lines)"
            for file, f in functions() if (f.end_lineno or f.lineno) - f.lineno + 1 > LONGEST]
    assert long == []


def test_the_loop_holds_its_pieces_and_inherits_nothing() -> None:
    assert AgentLoop.__bases__ == (object,)
    assert not issubclass(AgentLoop, Pieces)
    assert "pieces" in AgentLoop.__slots__


def test_no_engine_function_takes_the_loop() -> None:
    # The helpers take the loop's pieces, never the loop (``AgentLoop`` drives; it is no
    # helper's argument). Its own methods take ``self``.
    taking = []
    for file, f in functions():
        args = [*f.args.posonlyargs, *f.args.args, *f.args.kwonlyargs]
        for arg in args:
            if arg.annotation is not None and "AgentLoop" in ast.unparse(arg.annotation):
                taking.append(f"{file}:{f.lineno} {f.name}({arg.arg})")
    assert taking == []
