"""The kinds of load of `bench.soak`, each one HTTP call sequence against the one kernel.

- `turn`: an SSE subscription to the session, then `POST …/turns`; the fake provider answers
  the first step with one tool call (write, read, bash or the MCP server's `echo`, by the turn's
  number) and the second with text; read until `turn_complete`. Sessions are `full_access`,
  so no approval waits.
- `sse_drop`: `GET /sessions/{id}/events?after=0`, read the first replayed frame, hang up.
- `terminal`: open a PTY, type `echo`, wait for the echo in its snapshot, close it.
- `mcp_kill`: odd ones SIGKILL the stdio server (a child of the kernel, found by PID) and wait
  for the kernel to reconnect it; even ones remove it and add it back through `PUT /mcp` (a
  fresh link: the reconnect backoff, which doubles, starts over).
- `automation`: `POST /automations/{id}/run`; the previous run's session is deleted once done.
- `backup`: `python -m app backup ARCHIVE --data-dir DATA`, as the CLI runs it beside a kernel.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.fakes import FakeProvider, Recorded, Script, answer, reply
from bench.harness import ROOT, SSE, KernelProcess, Processes, child_env, spawn

MODEL = "m"
SERVER = Path(ROOT) / "tests" / "support" / "mcp_servers" / "server.py"
MCP_ID = "soak"
TOOLS = ("write", "read", "bash", "mcp")
_ASK = re.compile(r"tool=(\w+) n=(\d+)")
BOUND = 60.0


def _call(kind: str, n: int) -> Any:
    from support.fake_provider import call  # on sys.path once bench.fakes is imported

    ident = f"c{n}"
    if kind == "write":
        return call(ident, "write", {"path": f"notes-{n % 5}.txt", "content": f"{n}\n" * 50})
    if kind == "read":
        return call(ident, "read", {"path": f"notes-{(n - 1) % 5}.txt"})
    if kind == "bash":
        return call(ident, "bash", {"command": f"echo {n} && ls | head -5"})
    return call(ident, f"mcp__{MCP_ID}__echo", {"text": f"ping {n}"})


def respond(record: Recorded) -> Script:
    """A tool call after a user message, a text answer after a tool result; titles as text."""
    if not record.streaming:
        return reply("soak title")
    messages = record.messages
    if messages and messages[-1].get("role") == "tool":
        return answer("Done, the tool answered.")
    users = [m for m in messages if m.get("role") == "user"]
    found = _ASK.search(str(users[-1].get("content") or "")) if users else None
    kind, n = (found.group(1), int(found.group(2))) if found else ("bash", 0)
    from support.fake_provider import tools

    return tools(_call(kind, n))


def start_fake() -> FakeProvider:
    fake = FakeProvider()
    fake.models = [MODEL]
    fake.respond = respond
    fake.keep_alive_timeout = 300
    fake.start()
    return fake


def mcp_config(enabled: bool) -> dict[str, Any]:
    server = {
        "id": MCP_ID, "name": "soak", "enabled": True, "transport": "stdio",
        "command": sys.executable, "args": [str(SERVER), "stdio"],
    }  # fmt: skip
    return {"version": 1, "servers": [server] if enabled else []}


def _ok(resp: Any, *codes: int) -> Any:
    if resp.status_code not in codes:
        raise RuntimeError(f"{resp.request.method} {resp.request.url.path}: {resp.status_code} "
                           f"{resp.text[:300]}")  # fmt: skip
    return resp.json() if resp.content else None


class Loads:
    """Every kind of load, with its counts and failures."""

    def __init__(self, kernel: KernelProcess, procs: Processes, workdir: str, conn: str) -> None:
        self.kernel, self.procs, self.workdir, self.conn = kernel, procs, workdir, conn
        self.http = kernel.http
        self.done: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.backups: list[dict[str, float]] = []
        self.mcp_reconnect_s: list[float] = []
        self.automation = ""
        self._last_run_session = ""

    def count(self, kind: str, ok: bool = True) -> None:
        table = self.done if ok else self.failed
        table[kind] = table.get(kind, 0) + 1

    # -- sessions ------------------------------------------------------------------------------

    def new_session(self) -> str:
        body = {"connection_id": self.conn, "model": MODEL, "approval_mode": "full_access"}
        self.count("sessions_created")
        return str(_ok(self.http.post("/sessions", json=body), 200, 201)["id"])

    def fork(self, session: str) -> str:
        self.count("sessions_forked")
        return str(_ok(self.http.post(f"/sessions/{session}/fork", json={}), 200, 201)["id"])

    def delete(self, session: str) -> None:
        _ok(self.http.delete(f"/sessions/{session}"), 204)
        self.count("sessions_deleted")

    # -- turns and streams ---------------------------------------------------------------------

    def turn(self, session: str, n: int) -> None:
        message = f"tool={TOOLS[n % len(TOOLS)]} n={n}"
        sse = SSE()
        with self.http.stream("GET", f"/sessions/{session}/events") as stream:
            lines = stream.iter_lines()
            for line in lines:
                sse.feed(line)
                if sse.subscribed:
                    break
            _ok(self.http.post(f"/sessions/{session}/turns", json={"message": message}), 200)
            for line in lines:
                frame = sse.feed(line)
                if frame is not None and frame.event == "turn_complete":
                    break
        self.count("turns")

    def sse_drop(self, session: str) -> None:
        sse = SSE()
        with self.http.stream("GET", f"/sessions/{session}/events", params={"after": 0}) as s:
            for line in s.iter_lines():
                if sse.feed(line) is not None:
                    break  # one frame in: hang up mid-replay
        self.count("sse_drops")

    # -- terminals -----------------------------------------------------------------------------

    def terminal(self, session: str) -> None:
        base = f"/sessions/{session}/terminals"
        ref = _ok(self.http.post(base, json={"cols": 80, "rows": 24}), 201)["ref"]
        _ok(self.http.post(f"{base}/{ref}/input", json={"input": "echo soak-$((6*7))\n"}), 204)
        deadline = time.monotonic() + 10
        while "soak-42" not in (_ok(self.http.get(f"{base}/{ref}"), 200).get("buffer") or ""):
            if time.monotonic() > deadline:
                self.count("terminals", ok=False)
                break
            time.sleep(0.02)
        _ok(self.http.delete(f"{base}/{ref}"), 204)
        self.count("terminals")

    # -- MCP -----------------------------------------------------------------------------------

    def mcp_status(self) -> dict[str, Any]:
        found = [s for s in _ok(self.http.get("/mcp/status"), 200) if s["id"] == MCP_ID]
        return found[0] if found else {}

    def mcp_wait(self, restarts_above: int = -1) -> None:
        started = time.monotonic()
        while True:
            status = self.mcp_status()
            if status.get("state") == "connected" and status.get("restarts", 0) > restarts_above:
                self.mcp_reconnect_s.append(time.monotonic() - started)
                return
            if time.monotonic() - started > BOUND:
                raise RuntimeError(f"MCP server not connected again: {status}")
            time.sleep(0.05)

    def mcp_server_pid(self) -> int:
        """The stdio server: a descendant of the kernel whose command line names server.py."""
        todo, seen = [self.kernel.proc.pid], []
        while todo:
            pid = todo.pop()
            for task in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{task}/children") as fh:
                        kids = [int(k) for k in fh.read().split()]
                except OSError:
                    continue
                todo += kids
                seen += kids
        for pid in seen:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if str(SERVER).encode() in fh.read():
                        return pid
            except OSError:
                continue
        raise RuntimeError("no MCP server process under the kernel")

    def mcp_kill(self, k: int) -> None:
        if k % 2:
            before = self.mcp_status().get("restarts", 0)
            os.kill(self.mcp_server_pid(), signal.SIGKILL)
            self.mcp_wait(before)
        else:
            _ok(self.http.put("/mcp", json=mcp_config(False)), 200)
            _ok(self.http.put("/mcp", json=mcp_config(True)), 200)
            self.mcp_wait()
        self.count("mcp_kills")

    # -- automations and backups ---------------------------------------------------------------

    def create_automation(self) -> None:
        body = {
            "name": "soak", "prompt": "tool=bash n=0 (automation)", "cron": "* * * * *",
            "enabled": False, "connection_id": self.conn, "model": MODEL,
            "approval_mode": "full_access",
        }  # fmt: skip
        self.automation = str(_ok(self.http.post("/automations", json=body), 201)["id"])

    def _automation_idle(self) -> dict[str, Any]:
        deadline = time.monotonic() + BOUND
        while True:
            wire: dict[str, Any] = _ok(self.http.get(f"/automations/{self.automation}"), 200)
            if wire["last_status"] != "running" or time.monotonic() > deadline:
                return wire
            time.sleep(0.05)

    def automation_run(self) -> None:
        """Run it; delete the previous run's session (a person clears them)."""
        self._automation_idle()
        _ok(self.http.post(f"/automations/{self.automation}/run"), 202)
        wire = self._automation_idle()
        self.count("automation_runs", ok=wire["last_status"] == "completed")
        if wire.get("last_session_id"):
            self.delete(wire["last_session_id"])

    def backup(self, k: int) -> None:
        archive = os.path.join(self.workdir, f"backup-{k}.tar")
        argv = [sys.executable, "-m", "app", "backup", archive, "--data-dir",
                self.kernel.data_dir]  # fmt: skip
        env = child_env({"HOME": os.path.join(self.workdir, "home")})
        started = time.monotonic()
        proc = spawn(self.procs, argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, err = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"backup exited {proc.returncode}: {err.decode()[-500:]}")
        self.backups.append(
            {"seconds": round(time.monotonic() - started, 2),
             "mb": round(os.path.getsize(archive) / 1e6, 2)}
        )  # fmt: skip
        os.remove(archive)
        self.count("backups")
