"""The session list reads a session's log only when it changed since the last listing (a
summary cache keyed by session and event count), and still shows what the log says."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from relayrace import Message  # noqa: E402
from relayrace.core.events import MessageEvent  # noqa: E402
from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import MemoryStore  # noqa: E402
from relayrace.sessions.memory import MemorySession  # noqa: E402
from server_team import front  # noqa: E402


async def test_a_listing_reads_only_the_logs_that_grew(monkeypatch: Any) -> None:
    store = MemoryStore()
    app = create_app(front, store=store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        for n in range(3):
            sid = (await client.post("/api/sessions", json={})).json()["session_id"]
            await client.post(f"/api/sessions/{sid}/runs", json={"input": f"hello {n}"})
        read: list[str] = []
        original = MemorySession.get_events

        async def counted(self: MemorySession, *args: Any, **kwargs: Any) -> Any:
            read.append(self.session_id)
            return await original(self, *args, **kwargs)
        monkeypatch.setattr(MemorySession, "get_events", counted)

        first = (await client.get("/api/sessions")).json()["sessions"]
        assert len(first) == 3 and len(read) == 3
        read.clear()
        again = (await client.get("/api/sessions")).json()["sessions"]
        assert again == first and read == []  # nothing changed: no log read

        grown = first[1]["session_id"]
        await store.session(grown).append([MessageEvent(
            agent="front", path="front", message=Message("user", "written elsewhere"))])
        rows = (await client.get("/api/sessions")).json()["sessions"]
        assert read == [grown]  # only the log that grew
        row = next(r for r in rows if r["session_id"] == grown)
        assert row["last_message"] == "written elsewhere"
        assert row["event_count"] == first[1]["event_count"] + 1
        found = (await client.get("/api/sessions", params={"q": "elsewhere"})).json()
        assert [r["session_id"] for r in found["sessions"]] == [grown]
