"""``relayrace mcp serve``: a team's agents as MCP tools, driven by the mcp SDK's own client."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from relayrace import Agent, UserError
from relayrace.connect.mcp_server import mcp_server, serve_http
from relayrace.testing import FunctionModel, text

mcp = pytest.importorskip("mcp")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "connected"

TEAM = '''
from pydantic import BaseModel

from relayrace import Agent, tool
from relayrace.testing import FunctionModel, final_output, text, tool_call


class Count(BaseModel):
    notes: int
    topics: list[str]


def answer(request):
    task = request.messages[-1].content
    if "long" in task:
        return text("x" * 700_000)
    if "crash" in task:
        raise RuntimeError("the model fell over")
    if "report" in task:
        return text("Done.\\n<handoff>\\nSUMMARY: counted the notes\\nKEY FINDINGS:\\n- 3 notes\\n"
                    "CONFIDENCE: high\\n</handoff>")
    return text(f"You asked: {task}")


helper = Agent("helper", instructions="Help.", description="Answers questions about notes.",
               model=FunctionModel(answer))
@tool(confirm=True)
def refund(invoice: str) -> str:
    """Refund an invoice (a person confirms first)."""
    return f"refunded {invoice}"


careful = Agent("careful", instructions="Refund.", tools=[refund],
                model=FunctionModel(lambda r: tool_call("refund", {"invoice": "INV-9"})))
counter = Agent("counter", instructions="Count.", output_type=Count,
                model=FunctionModel(lambda r: final_output(Count(notes=3, topics=["mcp"]))))
'''


async def call(session: Any, name: str, task: str) -> dict[str, Any]:
    result = await asyncio.wait_for(session.call_tool(name, {"task": task}), 60)
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


async def check(session: Any, *, stored: bool = False) -> None:
    await asyncio.wait_for(session.initialize(), 60)
    listed = (await session.list_tools()).tools
    helper, counter, _ = [t.model_dump(by_alias=True) for t in listed]
    assert (helper["name"], counter["name"]) == ("helper", "counter")
    assert helper["description"] == "Answers questions about notes."
    assert list(helper["inputSchema"]["properties"]) == ["task"]

    plain = await call(session, "helper", "how many notes?")
    assert plain["content"] == [{"type": "text", "text": "You asked: how many notes?"}]
    assert not plain.get("isError") and "structuredContent" not in plain
    assert plain["_meta"]["relayrace"]["agent"] == "helper"
    assert plain["_meta"]["relayrace"]["report"] is None

    counted = await call(session, "counter", "count the notes")
    assert counted["structuredContent"] == {"notes": 3, "topics": ["mcp"]}
    assert counted["content"][0]["text"] == '{"notes": 3, "topics": ["mcp"]}'

    # The answer is sent once: a long one fits the SDK client's 1 MiB limit over HTTP.
    long = await call(session, "helper", "a long answer")
    assert long["content"] == [{"type": "text", "text": "x" * 700_000}]
    assert "structuredContent" not in long

    reported = await call(session, "helper", "report please")
    report = reported["_meta"]["relayrace"]["report"]
    assert report["summary"] == "counted the notes" and report["key_findings"] == ["3 notes"]
    assert report["confidence"] == "high"

    failed = await call(session, "helper", "crash now")
    assert failed["isError"] is True
    assert failed["content"][0]["text"] == ("The run failed: RuntimeError: the model fell over")

    stopped = await call(session, "careful", "refund INV-9")
    said = stopped["content"][0]["text"]
    assert stopped["isError"] is True and "refund (" in said
    if stored:  # the session is in the server's database: it can be resumed there
        assert "relayrace resume" in said and "--session" in said
    else:  # in memory: nothing can resume it, and the client is told what it can do
        assert "relayrace resume" not in said and "cannot be resumed" in said


async def test_mcp_serve_over_stdio(tmp_path: Path) -> None:
    from mcp.client.stdio import stdio_client

    (tmp_path / "team.py").write_text(textwrap.dedent(TEAM))
    params = mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "relayrace.cli", "mcp", "serve",
                                      str(tmp_path / "team.py"), "--agent", "helper",
                                      "--agent", "counter", "--agent", "careful",
                                      "--db", str(tmp_path / "s.db")],
        env=dict(os.environ))
    async with AsyncExitStack() as stack:
        streams = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(mcp.ClientSession(streams[0], streams[1]))
        await check(session, stored=True)
    assert (tmp_path / "s.db").exists()  # each call's session was kept


async def test_mcp_serve_over_http(tmp_path: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client

    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(TEAM), namespace)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections wait in the backlog until the server accepts them
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    agents = [namespace["helper"], namespace["counter"], namespace["careful"]]
    serving = asyncio.create_task(serve_http(mcp_server(agents), port=0, sock=sock))
    try:
        async with AsyncExitStack() as stack:
            streams = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(mcp.ClientSession(streams[0],
                                                                        streams[1]))
            await check(session)
    finally:
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        sock.close()


def test_agents_offered_under_one_name_are_refused() -> None:
    one = Agent("a b", instructions="x", model=FunctionModel(lambda r: text("x")))
    two = Agent("a_b", instructions="x", model=FunctionModel(lambda r: text("x")))
    with pytest.raises(UserError, match=r"Several agents would be offered as the MCP tool\(s\) "
                       r"\['a_b'\]"):
        mcp_server([one, two])


def test_connected_example(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RELAYRACE_MODEL", "FORCE_COLOR")}
    env.update(COLUMNS="200", NO_COLOR="1", PYTHONIOENCODING="utf-8")
    done = subprocess.run([sys.executable, str(EXAMPLE / "main.py")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    # The stdio server's answer, then the HTTP-served relayrace team's (with its report).
    assert '→ notes_search: {"result":["handoff: A handoff passes the live conversation' in out
    assert '→ librarian: Checked the catalogue for: books about agent handoffs' in out
    assert "assistant: A handoff passes the live conversation to another agent." in out
    # The A2A-served team: as a delegated child, then as a handoff target across two turns.
    assert "→ billing: INV-7 is paid (42.00 EUR, on 2026-11-02)." in out
    assert "↪ handoff assistant → billing: the user wants a refund" in out
    assert "billing: Which invoice should I refund?" in out
    assert "user → billing: INV-7" in out
    assert ("↪ handoff billing → assistant: returned: Refund issued for invoice INV-7: "
            "42.00 EUR, back in 3 days.") in out
    assert out.rstrip().endswith("assistant: Billing has refunded INV-7; the money is back in "
                                 "3 days.")


async def test_mcp_serve_over_http_with_keys_lets_in_only_a_valid_key() -> None:
    """Over HTTP with API keys, a request with no key or a wrong one is 401 (what the mcp
    client raises on), and the client sending a valid key as a bearer token is served."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    key = "k" * 24
    helper = Agent("helper", instructions="Help.", model=FunctionModel(lambda r: text("hi")))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    serving = asyncio.create_task(serve_http(mcp_server([helper]), port=0, sock=sock,
                                             api_keys=[key]))
    try:
        async with httpx2.AsyncClient() as plain:
            for headers in ({}, {"Authorization": "Bearer " + "w" * 24}):
                refused = await plain.post(url, headers=headers, json={})
                assert refused.status_code == 401, refused.text
                assert refused.headers["www-authenticate"] == "Bearer"
                assert "A valid API key is needed" in refused.json()["error"]["message"]
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}))
            streams = await stack.enter_async_context(streamable_http_client(
                url, http_client=client))
            session = await stack.enter_async_context(mcp.ClientSession(streams[0],
                                                                        streams[1]))
            await session.initialize()
            answer = await session.call_tool("helper", {"task": "greet"})
            assert answer.content[0].text == "hi"
    finally:
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
        sock.close()


def test_api_keys_over_stdio_are_refused_with_what_to_do(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from relayrace.cli import app

    team = tmp_path / "team.py"
    team.write_text("from relayrace import Agent\nfrom relayrace.testing import FunctionModel, "
                    "text\nhelper = Agent('helper', instructions='Help.', "
                    "model=FunctionModel(lambda r: text('hi')))\n")
    result = CliRunner().invoke(app, ["mcp", "serve", f"{team}:helper", "--api-key",
                                      "k" * 24])
    assert result.exit_code != 0
    assert "API keys guard the HTTP server" in result.output and "--port" in result.output
