"""The price table the server is given (``relayrace serve --prices prices.yaml``), and what
the usage it is applied to costs. No prices are built in: a price that changes upstream
would go stale silently, so a model without a price is said to have none.

The file (documented in docs/console.md)::

    currency: USD            # optional, shown with the figures
    per: 1000000             # optional: the prices are per this many tokens (default 1M)
    models:
      openai:gpt-4o:         # the model name the session log records
        input: 2.50          # every input token not read from the cache
        output: 10.00        # every output token (reasoning tokens included)
        cached_input: 1.25   # optional: input tokens read from the cache (default: input)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.exceptions import ConfigError

__all__ = ["ModelPrice", "PriceTable"]

_TOP = ("currency", "per", "models")
_PRICES = ("input", "output", "cached_input")


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One model's prices per ``PriceTable.per`` tokens."""

    input: float
    output: float
    cached_input: float


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per model, read from a YAML file by `load`."""

    models: dict[str, ModelPrice]
    currency: str = "USD"
    per: int = 1_000_000

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PriceTable:
        """The table in the YAML file ``path``; `ConfigError` saying what is wrong and where."""
        where = f"The price table {os.fspath(path)}"
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{where} cannot be read: {exc.strerror or exc}.") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{where} is not valid YAML: {exc}.") from None
        return cls.parse(data, where=where)

    @classmethod
    def parse(cls, data: Any, *, where: str = "The price table") -> PriceTable:
        """The table ``data`` (the YAML file's content) describes."""
        if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
            raise ConfigError(f"{where} is a mapping with `models:`, each model mapping to "
                              "its `input` and `output` prices (see docs/console.md).")
        unknown = sorted(str(k) for k in data if k not in _TOP)
        if unknown:
            raise ConfigError(f"{where} has unknown key(s) {', '.join(unknown)}; the keys are "
                              f"{', '.join(_TOP)}.")
        currency = data.get("currency", "USD")
        if not isinstance(currency, str) or not currency.strip():
            raise ConfigError(f"{where}: `currency` is a name such as USD; got {currency!r}.")
        per = data.get("per", 1_000_000)
        if isinstance(per, bool) or not isinstance(per, int) or per < 1:
            raise ConfigError(f"{where}: `per` is a whole number of tokens >= 1; got {per!r}.")
        models = {str(name): _price(f"{where}: models.{name}", spec)
                  for name, spec in data["models"].items()}
        return cls(models=models, currency=currency.strip(), per=per)

    def cost(self, by_model: dict[str, dict[str, float]]) -> dict[str, Any]:
        """What ``by_model`` (per model: input, output and cached tokens) costs: in all, per
        model, and the models the table has no price for (their cost is not counted)."""
        costs: dict[str, float] = {}
        unpriced: list[str] = []
        for name, used in by_model.items():
            price = self.models.get(name)
            if price is None:
                unpriced.append(name)
                continue
            cached = min(used.get("cached_tokens", 0), used.get("input_tokens", 0))
            costs[name] = ((used.get("input_tokens", 0) - cached) * price.input
                           + cached * price.cached_input
                           + used.get("output_tokens", 0) * price.output) / self.per
        return {"currency": self.currency, "total": sum(costs.values()), "by_model": costs,
                "unpriced": sorted(unpriced)}


def _price(where: str, spec: Any) -> ModelPrice:
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} maps `input` and `output` to prices; got {spec!r}.")
    unknown = sorted(str(k) for k in spec if k not in _PRICES)
    if unknown:
        raise ConfigError(f"{where} has unknown key(s) {', '.join(unknown)}; the keys are "
                          f"{', '.join(_PRICES)}.")
    values: dict[str, float] = {}
    for key in _PRICES:
        if key not in spec:
            if key == "cached_input":
                continue
            raise ConfigError(f"{where} needs `{key}`: the price per token count of `per`.")
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or \
                not math.isfinite(value) or value < 0:
            raise ConfigError(f"{where}.{key} is a price >= 0; got {value!r}.")
        values[key] = float(value)
    return ModelPrice(input=values["input"], output=values["output"],
                      cached_input=values.get("cached_input", values["input"]))
