"""MCP benchmark: what the kernel adds to an MCP tool call, and what configured MCP
servers cost the kernel's start.

Run from the repository root:

    .venv/bin/python -m bench.mcp            # table on stdout, progress on stderr
    .venv/bin/python -m bench.mcp --json     # machine-readable results on stdout
    .venv/bin/python -m bench.mcp --quick    # fewer calls and starts (~15 s)

Call overhead (in this process, one event loop): a kernel (`app.kernel.Kernel`, its own data dir
and HOME) with one stdio server configured (tests/support/mcp_servers/server.py), and a direct SDK
`Client` to another process of the same server. Each round makes, in rotating order, one call of
`echo` directly (`client.call_tool`), one through the kernel's tool (`ServerTool.run`: the
approval check of a `full_access` session, the link's timeout scope, the result as text), and one
as a recorded tool step (`ToolRunner.run_step`: that, plus `tool_end` and the tool's
`message_end` stored in SQLite and published, as every tool call of a turn is). The figures are
p50s of per-round differences, kernel minus direct. Target: the tool path adds ≤ 5 ms.

Start: `python -m app serve` on a Unix socket, from exec to the first `GET /healthz` 200, with 5
stdio servers in `~/.foya/mcp.json` against none (median of alternating starts; the servers
connect in the background, so the target is a ratio of 1.2x at most). How long the 5 took to
be `connected` is reported beside it.

Nothing asserts on a figure. Every process is stopped (the kernel stops its servers).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from bench.harness import ROOT, KernelProcess, Processes, say, workspace
from bench.report import Row, at_most, finish, percentile, python, text

SERVER = Path(ROOT) / "tests" / "support" / "mcp_servers" / "server.py"
TARGET_ADDED_MS = 5.0
TARGET_START_RATIO = 1.2
SERVERS = 5


def server_config(server_id: str) -> Any:
    from app.kernel.mcp import ServerConfig

    args = [str(SERVER), "stdio"]
    return ServerConfig(
        id=server_id, enabled=True, transport="stdio", command=sys.executable, args=args
    )


async def calls(rounds: int, work: str) -> dict[str, Any]:
    """Per-round timings (ns) of a direct call, the kernel's tool run and a recorded step."""
    os.environ["HOME"] = os.path.join(work, "home")  # the kernel's ~/.foya
    from app.kernel import Kernel
    from app.kernel.mcp import McpConfig
    from app.kernel.turns.loopguard import LoopGuard
    from app.kernel.turns.steps import Run, emitter
    from app.kernel.turns.toolcalls import ParsedCall
    from app.metrics import Metrics
    from app.settings import Settings
    from app.tools.base import ToolContext

    kernel = Kernel(Settings(data_dir=Path(work) / "data"), Metrics())
    await kernel.start()
    try:
        await kernel.mcp.replace(McpConfig(servers=[server_config("b")]))
        while kernel.mcp.statuses()[0]["state"] != "connected":
            await asyncio.sleep(0.01)
        session = await kernel.sessions.create({"approval_mode": "full_access"})
        row = await kernel.sessions.row(session["id"])
        cwd = kernel.sessions.workspace(row)
        runner = kernel.turns.tool_runner
        tool = runner.tools["mcp__b__echo"]
        emit = emitter(kernel.sessions, Run(session["id"], run_id="bench"))
        ctx = ToolContext(
            cwd,
            kernel.settings.data_dir,
            session=session["id"],
            run_id="bench",
            approve=runner.approval(row, emit),
        )
        direct_params = StdioServerParameters(command=sys.executable, args=[str(SERVER), "stdio"])
        times: dict[str, list[int]] = {"direct": [], "tool": [], "step": []}
        async with Client(direct_params, mode="legacy", cache=None) as client:

            async def direct() -> None:
                result = await client.call_tool("echo", {"text": "ping"})
                assert result.content[0].text == "ping"  # type: ignore[union-attr]

            async def through_tool() -> None:
                result = await tool.run({"text": "ping"}, ctx)
                assert result.output == "ping" and not result.is_error

            async def as_step(n: int) -> None:
                call: ParsedCall = {
                    "id": f"c{n}",
                    "name": "mcp__b__echo",
                    "input": {"text": "ping"},
                }
                await runner.run_step(
                    session["id"], "bench", row, cwd, [call], emit, {}, LoopGuard()
                )

            for _ in range(20):  # warm up both servers and the store
                await direct()
                await through_tool()
            for n in range(rounds):
                order = ["direct", "tool", "step"]
                order = order[n % 3 :] + order[: n % 3]
                for kind in order:
                    began = time.perf_counter_ns()
                    if kind == "direct":
                        await direct()
                    elif kind == "tool":
                        await through_tool()
                    else:
                        await as_step(n)
                    times[kind].append(time.perf_counter_ns() - began)
    finally:
        await kernel.begin_shutdown()
        await kernel.close()
    return times


