"""The JSON Schema of the YAML team format, for editors: ``python -m relayrace.config.schema``.

Writes ``docs/agent.schema.json`` (or the path given as the first argument). A YAML file can
point at it with ``# yaml-language-server: $schema=<url or path>/agent.schema.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ._schema import DEFAULT_PATH, SCHEMA_ID, json_schema, render

__all__ = ["SCHEMA_ID", "json_schema", "main", "render"]


def main(argv: list[str] | None = None) -> int:
    """Write the schema to ``argv[0]`` (default ``docs/agent.schema.json``)."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else DEFAULT_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
