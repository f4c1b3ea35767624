"""MCP servers as toolsets, against real servers: mcp-server-time (stdio), a flaky stdio server,
and a streamable HTTP server written here with the SDK on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from relayrace import Agent, MCPServer, MCPServerError, Runner, UserError, tool
from relayrace.config import load_team
from relayrace.config.cli import describe
from relayrace.models import ModelRequest
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call
from relayrace.tracing import InMemoryTraceProcessor, get_trace_processors, set_trace_processors

mcp = pytest.importorskip("mcp")

try:  # the type by which the SDK's server hands a tool its request context
    Context = importlib.import_module("mcp.server.mcpserver").Context
except ImportError:
    Context = importlib.import_module("mcp.server.fastmcp").Context

FLAKY = Path(__file__).parent / "fixtures" / "mcp" / "flaky_server.py"
TIME = str(Path(sys.executable).parent / "mcp-server-time")


def flaky(**options: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [str(FLAKY)], name="flaky", **options)


def time_server(**options: Any) -> MCPServer:
    return MCPServer.stdio(TIME, ["--local-timezone", "UTC"], name="time", **options)


def results(run: Any) -> list[tuple[str, bool, str]]:
    return [(e.tool_name, e.is_error, e.message.content) for e in run.tool_results]


def value(content: str) -> str:
    """A tool's text result; the SDK's servers may wrap it as structured ``{"result": ...}``."""
    return str(json.loads(content)["result"]) if content.startswith("{") else content


def sdk_server(name: str) -> Any:
    try:
        return importlib.import_module("mcp.server.mcpserver").MCPServer(name)
    except ImportError:
        return importlib.import_module("mcp.server.fastmcp").FastMCP(name)


# -- a streamable HTTP server, written with the SDK, on a free port of 127.0.0.1 ----------------


class HttpServer:
    def __init__(self) -> None:
        app = self.app = sdk_server("notes")
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.task: asyncio.Task[None] | None = None

        @app.tool()
        def echo(words: str) -> str:
            """Say the words back."""
            return words

        @app.tool()
        def stats() -> dict[str, int]:
            """Counts, as structured content."""
            return {"notes": 3, "words": 42}

        @app.tool()
        def broken() -> str:
            """Always fails."""
            raise tool_error("the notes database is locked")

        @app.tool()
        async def slow(seconds: float) -> str:
            """Answer after ``seconds``."""
            await asyncio.sleep(seconds)
            return "done"

        @app.tool()
        async def grow(name: str, ctx: Context) -> str:
            """Add a tool and announce the change."""
            app.add_tool(lambda: "new", name=name, description="A tool added at run time.")
            await ctx.session.send_tool_list_changed()
            return f"added {name}"

    async def start(self) -> None:
        from relayrace.connect.mcp_server import serve_http

        self.sock.listen()  # connections wait in the backlog until uvicorn accepts them
        self.task = asyncio.create_task(serve_http(self.app, port=0, sock=self.sock))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
            self.task = None
        self.sock.close()  # uvicorn closed it, unless the server never ran


def tool_error(message: str) -> Exception:
    try:
        module = importlib.import_module("mcp.server.mcpserver.exceptions")
    except ImportError:
        module = importlib.import_module("mcp.server.fastmcp.exceptions")
    return module.ToolError(message)  # type: ignore[no-any-return]


@pytest.fixture
async def http_server() -> AsyncIterator[HttpServer]:
    server = HttpServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


# -- stdio: mcp-server-time from PyPI ------------------------------------------------------------


async def test_time_server_tools_filtered_prefixed_and_traced() -> None:
    processor = InMemoryTraceProcessor()
    previous = get_trace_processors()
    set_trace_processors([processor])
    try:
        server = time_server(prefix="clock", include=["get_current_time"])
        model = ScriptedModel([tool_call("clock_get_current_time", {"timezone": "UTC"}),
                               text("It is late.")])
        agent = Agent("a", instructions="Tell the time.", model=model, tools=[server])
        async with server:
            run = await Runner.run(agent, "What time is it?")
    finally:
        set_trace_processors(previous)
    assert model.requests[0].tools == ["clock_get_current_time"]
    ((name, is_error, content),) = results(run)
    assert (name, is_error) == ("clock_get_current_time", False)
    assert json.loads(content)["timezone"] == "UTC"  # structured content, as JSON
    (span,) = [s for s in processor.spans if s.kind == "tool"]
    assert span.name == "clock_get_current_time"
    assert span.attributes["mcp_server"] == "time"
    assert span.attributes["mcp_tool"] == "get_current_time"


async def test_exclude_and_a_callable_filter() -> None:
    async with time_server(exclude=["convert_time"]) as server:
        assert [t.name for t in await server.list_tools()] == ["get_current_time"]
    async with time_server(include=lambda d: "convert" in d.description.lower()) as server:
        assert [t.name for t in await server.list_tools()] == ["convert_time"]


async def test_a_clash_with_another_tool_is_an_error_naming_both() -> None:
    @tool
    def get_current_time() -> str:
        """A local clock."""
        return "noon"

    server = time_server()
    agent = Agent("a", instructions="x", model=ScriptedModel([text("hi")]),
                  tools=[get_current_time, server])
    async with server:
        with pytest.raises(UserError) as caught:
            await Runner.run(agent, "time?")
        assert str(caught.value) == (
            "Agent 'a': the tool 'get_current_time' of MCP server 'time' clashes with its tool "
            "'get_current_time'; give the server a prefix= or leave one tool out with exclude=.")
        fixed = Agent("b", instructions="x", model=ScriptedModel([text("hi")]),
                      tools=[get_current_time, time_server(prefix="utc")])
        assert (await Runner.run(fixed, "time?")).final_output == "hi"


async def test_two_servers_with_one_tool_name_clash() -> None:
    one, two = time_server(include=["get_current_time"]), flaky(include=["pid"], prefix="x")
    clock = MCPServer.stdio(TIME, name="clock", include=["get_current_time"])
    agent = Agent("a", instructions="x", model=ScriptedModel([text("hi")]),
                  tools=[one, two, clock])
    async with one, two, clock:
        with pytest.raises(UserError, match="the tool 'get_current_time' of MCP server 'clock' "
                           "clashes with the tool 'get_current_time' of MCP server 'time'"):
            await Runner.run(agent, "time?")


# -- stdio: a server that dies, a call that times out ----------------------------------------


async def test_a_dead_stdio_server_is_restarted_on_the_next_call() -> None:
    model = ScriptedModel([tool_call("pid"), tool_call("die"), tool_call("pid"), text("ok")])
    server = flaky()
    agent = Agent("a", instructions="x", model=model, tools=[server])
    async with server:
        run = await Runner.run(agent, "go")
    (_, ok1, pid1), (_, died, death), (_, ok2, pid2) = results(run)
    assert not ok1 and not ok2 and died
    assert "MCPServerError: MCP server 'flaky' broke off the call of 'die'" in death
    assert "it will be started again on the next call" in death
    assert value(pid1).isdigit() and value(pid2).isdigit() and value(pid1) != value(pid2)
    assert run.final_output == "ok"


async def test_a_call_past_its_timeout_is_a_tool_error_and_the_run_goes_on() -> None:
    model = ScriptedModel([tool_call("slow", {"seconds": 30}), tool_call("pid"), text("ok")])
    server = flaky(timeout=2.0)  # a loaded CI machine answers the quick call within it
    agent = Agent("a", instructions="x", model=model, tools=[server])
    async with server:
        run = await Runner.run(agent, "go")
    (_, timed_out, message), (_, failed, pid) = results(run)
    assert timed_out and not failed and value(pid).isdigit()
    assert "MCP server 'flaky' did not answer the call of 'slow' within 2 s" in message


async def test_concurrent_runs_of_several_agents_share_one_session() -> None:
    def play(request: ModelRequest) -> Any:
        last = request.messages[-1]
        return text(f"pid {value(last.content)}") if last.role == "tool" else tool_call("pid")

    server = flaky()
    agents = [Agent(f"a{i}", instructions="x", model=FunctionModel(play), tools=[server])
              for i in range(3)]
    try:  # started lazily, by six runs at once
        runs = await asyncio.gather(*(Runner.run(agents[i % 3], "go") for i in range(6)))
    finally:
        await server.stop()
    answers = {r.final_output for r in runs}
    assert len(answers) == 1 and next(iter(answers)).split()[1].isdigit()
    pid = int(next(iter(answers)).split()[1])
    with pytest.raises(ProcessLookupError):  # stopped: its process is gone
        os.kill(pid, 0)


async def test_a_server_that_cannot_start_fails_the_run_clearly() -> None:
    server = MCPServer.stdio("relayrace-no-such-mcp-server", name="ghost")
    agent = Agent("a", instructions="x", model=ScriptedModel([text("hi")]), tools=[server])
    with pytest.raises(MCPServerError, match="MCP server 'ghost' .relayrace-no-such-mcp-server. "
                       "could not be started: FileNotFoundError"):
        await Runner.run(agent, "hi")


# -- streamable HTTP --------------------------------------------------------------------------


async def test_http_results_text_structured_and_is_error(http_server: HttpServer) -> None:
    model = ScriptedModel([tool_call("echo", {"words": "hello there"}), tool_call("stats"),
                           tool_call("broken"), tool_call("echo", {"nope": 1}), text("done")])
    server = MCPServer.http(http_server.url, headers={"Authorization": "Bearer t0k"})
    agent = Agent("a", instructions="x", model=model, tools=[server])
    async with server:
        run = await Runner.run(agent, "go")
    echo, stats, broken, bad_args = results(run)
    assert echo[:2] == ("echo", False) and value(echo[2]) == "hello there"
    assert stats[1] is False and json.loads(stats[2]) in ({"notes": 3, "words": 42},
                                                          {"result": {"notes": 3, "words": 42}})
    assert broken[1] and "MCP server '127.0.0.1', tool 'broken':" in broken[2]
    assert "the notes database is locked" in broken[2]
    assert bad_args[1] and "MCP server '127.0.0.1', tool 'echo':" in bad_args[2]
    assert run.final_output == "done"


async def test_list_changed_and_refresh(http_server: HttpServer) -> None:
    async with MCPServer.http(http_server.url, name="notes") as server:
        before = await server.list_tools()
        assert "fresh" not in [t.name for t in before]
        assert await server.call_tool("grow", {"name": "fresh"}) in ("added fresh",
                                                                    {"result": "added fresh"})
        for _ in range(100):  # bounded: the notification may trail the call's answer
            names = [t.name for t in await server.list_tools()]
            if "fresh" in names:
                break
            await asyncio.sleep(0.05)
        assert "fresh" in names
        # A tool added without an announcement is found after refresh().
        http_server.app.add_tool(lambda: "quiet", name="quiet", description="Added quietly.")
        assert "quiet" not in [t.name for t in await server.list_tools()]
        await server.refresh()
        assert "quiet" in [t.name for t in await server.list_tools()]


async def test_an_http_server_that_went_away_is_reported(http_server: HttpServer) -> None:
    async def play(request: ModelRequest) -> Any:
        done = sum(m.role == "tool" for m in request.messages)
        if done == 1:  # the server goes away after the first call
            await http_server.stop()
        return tool_call("echo", {"words": "w"}) if done < 3 else text("done")

    server = MCPServer.http(http_server.url, name="notes", start_timeout=2, timeout=2)
    agent = Agent("a", instructions="x", model=FunctionModel(play), tools=[server])
    async with server:
        run = await Runner.run(agent, "go")
    first, second, third = results(run)
    assert first[:2] == ("echo", False) and value(first[2]) == "w"
    # mcp 2.x tells at once (broke off; could not be reached); 1.x lets the call time out.
    assert second[1] and "MCPServerError: MCP server 'notes'" in second[2]
    assert third[1] and "MCPServerError: MCP server 'notes'" in third[2]
    assert run.final_output == "done"


# -- YAML ---------------------------------------------------------------------------------------


def test_yaml_mcp_tools(tmp_path: Path) -> None:
    tool_entry = textwrap.indent(textwrap.dedent(f"""\
        - type: mcp
          name: flaky
          command: {json.dumps(sys.executable)}
          args: [{json.dumps(str(FLAKY))}]
          include: [pid]
          prefix: proc
    """), "    ")
    for name in ("one", "two"):
        (tmp_path / f"{name}.yaml").write_text(textwrap.dedent(f"""\
            apiVersion: relayrace/v1
            kind: Agent
            metadata: {{name: {name}}}
            spec:
              prompts: {{system: Use your tools.}}
              tools:
            """) + tool_entry)
    model = ScriptedModel([tool_call("proc_pid"), text("done")] * 2)
    team = load_team(tmp_path, model=model)
    assert not team.warnings
    (server,) = team["one"].toolsets
    assert team["two"].toolsets == (server,)  # one server for the same spec
    assert "toolsets: MCP server 'flaky'" in describe(team)  # what `relayrace validate` shows

    async def go() -> list[str]:
        async with server:
            first = await Runner.run(team["one"], "pid?")
            second = await Runner.run(team["two"], "pid?")
        return [value(r.tool_results[0].message.content) for r in (first, second)]

    one, two = asyncio.run(go())
    assert one.isdigit() and one == two


def test_yaml_mcp_tool_with_command_and_url_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(textwrap.dedent("""\
        apiVersion: relayrace/v1
        kind: Agent
        metadata: {name: a}
        spec:
          prompts: {system: x}
          tools:
            - {type: mcp, command: srv, url: "http://127.0.0.1:1/mcp"}
        """))
    with pytest.raises(UserError, match="give command .stdio. or url .streamable HTTP., not "
                       "both"):
        load_team(tmp_path, model=ScriptedModel([]))


# -- without the mcp package ------------------------------------------------------------------


def test_relayrace_imports_without_mcp_and_names_the_extra() -> None:
    code = textwrap.dedent("""\
        import asyncio, sys
        sys.modules["mcp"] = None  # as if not installed
        import relayrace
        from relayrace import MCPServer, UserError
        server = MCPServer.stdio("mcp-server-time")
        try:
            asyncio.run(server.start())
        except UserError as exc:
            print(exc)
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "pip install 'relayrace[mcp]'" in done.stdout


