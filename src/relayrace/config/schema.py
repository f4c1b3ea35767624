"""The JSON Schema of the YAML team format, for editors: ``python -m relayrace.config.schema``.

Writes ``docs/agent.schema.json`` (or the path given as the first argument). A YAML file can
point at it with ``# yaml-language-server: $schema=<url or path>/agent.schema.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from .models import Document

__all__ = ["SCHEMA_ID", "json_schema", "main", "render"]

SCHEMA_ID = "https://relayrace.dev/schemas/agent.schema.json"
"""The schema's ``$id``."""
DEFAULT_PATH = Path("docs") / "agent.schema.json"


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one document (``kind: Agent``, ``Team`` or ``Workflow``)."""
    schema = TypeAdapter(Document).json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "relayrace team document",
        "description": ("One YAML document of a relayrace team (apiVersion relayrace/v1 or "
                        "astromesh/v1). Keys marked x-relayrace-ignored are Astromesh keys "
                        "that relayrace reads and ignores with a warning."),
        **schema,
    }


def render() -> str:
    """The schema as the text written to ``docs/agent.schema.json``."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


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
