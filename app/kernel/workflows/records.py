"""Workflow records (Foya's `workflow.Record`): on the wire, in `<data-dir>/workflows.json`, and
as the plan file a record names.

`workflows.json` is Foya's: a JSON array of records, written atomically (temp file, fsync,
rename; mode 0600). A record that is not a valid plan workflow is skipped with a warning, as
Foya skips it; a file that is not a JSON array is copied aside to
`workflows.json.unreadable-<unix time>` and the kernel starts without it (Foya would refuse to
start).

Each record's `path` is a Markdown file under `<session directory>/.foya/plans/` (the
project's directory, or the session's managed workspace), holding front matter (`kind`,
`status`, `goal`) and the plan, rewritten on every change: the model can `read` it when it
executes the plan. Like the command files, it is never written through a symbolic link.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, WithJsonSchema

from app.errors import FoyaError
from app.files import replace_atomic, write_json_atomic
from app.logs import get_logger

FILE = "workflows.json"
PLANS = (".foya", "plans")
PENDING = "Planning in progress."

Status = Literal["active", "ready", "approved", "completed", "closed"]
#: A workflow that still holds its session in plan mode (Foya's "active" workflow).
OPEN: tuple[Status, ...] = ("active", "ready")

log = get_logger("foya.workflows")


class Workflow(BaseModel):
    """A workflow as clients see it and as the file keeps it (Foya's fields; `content` is the
    plan once it is `ready`). Foya's `spec` and `goal` kinds, and the `title`, `artifact_root`
    and `artifacts` only they use, are not implemented."""

    model_config = ConfigDict(frozen=True)

    id: str
    session_id: str
    kind: Annotated[Literal["plan"], WithJsonSchema({"type": "string", "enum": ["plan"]})]
    status: Status
    goal: str
    content: str | None = None
    path: str
    revision: int
    created_at: str
    updated_at: str

    def payload(self) -> dict[str, object]:
        """The record as `workflow_updated` carries it (absent optionals omitted)."""
        return self.model_dump(exclude_none=True)


def load(path: Path) -> dict[str, Workflow]:
    """The records of `path` by id (none if it does not exist)."""
    try:
        raw = json.loads(path.read_bytes())
        if not isinstance(raw, list):
            raise ValueError("not a JSON array")
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        aside = path.with_name(f"{path.name}.unreadable-{int(time.time())}")
        path.replace(aside)
        log.error("workflows file unreadable; moved aside", path=str(aside), error=str(exc))
        return {}
    found: dict[str, Workflow] = {}
    for item in raw:
        try:
            record = Workflow.model_validate(item)
        except ValidationError as exc:
            log.warning("workflow record skipped", error=str(exc).splitlines()[0])
            continue
        if record.id and record.session_id:
            found[record.id] = record
    return found


def save(path: Path, records: Iterable[Workflow]) -> None:
    """Write every record to `path`, atomically."""
    write_json_atomic(path, [r.payload() for r in records])


def plan_path(base: Path, workflow_id: str) -> Path:
    return base.joinpath(*PLANS, f"{workflow_id}.md")


def write_plan(record: Workflow) -> None:
    """Rewrite the record's plan file. The session's directory must exist; `.foya` and `plans`
    below it are made 0700 when absent and must not be links or files."""
    target = Path(record.path)
    base = target.parents[len(PLANS)]
    if not base.is_dir():
        raise FoyaError(f"cannot write the plan: {base} is not a directory")
    current = base
    for part in PLANS:
        current = current / part
        if current.is_symlink() or (current.exists() and not current.is_dir()):
            raise FoyaError(f"cannot write the plan: {current} is a link or a file")
        current.mkdir(mode=0o700, exist_ok=True)
    text = (
        f"---\nkind: {record.kind}\nstatus: {record.status}\n"
        f"goal: {json.dumps(record.goal, ensure_ascii=False)}\n---\n\n"
        f"{record.content or PENDING}\n"
    )
    # A rename replaces a link at the target itself: nothing is written through it.
    replace_atomic(target, text.encode(), mode=0o600)
