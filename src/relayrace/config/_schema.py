"""Generating the JSON Schema of the YAML team format from the pydantic models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from .models import Document

__all__ = ["DEFAULT_PATH", "SCHEMA_ID", "json_schema", "render"]

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
