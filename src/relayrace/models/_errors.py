"""A provider's failures as relayrace errors that say what to do: the one mapping both
adapters use (``anthropic``, ``openai``), each giving its SDK's error types and its words."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..core.exceptions import ModelProviderError, ModelTimeout
from ._common import GaveUp, deadline, tries_text
from .interface import ModelSettings

__all__ = ["Provider", "mapped_errors", "provider_error"]

# Statuses the SDKs retry (with every 5xx): their hint says how many tries were made.
_RETRIED = frozenset({408, 409, 429})


@dataclass(frozen=True, slots=True)
class Provider:
    """How one provider's SDK fails, and what relayrace says of it."""

    name: str
    """As in ``ModelProviderError.provider``."""
    api_error: type[Exception]
    """The SDK's root error; ``timeout_error`` and ``connection_error`` are among it."""
    timeout_error: type[Exception]
    connection_error: type[Exception]
    status: Callable[[Any], tuple[int | None, str, str]]
    """An API error's HTTP status (``None``: none), the provider's own message, and where it
    happened, added to the model's place (" (mid-stream)", or "")."""
    hints: Mapping[int, str]
    """What to do about a status, by status."""
    refused: str
    """The hint for a 4xx the table does not list."""
    connect: str
    """What to check when the server cannot be reached."""
    unusable: str
    """What to do when responses keep arriving unusable."""


@contextmanager
def mapped_errors(provider: Provider, where: str, retries: int,
                  settings: ModelSettings) -> Iterator[None]:
    """Turn SDK and transport failures of a request to ``where`` into relayrace errors."""
    try:
        yield
    except provider.api_error as e:
        raise provider_error(provider, e, where, retries) from e
    except TimeoutError as e:
        raise ModelTimeout(
            f"{where} did not finish the request within its deadline of "
            f"{deadline(settings):g} s: raise ModelSettings.deadline or retry later.",
            provider=provider.name) from e
    except GaveUp as e:
        raise ModelProviderError(
            f"{where} sent a response that could not be used ({e}), on {tries_text(e.tries)}: "
            f"{provider.unusable}", provider=provider.name) from e


def provider_error(provider: Provider, e: Exception, where: str,
                   retries: int) -> ModelProviderError:
    """The relayrace error for the SDK error ``e`` of a request to ``where``, after
    ``retries`` retries."""
    if isinstance(e, provider.timeout_error):
        return ModelTimeout(
            f"{where} timed out (after {retries} retries): raise the timeout "
            "(ModelSettings.timeout or timeout=) or retry later.", provider=provider.name)
    if isinstance(e, provider.connection_error):
        return ModelProviderError(f"Could not connect to {where}: {provider.connect}",
                                  provider=provider.name)
    status, detail, at = provider.status(e)
    where += at
    if status is None:
        return ModelProviderError(f"{where} failed: {detail}", provider=provider.name)
    hint = provider.hints.get(status) or (
        "a server error, usually transient: retry later" if status >= 500 else provider.refused)
    if status in _RETRIED or status >= 500:
        hint += f" (gave up after {retries} retries)"
    return ModelProviderError(f"{where} returned HTTP {status}: {detail} - {hint}.",
                              status_code=status, provider=provider.name)