def start_once(procs: Processes, work: str, tag: str, servers: int) -> tuple[float, float | None]:
    """Seconds from exec to /healthz, and (with servers) until all are connected."""
    from app.kernel.mcp import McpConfig
    from app.kernel.mcp.store import save

    home = os.path.join(work, f"home-{tag}")
    os.makedirs(home, exist_ok=True)
    if servers:
        config = McpConfig(servers=[server_config(f"s{i}") for i in range(servers)])
        save(Path(home) / ".foya", config)
    kernel = KernelProcess(procs, work, tag, env={"HOME": home})
    try:
        kernel.wait_ready()
        healthy = time.perf_counter() - kernel.started
        connected = None
        if servers:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                states = [s["state"] for s in kernel.http.get("/mcp/status").json()]
                if states.count("connected") == servers:
                    connected = time.perf_counter() - kernel.started
                    break
                time.sleep(0.01)
        return healthy, connected
    finally:
        kernel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and starts")
    parser.add_argument("--json", action="store_true", help="JSON results on stdout")
    args = parser.parse_args()
    rounds, starts = (60, 2) if args.quick else (300, 5)
    procs = Processes()
    results: dict[str, Any] = {"python": python(), "rounds": rounds, "starts": starts}
    try:
        with workspace() as work:
            say(f"calls: {rounds} rounds")
            times = asyncio.run(calls(rounds, work))
            healthy: dict[str, list[float]] = {"none": [], "five": []}
            connected: list[float] = []
            for n in range(starts):
                for side in ("none", "five") if n % 2 == 0 else ("five", "none"):
                    say(f"start {n + 1}/{starts}: {side}")
                    count = SERVERS if side == "five" else 0
                    ready, up = start_once(procs, work, f"{side}{n}", count)
                    healthy[side].append(ready)
                    if up is not None:
                        connected.append(up)
    finally:
        procs.stop_all()
    added_tool = [t - d for t, d in zip(times["tool"], times["direct"], strict=True)]
    added_step = [s - d for s, d in zip(times["step"], times["direct"], strict=True)]
    ms = {k: round(statistics.median(v) / 1e6, 3) for k, v in times.items()}
    tool_ms = round(statistics.median(added_tool) / 1e6, 3)
    step_ms = round(statistics.median(added_step) / 1e6, 3)
    none_s, five_s = statistics.median(healthy["none"]), statistics.median(healthy["five"])
    results.update(
        calls_p50_ms=ms,
        calls_p90_ms={k: round(percentile(v, 0.9) / 1e6, 3) for k, v in times.items()},
        added_tool_p50_ms=tool_ms,
        added_step_p50_ms=step_ms,
        start_s={"none": healthy["none"], "five": healthy["five"]},
        all_connected_s=connected,
    )
    ratio = five_s / none_s
    rows = [
        Row("MCP call, direct SDK, p50 ms", f"{ms['direct']:.2f}"),
        Row(
            "added by the kernel's tool, p50 ms",
            f"{tool_ms:.2f}",
            f"{ms['direct']:.2f}",
            target=f"<= {TARGET_ADDED_MS:g} ms",
            meets=at_most(tool_ms, TARGET_ADDED_MS),
        ),
        Row("added as a recorded tool step, p50 ms", f"{step_ms:.2f}", f"{ms['direct']:.2f}"),
        Row(
            "start to /healthz, 5 servers vs none, s",
            f"{five_s:.3f}",
            f"{none_s:.3f}",
            f"{ratio:.2f}x",
            f"<= {TARGET_START_RATIO:g}x",
            at_most(ratio, TARGET_START_RATIO),
        ),
        Row(
            "start to all 5 connected, s",
            f"{statistics.median(connected):.3f}" if connected else "never",
        ),
    ]

    def render(res: dict[str, Any]) -> str:
        title = [f"MCP: {rounds} call rounds, {starts} starts per side ({res['python']})"]
        return text(title, rows, [])

    finish(results, rows, render, args.json)


if __name__ == "__main__":
    main()
