"""Regular expressions of eval cases, matched in linear time (RE2), so that no pattern in a
case file can hang an eval run: ``(a+)+$`` against a long answer takes microseconds.

RE2 has no backreferences and no lookaround; a pattern using them is refused when the case is
read, with what to write instead.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import re2

__all__ = ["compile_pattern"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the refusal is our message, not a line on standard error


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (searched with ``.search(text)``); ``ValueError`` saying
    why RE2 refuses it."""
    try:
        re.compile(pattern)  # compiling is quick; only matching can backtrack for ever
    except re.error as exc:
        raise ValueError(f"regex {pattern!r} is invalid: {exc}") from None
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) \
            else str(exc)
        raise ValueError(
            f"regex {pattern!r} is not one RE2 matches in linear time ({reason}); write it "
            "without backreferences or lookaround (e.g. two regex checks, or contains)") \
            from None
