"""Automations as records, on the wire and in `<data-dir>/automations.json`.

The file is Foya's: `{"version": 1, "tasks": [Task, …]}` in creation order, each task in its wire
shape, written atomically (temp file, fsync, rename) with mode 0600 by a worker thread, so the
event loop never waits for the disk. A file that cannot be read whole (not JSON, another
version, a record that is not an automation) is copied aside to
`automations.json.unreadable-<unix time>` and logged; the records that could be read are kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from app.events import iso_time
from app.files import read_versioned_list, write_bytes_atomic, write_json_atomic
from app.logs import get_logger

FILE = "automations.json"
VERSION = 1

RunStatus = Literal["idle", "running", "completed", "failed", "cancelled"]
RUN_STATUSES: tuple[RunStatus, ...] = ("idle", "running", "completed", "failed", "cancelled")


@dataclass(frozen=True)
class AutomationInput:
    """What a client sets (Foya's `Input`); absent fields are their zero values, as Go reads
    them: an automation created without `enabled` is paused."""

    name: str = ""
    prompt: str = ""
    cron: str = ""
    timezone: str = ""
    enabled: bool = False
    connection_id: str = ""
    model: str = ""
    project_id: str = ""
    approval_mode: str = ""


class AutomationWire(TypedDict):
    """An automation as clients see it (Foya's `Task`); empty optionals are omitted."""

    id: str
    name: str
    prompt: str
    cron: str
    timezone: str
    enabled: bool
    connection_id: NotRequired[str]
    model: NotRequired[str]
    project_id: NotRequired[str]
    approval_mode: str
    last_status: RunStatus
    last_error: NotRequired[str]
    last_session_id: NotRequired[str]
    last_run_at: NotRequired[str]
    next_run_at: NotRequired[str]
    created_at: str
    updated_at: str


_OPTIONAL_INPUT = ("connection_id", "model", "project_id")


@dataclass(frozen=True)
class Automation:
    """One automation: its settings (`spec`, normalised) and what its runs left."""

    id: str
    spec: AutomationInput
    created_at: dt.datetime
    updated_at: dt.datetime
    last_status: RunStatus = "idle"
    last_error: str = ""
    last_session_id: str = ""
    last_run_at: dt.datetime | None = None
    next_run_at: dt.datetime | None = None

    def wire(self) -> AutomationWire:
        spec = self.spec
        out: AutomationWire = {
            "id": self.id,
            "name": spec.name,
            "prompt": spec.prompt,
            "cron": spec.cron,
            "timezone": spec.timezone,
            "enabled": spec.enabled,
            "approval_mode": spec.approval_mode,
            "last_status": self.last_status,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
        }
        for key in _OPTIONAL_INPUT:
            if getattr(spec, key):
                out[key] = getattr(spec, key)  # type: ignore[literal-required]
        if self.last_error:
            out["last_error"] = self.last_error
        if self.last_session_id:
            out["last_session_id"] = self.last_session_id
        if self.last_run_at is not None:
            out["last_run_at"] = _iso(self.last_run_at)
        if self.next_run_at is not None:
            out["next_run_at"] = _iso(self.next_run_at)
        return out


def _listed_before(a: Automation, b: Automation) -> int:
    """Foya's `List` order: enabled first, then by next due time, then the most recently
    changed."""
    if a.spec.enabled != b.spec.enabled:
        return -1 if a.spec.enabled else 1
    if a.next_run_at and b.next_run_at and a.next_run_at != b.next_run_at:
        return -1 if a.next_run_at < b.next_run_at else 1
    if a.updated_at != b.updated_at:
        return -1 if a.updated_at > b.updated_at else 1
    return 0


LISTING_ORDER = functools.cmp_to_key(_listed_before)


def _iso(moment: dt.datetime) -> str:
    since = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return iso_time(since // dt.timedelta(microseconds=1) * 1000)


def _time(raw: Any, field: str, *, required: bool = False) -> dt.datetime | None:
    if raw is None and not required:
        return None
    if not isinstance(raw, str):
        raise ValueError(f"{field}: not a time")
    parsed = dt.datetime.fromisoformat(raw)
    if parsed.tzinfo is None:
        raise ValueError(f"{field}: no time zone")
    return parsed.astimezone(dt.UTC)


def from_wire(raw: Any) -> Automation:
    """A stored task (ours or Foya's); ValueError if it is not one. The schedule is checked by
    the service, which parses it anyway."""
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"]:
        raise ValueError("a task without an id")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(AutomationInput):
        value = raw.get(f.name, f.default)
        if not isinstance(value, type(f.default)):
            raise ValueError(f"{raw['id']}: {f.name} has the wrong type")
        values[f.name] = value
    status = raw.get("last_status") or "idle"
    if status not in RUN_STATUSES:
        raise ValueError(f"{raw['id']}: unknown last_status {status!r}")
    text = {k: raw.get(k) or "" for k in ("last_error", "last_session_id")}
    if not all(isinstance(v, str) for v in text.values()):
        raise ValueError(f"{raw['id']}: last_error and last_session_id must be text")
    created = _time(raw.get("created_at"), "created_at", required=True)
    assert created is not None
    return Automation(
        id=raw["id"],
        spec=AutomationInput(**values),
        created_at=created,
        updated_at=_time(raw.get("updated_at"), "updated_at") or created,
        last_status=status,
        last_error=text["last_error"],
        last_session_id=text["last_session_id"],
        last_run_at=_time(raw.get("last_run_at"), "last_run_at"),
        next_run_at=_time(raw.get("next_run_at"), "next_run_at"),
    )


class AutomationFile:
    """`automations.json`: read once at start, rewritten whole on every change."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE
        self.log = get_logger("foya.automations")

    def load(self) -> tuple[list[Automation], list[str]]:
        """The stored automations and what could not be read (missing file: none, none)."""
        tasks, wrong = read_versioned_list(self.path, VERSION, "tasks", "automations file")
        if wrong:
            return [], [wrong]
        found, problems = [], []
        for task in tasks:
            try:
                found.append(from_wire(task))
            except (ValueError, TypeError) as exc:
                problems.append(str(exc))
        return found, problems

    def keep_aside(self, problems: list[str]) -> None:
        """Copy the file as it is beside it, before a save drops what could not be read."""
        aside = self.path.with_name(f"{FILE}.unreadable-{int(time.time())}")
        write_bytes_atomic(aside, self.path.read_bytes())
        self.log.warning(
            "automations.json: kept what could be read; the file is kept aside",
            kept_at=str(aside),
            problem=problems[0],
            problems=len(problems),
        )

    async def save(self, items: Iterable[Automation]) -> None:
        """Write every automation, in a worker thread."""
        document = {"version": VERSION, "tasks": [item.wire() for item in items]}
        await asyncio.to_thread(write_json_atomic, self.path, document)
