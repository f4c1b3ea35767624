"""Static types: mypy --strict accepts typed uses of structured output and rejects wrong ones.

``tests/typing/structured_ok.py`` is also in pyproject's mypy ``files``; the rejected file is
checked here, since it must fail.
"""

from __future__ import annotations

from pathlib import Path

from mypy import api

TYPING = Path(__file__).parent / "typing"


def test_typed_output_uses_pass_and_wrong_ones_fail_mypy_strict() -> None:
    out, err, status = api.run(["--strict", "--no-error-summary",
                                str(TYPING / "structured_ok.py"),
                                str(TYPING / "structured_rejected.py")])
    assert err == ""
    errors = sorted(line.split(": error: ")[1] for line in out.splitlines()
                    if ": error: " in line)
    assert all("structured_rejected.py" in line for line in out.splitlines()), out
    assert errors == [
        '"Plan" has no attribute "summary"  [attr-defined]',
        '"str" has no attribute "steps"  [attr-defined]',
        'Incompatible types in assignment (expression has type "Plan", variable has type '
        '"str")  [assignment]',
    ], out
    assert status == 1
