"""Model providers behind one small async interface, and the one parser of ``provider:model``.

Layer: a port. Imports only `core`; the declarations, the engine and the entry points
import it.
"""

from __future__ import annotations

import os

from ..core._suggest import closest
from ..core.exceptions import UserError
from .fallback import FALLBACK_KINDS, FallbackKind, FallbackModel
from .interface import (
    DEFAULT_DEADLINE,
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputMode,
    OutputSchema,
    ToolDefinition,
)

__all__ = [
    "DEFAULT_DEADLINE",
    "FALLBACK_KINDS",
    "KNOWN_PROVIDERS",
    "FallbackKind",
    "FallbackModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputMode",
    "OutputSchema",
    "ToolDefinition",
    "infer_model",
]

KNOWN_PROVIDERS = ("anthropic", "lmstudio", "ollama", "openai", "vllm")
"""Providers a ``provider:model`` string may name. All but ``anthropic`` speak the OpenAI API."""

# Default endpoints of local OpenAI-compatible servers, overridable by <PROVIDER>_BASE_URL.
_LOCAL_BASE_URLS = {
    "ollama": "http://localhost:11434/v1",
    "lmstudio": "http://localhost:1234/v1",
    "vllm": "http://localhost:8000/v1",
}

_cache: dict[str, Model] = {}


def infer_model(model: Model | str) -> Model:
    """Return ``model`` itself, or the model a ``"provider:model"`` string names.

    ``openai:gpt-4o-mini`` reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (so it reaches any
    OpenAI-compatible server); ``anthropic:claude-sonnet-4-5`` reads ``ANTHROPIC_API_KEY``;
    ``ollama:``, ``lmstudio:`` and ``vllm:`` point the OpenAI adapter at the local server's
    usual address. Instances are cached per string, so runs share one HTTP client.
    """
    if isinstance(model, Model):
        return model
    cached = _cache.get(model)
    if cached is not None:
        return cached
    provider, sep, name = model.partition(":")
    if not sep or not name or provider not in KNOWN_PROVIDERS:
        close = closest(provider, KNOWN_PROVIDERS) if sep and name else None
        raise UserError(
            f"Model {model!r} is not of the form 'provider:model' with provider one of "
            f"{', '.join(KNOWN_PROVIDERS)}; " + (
                f"did you mean '{close}:{name}'?" if close else
                "e.g. 'openai:gpt-4o-mini' or 'anthropic:claude-sonnet-4-5'.")
        )
    result: Model
    if provider == "anthropic":
        from .anthropic import AnthropicModel

        result = AnthropicModel(name)
    elif provider == "openai":
        from .openai import OpenAIChatModel

        result = OpenAIChatModel(name)
    else:
        from .openai import OpenAIChatModel

        base_url = os.environ.get(f"{provider.upper()}_BASE_URL", _LOCAL_BASE_URLS[provider])
        # `max_tokens`, not `max_completion_tokens`: every local server knows the older field.
        result = OpenAIChatModel(name, base_url=base_url, api_key=os.environ.get(
            f"{provider.upper()}_API_KEY", provider), max_tokens_field="max_tokens")
    _cache[model] = result
    return result
