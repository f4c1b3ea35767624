"""Which session an OpenAI-protocol request continues, and the session ids the server accepts.

A conversation is found by its handle (the ``X-Relayrace-Session`` header), never by its text
alone. Only a server started with ``match_transcripts`` also finds one by the transcript the
client resends, and then only when exactly one session ends with it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Sequence

from ._errors import ApiError

__all__ = ["SESSION_ID_RULE", "Conversations", "check_session_id"]

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,255}")
SESSION_ID_RULE = ("1 to 256 characters: letters, digits, '.', '_' and '-', starting with a "
                   "letter or a digit")
"""The session ids the server accepts (as docs/server.md states them)."""


def check_session_id(session_id: str) -> str:
    """``session_id`` if the server accepts it; else a 400 saying what an id is."""
    if not _SESSION_ID.fullmatch(session_id):
        raise ApiError(400, f"{session_id[:140]!r} is not a session id: a session id is "
                       f"{SESSION_ID_RULE}.", "invalid_session_id")
    return session_id


def transcript_key(owner: str, model: str, said: Sequence[tuple[str, str]],
                   *, after: str | None = None) -> str:
    """The hash naming a transcript (role, text pairs) of one key's talk with one model; with
    ``after``, of the transcript that key names followed by ``said``."""
    key = after if after is not None else hashlib.sha256(
        json.dumps([owner, model]).encode()).hexdigest()
    for pair in said:  # a chain: a transcript's key extends its beginning's
        key = hashlib.sha256(json.dumps([key, *pair]).encode()).hexdigest()
    return key


class Conversations:
    """Each session's transcript so far, by its hash (the ``limit`` most recently answered
    sessions: a forgotten one is found by its handle only)."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._ends: OrderedDict[str, str] = OrderedDict()  # session id -> transcript key
        self._sessions: dict[str, set[str]] = {}  # transcript key -> sessions ending with it

    def answered(self, session_id: str, key: str) -> None:
        """``session_id`` now ends with the transcript ``key``."""
        self._forget(session_id)
        self._ends[session_id] = key
        self._sessions.setdefault(key, set()).add(session_id)
        while len(self._ends) > self.limit:  # the least recently answered go first
            self._forget(next(iter(self._ends)))

    def ending_with(self, key: str) -> list[str]:
        """The sessions whose transcript is ``key``."""
        return sorted(self._sessions.get(key, ()))

    def end_of(self, session_id: str) -> str | None:
        """The key of ``session_id``'s transcript, if remembered."""
        return self._ends.get(session_id)

    def _forget(self, session_id: str) -> None:
        key = self._ends.pop(session_id, None)
        if key is not None:
            sessions = self._sessions[key]
            sessions.discard(session_id)
            if not sessions:
                del self._sessions[key]
