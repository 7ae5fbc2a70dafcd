"""Project trust: a project's own executable configuration runs only once the user trusts it,
and that trust is bound to the content (VS Code's workspace trust, direnv's `allow`).

What counts as executable configuration (`EXECUTABLE`): the files below a project that make the
kernel start a process by themselves. Today that is `<project>/.foya/hooks.json` alone: hook
commands run as `/bin/sh -c` at points of a turn, and a PermissionRequest hook may decide an
approval. Everything else a project can hold is prompt text the model reads, and whatever the
model then does goes through approvals like any other tool call: rules and AGENTS.md; commands
(`.foya/commands/*.md`, a template expanded into a user message, never a shell); skills
(`SKILL.md` and its resources: scripts in a skill are files the model may read or ask to run with
`bash`, which asks; `allowed-tools` is shown, never a grant); agent definitions (instructions and
a tool list that only narrows what a child may use; the child keeps its parent's approval mode).
MCP servers are configured only in the user's `~/.foya/mcp.json`; a project declares none. A new
reader of a project file that can start something must add its file here.

The rule, owned here: a project's `Snapshot` is the bytes of those files read once, with their
digest (sha256 over each file's relative path, presence and bytes). Trusting a project stores
that digest in `<data-dir>/trust.json` (atomic, 0600), bound to the project's id and directory;
the project is trusted while the digest of its files now is the one stored, so any change
(a `git pull`, a hand edit, a file that appears) makes it untrusted again until the user trusts
the new content. The reader runs what it parsed from the snapshot's bytes, never a second read,
so what runs is exactly what was hashed. The user's own configuration (`~/.foya`) is always
trusted. A write through the kernel's own `PUT /hooks` re-binds trust to what it wrote when the
files were trusted (or held nothing executable) just before: the user authored all of it.

When a session's turn would have run something of an untrusted project, `project_trust_requested`
(project id, path, digest and what would run) is announced on the context journal once per
(project, digest) and kernel process; nothing runs.

Errors (rendered by `app.http.errors`): `ProjectNotFound` 404 `project_not_found`;
`TrustChanged` 409 `trust_digest_changed` (`PUT` named a digest that is no longer the files').
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from pydantic import BaseModel, WithJsonSchema

from app.errors import Conflict
from app.files import write_json_atomic
from app.kernel.hooks.config import HOOKS_FILE, MAX_FILE_BYTES, HooksUnreadable, parse
from app.kernel.hooks.ports import Snapshot
from app.kernel.ids import iso_now
from app.kernel.projects import Projects
from app.kernel.usercontext.journal import ContextJournal
from app.logs import get_logger

#: Every project file that can make the kernel run something by itself.
EXECUTABLE = (HOOKS_FILE,)
TRUST_FILE = "trust.json"
PROJECT_TRUST_REQUESTED = "project_trust_requested"
State = Literal["trusted", "untrusted", "none"]


class TrustRequested(TypedDict):
    """The `project_trust_requested` notice: the project, and what it would run if trusted."""

    project_id: str
    path: str
    digest: str
    runs: list[Mapping[str, object]]


class TrustChanged(Conflict):
    """The client trusted content that has changed since it looked."""

    code = "trust_digest_changed"


class Runnable(BaseModel):
    """One thing a project would run, and the file that says so."""

    # An enum, not pydantic's `const`, in the schema: client generators read enums everywhere.
    kind: Annotated[Literal["hook"], WithJsonSchema({"type": "string", "enum": ["hook"]})]
    file: str
    event: str
    command: str
    name: str | None = None
    matcher: str | None = None
    enabled: bool = True
    may_approve: bool = False


class TrustInfo(BaseModel):
    """A project's trust (`GET /projects/{id}/trust`): `state` is `trusted` when the digest of
    its executable files is the one the user trusted, `untrusted` when not, `none` when it has
    no executable file at all (then nothing of it runs either way)."""

    project_id: str
    path: str
    state: State
    digest: str
    trusted_digest: str | None = None
    trusted_at: str | None = None
    files: list[str]
    runs: list[Runnable]
    errors: list[str]


def digest_of(files: Mapping[str, bytes]) -> str:
    """The digest of a project's executable files: each of `EXECUTABLE`, present or not, with
    its bytes, framed so no two different sets of files hash alike."""
    h = hashlib.sha256(b"foya-project-trust-1\0")
    for rel in EXECUTABLE:
        data = files.get(rel)
        h.update(rel.encode() + b"\0")
        h.update(b"-\0" if data is None else f"{len(data)}\0".encode() + data)
    return "sha256:" + h.hexdigest()


def _read(path: Path) -> bytes | None:
    """A regular file's bytes (None if absent); never blocks on a FIFO or reads a device, and
    reads at most one byte past the size limit (the parser then refuses it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # a link loop, no permission: hashed like content, refused by parse
        return f"\0unreadable: {exc.strerror or exc}".encode()
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b"\0not a regular file"  # hashed like content; the parser refuses it
        return f.read(MAX_FILE_BYTES + 1)


def runnables(files: Mapping[str, bytes]) -> tuple[list[Runnable], list[str]]:
    """What `files` would run, and why some of it cannot be read."""
    runs: list[Runnable] = []
    errors: list[str] = []
    data = files.get(HOOKS_FILE)
    if data is not None:
        try:
            hooks = parse(data, HOOKS_FILE)
        except HooksUnreadable as exc:
            errors.append(exc.message)
            hooks = []
        runs += [
            Runnable(
                kind="hook",
                file=HOOKS_FILE,
                event=h.event,
                command=h.command,
                name=h.name or None,
                matcher=h.matcher or None,
                enabled=h.enabled is not False,
                may_approve=h.may_approve,
            )
            for h in hooks
        ]
    return runs, errors


@dataclass
class ProjectTrust:
    """The trusted digests of every project, and the answer for one."""

    data_dir: Path
    projects: Projects
    journal: ContextJournal
    _trusted: dict[str, dict[str, str]] | None = None
    _asked: set[tuple[str, str]] = field(default_factory=set)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def _store(self) -> dict[str, dict[str, str]]:
        if self._trusted is None:
            self._trusted = self._load()
        return self._trusted

    def _load(self) -> dict[str, dict[str, str]]:
        """`trust.json`'s entries; a file that cannot be read trusts nothing (fail closed)."""
        try:
            raw = json.loads((self.data_dir / TRUST_FILE).read_text(encoding="utf-8"))
            entries = raw["projects"]
            return {
                str(pid): {k: str(e[k]) for k in ("path", "digest", "trusted_at")}
                for pid, e in entries.items()
            }
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            get_logger("foya.trust").warning(
                "trust.json unreadable, no project trusted", error=str(exc)
            )
            return {}

    def _save(self) -> None:
        write_json_atomic(self.data_dir / TRUST_FILE, {"version": 1, "projects": self._store()})

    def snapshot(self, project_id: str) -> Snapshot:
        """Read the project's executable files once and say whether that content is trusted."""
        root = Path(self.projects.get(project_id)["path"])
        files = {rel: data for rel in EXECUTABLE if (data := _read(root / rel)) is not None}
        digest = digest_of(files)
        entry = self._store().get(project_id)
        trusted = entry is not None and entry["digest"] == digest and entry["path"] == str(root)
        return Snapshot(project_id, root, files, digest, trusted)

    def info(self, project_id: str) -> TrustInfo:
        """`GET /projects/{id}/trust`."""
        return self._info(self.snapshot(project_id))

    def _info(self, snap: Snapshot) -> TrustInfo:
        runs, errors = runnables(snap.files)
        entry = self._store().get(snap.project_id)
        state: State = "trusted" if snap.trusted else "untrusted"
        return TrustInfo(
            project_id=snap.project_id,
            path=str(snap.path),
            state=state if snap.files else "none",
            digest=snap.digest,
            trusted_digest=entry["digest"] if entry else None,
            trusted_at=entry["trusted_at"] if entry else None,
            files=sorted(snap.files),
            runs=runs,
            errors=errors,
        )

    async def trust(self, project_id: str, seen: str | None = None) -> TrustInfo:
        """`PUT /projects/{id}/trust`: trust the files as they are now; with `seen`, only if
        that is still their digest (else `TrustChanged`, and nothing changes)."""
        async with self._lock:
            snap = self.snapshot(project_id)
            if seen is not None and seen != snap.digest:
                raise TrustChanged(
                    f"the project's executable files changed since {seen}: they are now "
                    f"{snap.digest}; review GET /projects/{project_id}/trust again"
                )
            await self._bind(snap.project_id, snap.path, snap.digest)
            return self._info(self.snapshot(project_id))

    async def untrust(self, project_id: str) -> TrustInfo:
        """`DELETE /projects/{id}/trust`: nothing of the project runs until trusted again."""
        async with self._lock:
            self.projects.get(project_id)
            if self._store().pop(project_id, None) is not None:
                await asyncio.to_thread(self._save)
            return self.info(project_id)

    async def forget(self, project_id: str) -> None:
        """Drop a deleted project's trust (a project registered again starts untrusted)."""
        async with self._lock:
            if self._store().pop(project_id, None) is not None:
                await asyncio.to_thread(self._save)

    async def adopt(self, before: Snapshot, rel: str, written: bytes) -> None:
        """The user wrote `written` as `rel` through the kernel: if the files were trusted, or
        held nothing executable, just before, trust what they hold now (computed from the
        bytes written, not read back, so a change racing the write is not trusted)."""
        if not (before.trusted or not before.files):
            return
        async with self._lock:
            digest = digest_of({**before.files, rel: written})
            await self._bind(before.project_id, before.path, digest)

    async def _bind(self, project_id: str, root: Path, digest: str) -> None:
        entry = {"path": str(root), "digest": digest, "trusted_at": iso_now()}
        self._store()[project_id] = entry
        await asyncio.to_thread(self._save)

    async def requested(self, snap: Snapshot) -> None:
        """A turn would have run something of the untrusted `snap`: announce what the project
        would run, once per (project, digest) and process."""
        key = (snap.project_id, snap.digest)
        if snap.trusted or key in self._asked:
            return
        self._asked.add(key)
        payload: TrustRequested = {
            "project_id": snap.project_id,
            "path": str(snap.path),
            "digest": snap.digest,
            "runs": [r.model_dump(exclude_none=True) for r in runnables(snap.files)[0]],
        }
        await self.journal.append(PROJECT_TRUST_REQUESTED, payload)
