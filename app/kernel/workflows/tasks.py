"""The session's task list as the model keeps it (Foya's `read_tasks` and `update_tasks`).

`update_tasks {tasks: [{content, status}]}` replaces the whole list: at most 100 tasks, each
`content` (whitespace collapsed) 1 to 200 characters, `status` pending, in_progress or
completed, at most one in_progress. It is stored on the session (`tasks`, through
`Sessions.save`, so `session_updated` carries it) and answers `{total, completed, in_progress?,
just_completed?}`; a list that breaks a rule is refused and changes nothing. `read_tasks {}`
answers `{tasks, total, completed, in_progress?}`. Neither asks for approval: they change only
the session's own list.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from app.errors import FoyaError
from app.jsontypes import JSONObject
from app.kernel.sessions import Sessions
from app.tools import Tool, ToolError, ToolResult
from app.tools.base import Action, ToolContext, schema

MAX_TASKS = 100
MAX_CONTENT = 200
TaskStatus = Literal["pending", "in_progress", "completed"]
STATUSES: tuple[TaskStatus, ...] = ("pending", "in_progress", "completed")

TASK_SCHEMA = {
    "type": "object",
    "properties": {
        "content": {
            "type": "string",
            "minLength": 1,
            "description": f"Concise task description, {MAX_CONTENT} characters or fewer.",
        },
        "status": {"type": "string", "enum": list(STATUSES)},
    },
    "required": ["content", "status"],
    "additionalProperties": False,
}


class Task(TypedDict):
    """One item of a session's `tasks`."""

    content: str
    status: TaskStatus


def normalized(raw: Any) -> list[Task]:
    """`raw` as a task list, or `ToolError` saying which rule it breaks."""
    if not isinstance(raw, list):
        raise ToolError("invalid arguments: tasks must be an array")
    if len(raw) > MAX_TASKS:
        raise ToolError(f"tasks may contain at most {MAX_TASKS} items")
    tasks: list[Task] = []
    for number, item in enumerate(raw, 1):
        content = item.get("content") if isinstance(item, dict) else None
        status = item.get("status") if isinstance(item, dict) else None
        if not isinstance(content, str) or not content.split():
            raise ToolError(f"task {number} content is required")
        text = " ".join(content.split())
        if len(text) > MAX_CONTENT:
            raise ToolError(f"task {number} content must be {MAX_CONTENT} characters or fewer")
        if status not in STATUSES:
            raise ToolError(f"task {number} has invalid status {json.dumps(status)}")
        tasks.append({"content": text, "status": status})
    if sum(t["status"] == "in_progress" for t in tasks) > 1:
        raise ToolError("at most one task may be in_progress")
    return tasks


class Tally(TypedDict):
    """What a task tool answers besides the list: counts, the task in progress, and the tasks
    this call completed."""

    total: int
    completed: int
    in_progress: NotRequired[str]
    just_completed: NotRequired[list[str]]


def _tally(tasks: list[Task]) -> Tally:
    out: Tally = {
        "total": len(tasks),
        "completed": sum(t["status"] == "completed" for t in tasks),
    }
    doing = [t["content"] for t in tasks if t["status"] == "in_progress"]
    if doing:
        out["in_progress"] = doing[0]
    return out


def _compact(value: Mapping[str, object]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _TaskTool:
    """A tool on the session's own task list: no path, no approval."""

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    def action(self, args: JSONObject) -> Action:
        return "read"

    def resource(self, args: JSONObject, ctx: ToolContext) -> Path | None:
        return None

    async def _tasks(self, session: str) -> list[Task]:
        try:
            row = await self.sessions.row(session)
        except FoyaError as exc:
            raise ToolError(exc.message) from None
        raw = row.get("tasks_json")
        return list(json.loads(raw)) if raw else []


class ReadTasks(_TaskTool):
    name = "read_tasks"
    description = (
        "Read this session's whole task list; use it before updating the tasks when you need "
        "the latest list."
    )
    parameters = schema({}, [])
    parallel = True

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        tasks = await self._tasks(ctx.session)
        return ToolResult(_compact({"tasks": tasks, **_tally(tasks)}))


class UpdateTasks(_TaskTool):
    name = "update_tasks"
    description = (
        "Create or replace this session's task list, to track progress on multi-step work "
        "(skip it for simple one-step tasks). Send every task that should remain; at most one "
        "may be in_progress."
    )
    parameters = schema(
        {
            "tasks": {
                "type": "array",
                "maxItems": MAX_TASKS,
                "description": "The complete task list that should remain for this session.",
                "items": TASK_SCHEMA,
            }
        },
        ["tasks"],
    )

    async def run(self, args: JSONObject, ctx: ToolContext) -> ToolResult:
        tasks = normalized(args.get("tasks"))
        before = {t["content"]: t["status"] for t in await self._tasks(ctx.session)}
        stored = json.dumps(tasks, ensure_ascii=False) if tasks else None
        try:
            await self.sessions.save(ctx.session, {"tasks_json": stored})
        except FoyaError as exc:
            raise ToolError(f"update tasks failed: {exc.message}") from None
        out = _tally(tasks)
        done = [
            t["content"]
            for t in tasks
            if t["status"] == "completed" and before.get(t["content"], "completed") != "completed"
        ]
        if done:
            out["just_completed"] = done
        return ToolResult(_compact(out))


def task_tools(sessions: Sessions) -> dict[str, Tool]:
    """The task tools, by name."""
    tools: list[Tool] = [ReadTasks(sessions), UpdateTasks(sessions)]
    return {t.name: t for t in tools}