async def test_an_approved_call_runs_on_resume_in_a_new_process(tmp_path: Path) -> None:
    from relayrace.agents.approvals import PendingRun
    from relayrace.sessions import SQLiteSession

    def build() -> tuple[Agent[Any], MCPServer]:
        server = flaky(requires_approval=True, include=["pid"])
        model = ScriptedModel([tool_call("pid", id="c1"), text("done")])
        return Agent("a", instructions="x", model=model, tools=[server]), server

    agent, server = build()
    async with server:
        first = await Runner.run(agent, "pid?", session=SQLiteSession("s", tmp_path / "s.db"))
    assert first.pending is not None and [a.tool_name for a in first.pending.approvals] == ["pid"]
    # As another process would: new objects, nothing listed yet.
    agent, server = build()
    agent.model.turns.pop(0)  # type: ignore[union-attr]  # the call was already made
    async with server:
        pending = await PendingRun.from_session(SQLiteSession("s", tmp_path / "s.db"),
                                                entry=agent)
        assert pending is not None
        resumed = await Runner.resume(pending, approvals={"c1": True})
    (result,) = resumed.tool_results
    assert not result.is_error and value(result.message.content).isdigit()
    assert resumed.final_output == "done"


async def test_a_server_that_never_answers_is_abandoned_after_start_timeout() -> None:
    silent = MCPServer.stdio(sys.executable, ["-c", "import time; time.sleep(60)"],
                             name="silent", start_timeout=0.5)
    agent = Agent("a", instructions="x", model=ScriptedModel([text("hi")]), tools=[silent])
    with pytest.raises(MCPServerError, match="MCP server 'silent' .* did not start within "
                       "0.5 s; check the command or URL, or raise start_timeout."):
        await Runner.run(agent, "hi")
    await silent.stop()
