"""API keys: which a server accepts, how a request presents one, and the owner it makes
the request (`relayrace serve` and `relayrace a2a serve` share them)."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence

from ..core.exceptions import UserError

__all__ = ["ENV_KEYS", "Keys", "key_id", "presented_key"]

ENV_KEYS = "RELAYRACE_API_KEYS"
"""The environment variable whose comma-separated keys a server accepts, besides its own."""


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request presents: ``Authorization: Bearer KEY``, else ``X-API-Key: KEY``
    (``headers`` with lower-case names)."""
    auth = headers.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else headers.get("x-api-key")


def key_id(key: str) -> str:
    """What a session records as its owner for an API key: never the key itself."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


_NAMED = re.compile(r"([A-Za-z][A-Za-z0-9_.@-]{0,63}):(.+)")
"""A key given as ``NAME:KEY`` (no generated key holds a ':')."""


class Keys:
    """The API keys the server accepts; none means every request is let in (as owner ``""``).

    Each key may have a name, given as ``NAME:KEY`` or as a mapping of names to keys: what the
    server records as who decided an approval (an unnamed key is named by its id)."""

    def __init__(self, keys: Sequence[str] | Mapping[str, str]) -> None:
        named = list(keys.items()) if isinstance(keys, Mapping) else [
            (m.group(1), m.group(2)) if (m := _NAMED.fullmatch(k.strip())) else ("", k)
            for k in keys if k and k.strip()]
        cleaned = [(name, k.strip()) for name, k in named if k and k.strip()]
        short = [k for _, k in cleaned if len(k) < 16]
        if short:
            raise UserError(f"An API key must be at least 16 characters long; {len(short)} "
                            "given is shorter. Make one with: python -c \"import secrets; "
                            "print(secrets.token_urlsafe(24))\"")
        self._ids = {key_id(k): k.encode() for _, k in cleaned}
        self._names = {key_id(k): name or key_id(k) for name, k in cleaned}

    @property
    def required(self) -> bool:
        """Whether requests must carry a key."""
        return bool(self._ids)

    def name(self, owner: str) -> str:
        """The name of the key that makes requests ``owner`` (``""`` for no key)."""
        return self._names.get(owner, owner)

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
