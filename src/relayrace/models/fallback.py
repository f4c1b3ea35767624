"""A model that asks the next of several models when one fails."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Literal, TypeAlias, get_args

from ..core.exceptions import (
    AllModelsFailed,
    ModelProviderError,
    ModelRefused,
    ModelTimeout,
    UserError,
)
from ..core.usage import Usage
from .interface import Model, ModelRequest, ModelResponse, OutputDelta, StatusUpdate

__all__ = ["FALLBACK_KINDS", "FallbackKind", "FallbackModel"]

FallbackKind: TypeAlias = Literal["error", "timeout", "refusal"]
"""A failure a ``FallbackModel`` may move on from: ``"error"``, a ``ModelProviderError``
(HTTP error, rate limit, unreadable reply) after the model's own retries; ``"timeout"``, a
``ModelTimeout`` or ``TimeoutError`` (the request's timeout or deadline); ``"refusal"``, a
response whose ``refusal`` is set (the provider's own refusal signal)."""

FALLBACK_KINDS: tuple[FallbackKind, ...] = get_args(FallbackKind)
"""Every failure kind, the default of ``FallbackModel(on=...)``."""


class FallbackModel(Model):
    """Asks ``primary``, then each of ``others`` in turn while the one asked fails in a way
    ``on`` names; the first answer is the response.

    Failures of another kind (a ``ModelBehaviorError``, a bug) are raised at once; when every
    model fails, ``AllModelsFailed`` lists each one's failure.
    Models may be given as ``"provider:model"`` strings. Each model keeps its own retries,
    timeout and deadline, so a request may take up to the sum of their deadlines.

    ``ModelResponse.model`` names the model that answered (as its provider names it), which
    the run's message events and model spans show; ``ModelResponse.served`` says what each
    model used for the request, refused answers included, and a refused answer's tokens are
    also added to the usage of the response returned, so run budgets and per-agent usage count
    them. A run's figures per model are in ``RunResult.usage.per_model`` (and
    ``per_agent_model``). A request that failed with an error reports no usage.

    ``stream()`` moves on only while no text has been yielded: once a model has streamed
    text, its failure is raised as it is (a refusal as ``ModelRefused``), since another
    model's answer would repeat or contradict text already passed on.
    """

    def __init__(self, primary: Model | str, *others: Model | str,
                 on: Iterable[FallbackKind] | FallbackKind = FALLBACK_KINDS) -> None:
        from . import infer_model  # the package imports this module

        kinds: tuple[str, ...] = (on,) if isinstance(on, str) else tuple(on)
        unknown = [k for k in kinds if k not in FALLBACK_KINDS]
        if unknown or not kinds:
            raise UserError(
                f"FallbackModel(on={on!r}): name one or more failure kinds to move on from, "
                f"out of {', '.join(map(repr, FALLBACK_KINDS))}"
                + (f"; unknown: {', '.join(map(repr, unknown))}." if unknown else "."))
        self.models: tuple[Model, ...] = tuple(infer_model(m) for m in (primary, *others))
        """The models, in the order they are asked."""
        self.on: frozenset[str] = frozenset(kinds)
        """The failure kinds that move on to the next model."""
        self.name = "fallback(" + ", ".join(m.name for m in self.models) + ")"
        self.usage_by_model: dict[str, Usage] = {}
        """Usage of the responses each model gave (refused ones included), by model name,
        across every request this object ever served: every run, and every agent sharing
        it. For one run's figures, read ``RunResult.usage.per_model`` instead."""

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask each model in turn until one answers without a failure ``on`` names."""
        failures: list[tuple[str, Exception]] = []
        refused = Usage()
        served: dict[str, Usage] = {}
        for model in self.models:
            try:
                response = await model.request(request)
            except Exception as e:
                if self._kind(e) not in self.on:
                    raise
                failures.append((model.name, e))
                continue
            if self._refused(model, response, refused, served):
                failures.append((model.name, ModelRefused(model.name, response.refusal or "")))
                continue
            return _answer(model, response, refused, served)
        raise AllModelsFailed(failures)

    async def stream(
        self, request: ModelRequest
    ) -> AsyncIterator[str | OutputDelta | StatusUpdate | ModelResponse]:
        """Stream the first model that answers; move on only before any text was yielded."""
        failures: list[tuple[str, Exception]] = []
        refused = Usage()
        served: dict[str, Usage] = {}
        for model in self.models:
            response: ModelResponse | None = None
            streamed = False
            try:
                async for item in model.stream(request):
                    if isinstance(item, ModelResponse):
                        response = item
                    elif isinstance(item, StatusUpdate):  # progress, no part of the answer
                        yield item
                    else:  # text, or a piece of a structured output: passed on
                        streamed = streamed or bool(item if isinstance(item, str) else item.json)
                        yield item
            except Exception as e:
                if streamed or self._kind(e) not in self.on:
                    raise
                failures.append((model.name, e))
                continue
            if response is not None and self._refused(model, response, refused, served):
                refusal = ModelRefused(model.name, response.refusal or "")
                if streamed:
                    raise refusal
                failures.append((model.name, refusal))
                continue
            if response is not None:
                yield _answer(model, response, refused, served)
            return
        raise AllModelsFailed(failures)

    def _refused(self, model: Model, response: ModelResponse, refused: Usage,
                 served: dict[str, Usage]) -> bool:
        """Count ``response`` for ``model`` (and in ``served``, this request's tally by the
        model that served it); whether it is a refusal to move on from (its usage then goes
        into ``refused``)."""
        used = self.usage_by_model.get(model.name)
        if used is None:
            used = self.usage_by_model[model.name] = Usage()
        used.add(response.usage)
        own = Usage(requests=1)
        own.add_tokens(response.usage)
        for name, usage in (response.served or {model.name: own}).items():
            entry = served.get(name)
            if entry is None:
                entry = served[name] = Usage()
            entry.add(usage)
        if response.refusal is None or "refusal" not in self.on:
            return False
        refused.add(response.usage)
        return True

    @staticmethod
    def _kind(error: Exception) -> FallbackKind | None:
        if isinstance(error, ModelTimeout | TimeoutError):
            return "timeout"
        if isinstance(error, ModelProviderError):
            return "error"
        return None


def _answer(model: Model, response: ModelResponse, refused: Usage,
            served: dict[str, Usage]) -> ModelResponse:
    """``response`` naming the model that answered, with the refused answers' usage added and
    what each model served."""
    usage = Usage()
    usage.add(refused)
    usage.add(response.usage)
    return ModelResponse(response.message, usage, response.model or model.name,
                         response.refusal, served)
