"""API keys, per-key rate limits and request size limits of the server."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ..connect.keys import Keys, key_id
from ..core.exceptions import UserError

__all__ = ["Keys", "RateLimit", "RateLimiter", "key_id"]


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``requests`` requests per ``seconds`` per API key."""

    requests: int
    seconds: float

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"60/m"``, ``"10/s"``, ``"1000/h"`` (or ``/minute``, ...)."""
        count, _, unit = text.partition("/")
        seconds = {"s": 1.0, "second": 1.0, "m": 60.0, "minute": 60.0, "h": 3600.0,
                   "hour": 3600.0}.get(unit.strip().lower())
        try:
            requests = int(count)
        except ValueError:
            requests = 0
        if seconds is None or requests < 1:
            raise UserError(f"A rate limit is N/s, N/m or N/h with N >= 1, e.g. 60/m; got "
                            f"{text!r}.")
        return cls(requests, seconds)


class RateLimiter:
    """A token bucket per key: a burst of ``requests``, refilled evenly over ``seconds``."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, when)

    def take(self, key: str) -> float:
        """0 if ``key`` may make a request now (and count it), else seconds until it may."""
        rate = self.limit.requests / self.limit.seconds
        now = time.monotonic()
        tokens, when = self._buckets.get(key, (float(self.limit.requests), now))
        tokens = min(float(self.limit.requests), tokens + (now - when) * rate)
        if tokens >= 1:
            self._buckets[key] = (tokens - 1, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return max(0.001, (1 - tokens) / rate)

    def retry_after(self, wait: float) -> str:
        """``wait`` as a Retry-After header value (whole seconds, at least 1)."""
        return str(max(1, math.ceil(wait)))
