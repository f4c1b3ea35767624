"""The YAML format's vocabulary: the versions, providers, patterns and tool types it names,
the strict base of its models (an unknown key is an error), and `astromesh_only`, the mark of
an Astromesh key that is read, reported as ignored, and has no effect.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["API_VERSIONS", "IGNORED_MARK", "IGNORED_NOTE", "MODEL_PROVIDERS", "PROVIDER_ALIASES",
           "SUPPORTED_PATTERNS", "UNSUPPORTED_PATTERNS", "UNSUPPORTED_TOOL_TYPES", "Strict",
           "astromesh_only"]

API_VERSIONS = ("relayrace/v1", "astromesh/v1")
"""Accepted ``apiVersion`` values."""
SUPPORTED_PATTERNS = ("react", "supervisor", "swarm", "plan_and_execute", "parallel_fan_out",
                      "pipeline")
"""Orchestration patterns relayrace implements."""
UNSUPPORTED_PATTERNS = ("glyph",)
"""Astromesh patterns relayrace reads but replaces with ``react`` (with a warning)."""
UNSUPPORTED_TOOL_TYPES = ("builtin", "client")
"""Astromesh tool types relayrace reads but skips (with a warning); so is an ``mcp`` tool that
names no command or url (an Astromesh server reference)."""
MODEL_PROVIDERS = ("openai", "anthropic", "ollama", "vllm", "lmstudio",
                   "openai_compat", "openai-compatible")
"""Valid ``spec.model.primary.provider`` values (the last two mean ``openai``)."""
PROVIDER_ALIASES = {"openai_compat": "openai", "openai-compatible": "openai"}
"""Provider names of Astromesh that relayrace reads as another provider."""
IGNORED_MARK = "x-relayrace-ignored"
"""JSON Schema marker of a key that is accepted and ignored with a warning."""

IGNORED_NOTE = "Astromesh key not supported by relayrace: accepted and ignored with a warning."


def astromesh_only(what: str, *, alias: str | None = None) -> Any:
    """A field that is read, reported as ignored, and otherwise has no effect."""
    return Field(default=None, alias=alias, description=f"{what} {IGNORED_NOTE}",
                 json_schema_extra={IGNORED_MARK: True})


class Strict(BaseModel):
    """A model of the format: a key it does not declare is an error."""

    model_config = ConfigDict(extra="forbid")
