"""The composition root: the tool table is complete when the turn core is built, one ordered
list drives start and teardown (reversed), lazy capabilities wait for first use, and MCP tools
come and go through the table's source, never by editing a shared dictionary.

The order is watched on a real kernel through the hook the root exposes for it (`observe`, told
each step as it begins); the MCP tools come from the real test server over stdio.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_provider import BOUND
from support.helpers import wait_until
from support.inprocess import InProcess, inprocess_kernel

from app.kernel import Kernel
from app.kernel.mcp import McpConfig, ServerConfig
from app.kernel.wiring import LAZY, Phase
from app.metrics import Metrics
from app.settings import Settings

CORE_TOOLS = {"bash", "read", "write", "edit", "delete", "rule_load", "memory_remember"}
PLUGGED = {"ask_user", "tool_search", "web_search", "web_fetch", "mcp_list_resources"}
SERVER = Path(__file__).parent / "support" / "mcp_servers" / "server.py"


def test_the_tool_table_is_complete_before_start(tmp_path: Path) -> None:
    kernel = Kernel(Settings(data_dir=tmp_path / "data"), Metrics())
    names = set(kernel.turns.tool_runner.tools)
    assert names >= CORE_TOOLS | PLUGGED
    assert any(n.startswith("bash_") for n in names)  # the background commands' tools
    assert kernel.turns.tool_runner.tools is kernel.tool_table
    assert not any(kernel.built(name) for name in LAZY)


def test_the_start_looks_for_the_mcp_configuration_under_its_real_name() -> None:
    from app.kernel.mcp import store
    from app.kernel.wiring import ondisk

    assert ondisk.MCP_CONFIG == store.CONFIG_FILE


def test_lazy_capabilities_are_built_on_first_use_and_only_then_stopped(tmp_path: Path) -> None:
    with inprocess_kernel(tmp_path / "data") as rig:
        kernel = rig.kernel
        assert not any(kernel.built(name) for name in LAZY)
        names = [c.name for c in kernel.capabilities()]
        assert "terminals" not in names and "canvases" not in names
        assert kernel.canvases is kernel.canvases  # built once, on first use
        assert kernel.built("canvases")
        assert "canvases" in [c.name for c in kernel.capabilities()]


def test_start_runs_the_list_in_order_and_every_teardown_in_reverse(tmp_path: Path) -> None:
    seen: list[tuple[Phase, str]] = []

    def steps(phase: Phase) -> list[str]:
        return [name for p, name in seen if p == phase]

    def observe(phase: Phase, name: str) -> None:
        seen.append((phase, name))

    async def life() -> None:
        kernel = Kernel(Settings(data_dir=tmp_path / "data"), Metrics(), observe=observe)
        declared = kernel.capabilities()
        await kernel.start()
        assert steps("start") == [c.name for c in declared if c.start]
        assert steps("start")[0] == "store" and await kernel.store.ping() == 0  # open, empty
        assert kernel.terminals is not None  # a lazy capability joins the list once built

        parent = await kernel.sessions.insert({})
        await kernel.sessions.insert({"parent_id": parent})
        await kernel.delete_session(parent)
        assert await kernel.store.list_sessions() == []  # the child went with it
        now = kernel.capabilities()[::-1]
        ending = [c.name for c in now if c.end_session]
        # The parent's steps in reverse, the child's whole deletion once the sub-agents' runs
        # ended (the `children` step right after `agents`), then the rest of the parent's.
        assert ending.index("children") == ending.index("agents") + 1
        at = ending.index("children") + 1
        assert steps("end_session") == ending[:at] + ending + ending[at:]
        removed = [c.name for c in now if c.removed]
        assert steps("removed") == removed + removed  # the child's, then the parent's
        forget = [c.name for c in now if c.forget]
        assert steps("forget") == forget + forget
        assert forget.index("turns") < forget.index("background") < forget.index("terminals")

        await kernel.begin_shutdown()
        await kernel.close()
        final = kernel.capabilities()[::-1]
        assert steps("shutdown") == [c.name for c in final if c.shutdown]
        assert steps("close") == [c.name for c in final if c.close]
        assert steps("close")[-1] == "store"  # opened first, closed last
        assert steps("shutdown")[0] == "maintenance" and "terminals" in steps("shutdown")

    asyncio.run(life())


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcess]:
    """A started kernel with a HOME of its own (its `~/.foya/mcp.json`) and a patient connect
    timeout: the server is a Python process that imports the SDK, slow on a loaded machine."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FOYA_MCP_CONNECT_TIMEOUT", "30")
    with inprocess_kernel(tmp_path / "data") as rig:
        yield rig


def test_mcp_tools_join_the_turns_table_and_leave_it_with_their_server(rig: InProcess) -> None:
    kernel = rig.kernel
    table = kernel.turns.tool_runner.tools
    server = ServerConfig(
        id="s",
        enabled=True,
        transport="stdio",
        command=sys.executable,
        args=[str(SERVER), "stdio", "--marker=wiring", "normal"],
    )
    rig.run(kernel.mcp.replace(McpConfig(servers=[server])))

    def state() -> str:
        return next(str(s["state"]) for s in kernel.mcp.statuses() if s["id"] == "s")

    wait_until(lambda: state() == "connected", "connected", 2 * BOUND)
    assert {"mcp__s__echo", "mcp__s__add"} <= set(table)
    assert table["mcp__s__echo"].description.startswith("Echo the text back")
    session = rig.run(kernel.sessions.create({"connection_id": rig.connection}))
    row = rig.run(kernel.sessions.row(session["id"]))
    offered = {s["function"]["name"] for s in kernel.turns.tool_runner.schemas(row)}
    assert "mcp__s__echo" in offered and "read" in offered

    rig.run(kernel.mcp.replace(McpConfig(servers=[])))
    assert not [name for name in table if name.startswith("mcp__s__")]
    assert "read" in table and "mcp_list_resources" in table  # the kernel's own stay
