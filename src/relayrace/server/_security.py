"""API keys, per-key rate limits and request size limits of the server."""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..exceptions import UserError

__all__ = ["Keys", "RateLimit", "RateLimiter", "key_id"]


def key_id(key: str) -> str:
    """What a session records as its owner for an API key: never the key itself."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


class Keys:
    """The API keys the server accepts; none means every request is let in (as owner ``""``)."""

    def __init__(self, keys: Sequence[str]) -> None:
        cleaned = [k.strip() for k in keys if k and k.strip()]
        short = [k for k in cleaned if len(k) < 16]
        if short:
            raise UserError(f"An API key must be at least 16 characters long; {len(short)} "
                            "given is shorter. Make one with: python -c \"import secrets; "
                            "print(secrets.token_urlsafe(24))\"")
        self._ids = {key_id(k): k.encode() for k in cleaned}

    @property
    def required(self) -> bool:
        """Whether requests must carry a key."""
        return bool(self._ids)

    def owner(self, presented: str | None) -> str | None:
        """The owner a request's key makes it, or ``None`` if the key is missing or wrong."""
        if not self._ids:
            return ""
        if not presented:
            return None
        wanted = key_id(presented)
        known = self._ids.get(wanted)
        # Compared in constant time even though the id already matched: the id is a hash.
        return wanted if known is not None and hmac.compare_digest(known,
                                                                    presented.encode()) else None


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
