"""Agent runs: one child agent each, from `queued` to its end, and their durable records.

A run is `queued` until the scheduler admits it, then `running` (its child session is created
and runs one turn), then `completed`, `failed` or `cancelled`; a run the kernel was running or
had queued when it stopped or crashed becomes `interrupted` at the next start and is never run
again. Its record is Foya's snapshot (`AgentRunSnapshot`), also the payload of the parent's
`subagent_*` events.

Records live in `<data-dir>/agent-runs/<run id>.json`, one file per run, each written atomically
(0600) on every change of state, so a write costs one small file however many runs there are,
and a record survives a crash as of its last change. They are removed with their parent session.
Why files and not the event log: the parent's `subagent_*` events hold the same snapshots, but
finding them at start would mean reading every session's events; the files are read in one pass.
A file that cannot be read is logged and left alone; temp files a crash left are deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from app.files import fsync_dir, write_json_atomic
from app.logs import get_logger

DIRECTORY = "agent-runs"
Status = Literal["queued", "running", "completed", "failed", "cancelled", "interrupted"]
ACTIVE: tuple[Status, ...] = ("queued", "running")
INTERRUPTED = "kernel restarted before the agent run completed"
_RUN_FILE = re.compile(r"[0-9a-f]{24}\.json")
_TEMP = re.compile(r"\.[0-9a-f]{24}\.json\.foya-[0-9a-f]{12}\.tmp")


class AgentRunSnapshot(TypedDict):
    """A run as Foya shows it (`GET …/agents`, `subagent_*` payloads); empty fields left out."""

    id: str
    status: Status
    root_session_id: str
    root_run_id: str
    parent_session_id: str
    parent_tool_call_id: NotRequired[str]
    child_session_id: NotRequired[str]
    agent_ref: NotRequired[str]
    agent_name: NotRequired[str]
    task: str
    depth: int
    tokens_used: NotRequired[int]
    output: NotRequired[str]
    error: NotRequired[str]
    created_at: str
    started_at: NotRequired[str]
    completed_at: NotRequired[str]


@dataclass
class AgentRun:
    """A run's record, and (in memory only) its task and the signal that it ended."""

    id: str
    status: Status
    root_session_id: str
    root_run_id: str
    parent_session_id: str
    task: str
    depth: int
    created_at: str
    parent_tool_call_id: str = ""
    child_session_id: str = ""
    agent_ref: str = ""
    agent_name: str = ""
    tokens_used: int = 0
    output: str = ""
    error: str = ""
    started_at: str = ""
    completed_at: str = ""
    ended: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)
    worker: asyncio.Task[None] | None = field(default=None, repr=False, compare=False)
    writing: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False, compare=False)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def wire(self) -> AgentRunSnapshot:
        out: AgentRunSnapshot = {
            "id": self.id,
            "status": self.status,
            "root_session_id": self.root_session_id,
            "root_run_id": self.root_run_id,
            "parent_session_id": self.parent_session_id,
            "task": self.task,
            "depth": self.depth,
            "created_at": self.created_at,
        }
        optional = (
            "parent_tool_call_id",
            "child_session_id",
            "agent_ref",
            "agent_name",
            "tokens_used",
            "output",
            "error",
            "started_at",
            "completed_at",
        )
        for name in optional:
            value = getattr(self, name)
            if value:
                out[name] = value  # type: ignore[literal-required]
        return out

    @classmethod
    def from_wire(cls, raw: object) -> AgentRun:
        """A stored record; `ValueError` if it is not one."""
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        known = {f.name for f in fields(cls) if f.init and f.name not in _MEMORY}
        values = {k: v for k, v in raw.items() if k in known}
        for name in ("id", "status", "root_session_id", "root_run_id", "parent_session_id"):
            if not isinstance(values.get(name), str) or not values[name]:
                raise ValueError(f"{name} is missing")
        if values["status"] not in (*ACTIVE, "completed", "failed", "cancelled", "interrupted"):
            raise ValueError(f"unknown status {values['status']!r}")
        for name, value in values.items():
            wanted = int if name in ("depth", "tokens_used") else str
            if type(value) is not wanted:
                raise ValueError(f"{name} is not {wanted.__name__}")
        values.setdefault("task", "")
        values.setdefault("depth", 1)
        values.setdefault("created_at", "")
        return cls(**values)


_MEMORY = ("ended", "worker", "writing")


class RunFiles:
    """The records on disk."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / DIRECTORY
        self.log = get_logger("foya.agents")

    def load(self) -> list[AgentRun]:
        """Every readable record, oldest first; stray temp files are deleted. Blocking."""
        try:
            names = sorted(os.listdir(self.directory))
        except (FileNotFoundError, NotADirectoryError):
            return []
        runs: list[AgentRun] = []
        for name in names:
            path = self.directory / name
            if _TEMP.fullmatch(name):
                path.unlink(missing_ok=True)
                continue
            if not _RUN_FILE.fullmatch(name):
                continue
            try:
                run = AgentRun.from_wire(json.loads(path.read_bytes()))
                if f"{run.id}.json" != name:
                    raise ValueError("its id is not its file name")
            except (OSError, ValueError) as exc:
                self.log.warning("agent run record left out", path=str(path), error=str(exc))
                continue
            runs.append(run)
        return sorted(runs, key=lambda r: (r.created_at, r.id))

    async def save(self, run: AgentRun) -> None:
        """Write the run's record as it is now (one write at a time per run, so a later state
        is never overwritten by an earlier one)."""
        async with run.writing:
            await asyncio.to_thread(write_json_atomic, self._path(run.id), dict(run.wire()))

    async def remove(self, run: AgentRun) -> None:
        async with run.writing:
            await asyncio.to_thread(self._unlink, run.id)

    def _unlink(self, run_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(run_id).unlink()
            fsync_dir(self.directory)

    def _path(self, run_id: str) -> Path:
        return self.directory / f"{run_id}.json"
