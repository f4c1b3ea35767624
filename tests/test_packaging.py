"""What `pip install 'relayrace[...]'` brings: `all` is every optional part."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# Extras that are not parts of relayrace: the developer tools and the workers demo's set.
NOT_PARTS = {"all", "dev", "demo-workers"}


def _extras() -> dict[str, list[str]]:
    data = tomllib.loads(PYPROJECT.read_text())
    extras: dict[str, list[str]] = data["project"]["optional-dependencies"]
    return extras


def _expand(name: str, extras: dict[str, list[str]]) -> set[str]:
    """The requirement names an extra installs, following `relayrace[...]` self-references."""
    names: set[str] = set()
    for requirement in extras[name]:
        own = re.fullmatch(r"relayrace\[([\w,-]+)\]", requirement)
        if own:
            for part in own.group(1).split(","):
                names |= _expand(part, extras)
        else:
            names.add(re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower())
    return names


def test_all_installs_every_optional_part() -> None:
    extras = _extras()
    parts = sorted(set(extras) - NOT_PARTS)
    known = {"openai", "anthropic", "otel", "mcp", "a2a", "server", "postgres", "durable"}
    assert known <= set(parts)
    everything = _expand("all", extras)
    for part in parts:
        missing = _expand(part, extras) - everything
        assert not missing, f"relayrace[all] lacks {part}'s {sorted(missing)}"


def test_dev_installs_all() -> None:
    extras = _extras()
    assert _expand("all", extras) <= _expand("dev", extras)
