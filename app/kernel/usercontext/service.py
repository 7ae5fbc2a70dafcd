"""The kernel's rule and memory service (Foya's `contextdata`): the API's rules and memories.

Each change is written to its Markdown file first, then announced through the context journal
(when there is one) as `rule_created`, `rule_updated`, `rule_deleted`, `memory_created`,
`memory_updated`, `memory_deleted` or `memory_settings_updated` with a payload of `rule`,
`memory`, `deleted_id` or `memory_settings`, as Foya's context events carry them.

Memory is one document per scope: creating appends to it (a fact it already holds is not
repeated), PATCH replaces it. `<data-dir>/context/memory-settings.json` holds `{enabled}`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from app.files import write_json_atomic
from app.kernel.ids import iso_now, new_id
from app.kernel.projects import Projects
from app.kernel.usercontext.files import ContextFiles, GlobalRule
from app.kernel.usercontext.items import (
    MAX_MEMORY_CHARS,
    MAX_RULE_CHARS,
    SCOPES,
    ContextItemNotFound,
    InvalidContextItem,
    Memory,
    MemorySettings,
    Rule,
    apply_defaults,
    clean_content,
    rule_path,
)
from app.kernel.usercontext.journal import ContextJournal, ContextNotice
from app.text.surrogates import scrub

T = TypeVar("T")
RULE_OPTIONS = ("name", "description", "trigger", "globs", "path")


class UserContext:
    """Rules and memory of the user and of each project, over `ContextFiles`."""

    def __init__(
        self, home: Path, data_dir: Path, projects: Projects, journal: ContextJournal
    ) -> None:
        self.files = ContextFiles(home)
        self.projects = projects
        self.journal = journal
        self.settings_file = data_dir / "context" / "memory-settings.json"
        self._lock = asyncio.Lock()

    async def _run(self, work: Callable[[], T]) -> T:
        """File work off the event loop, one change at a time."""
        async with self._lock:
            return await asyncio.to_thread(work)

    async def _announce(self, kind: str, payload: ContextNotice) -> None:
        await self.journal.append(kind, payload)

    def _project(self, scope: str, project_id: str | None) -> tuple[str | None, Path | None]:
        """(project id, project directory) of a scope; None, None for `global`."""
        if scope not in SCOPES:
            raise InvalidContextItem("scope: must be global or project")
        if scope == "global":
            return None, None
        if not project_id or not project_id.strip():
            raise InvalidContextItem("project_id is required for scope project")
        return project_id, Path(self.projects.get(project_id)["path"])

    def _all_projects(self) -> list[tuple[str, Path]]:
        return [(p["id"], Path(p["path"])) for p in self.projects.all()]

    # Rules --------------------------------------------------------------------------------

    async def rules(self, scope: str, project_id: str | None) -> list[Rule]:
        pid, root = self._project(scope, project_id)
        if pid is None or root is None:
            found = [r for r, _ in await self._run(self.files.global_rules)]
        else:
            found = [r for r, _ in await self._run(lambda: self.files.project_rules(pid, root))]
        return sorted(found, key=lambda r: (r.updated_at, r.id))

    async def create_rule(self, scope: str, project_id: str | None, fields: dict[str, Any]) -> Rule:
        """A new rule from `content` and the optional `RULE_OPTIONS` in `fields`."""
        pid, root = self._project(scope, project_id)
        fields = scrub(fields)  # a lone surrogate cannot be written as UTF-8
        stamp = iso_now()
        rule = Rule(
            id=new_id(),
            name="",
            trigger="",
            scope="global" if pid is None else "project",
            project_id=pid,
            content=clean_content(fields.get("content") or "", MAX_RULE_CHARS),
            created_at=stamp,
            updated_at=stamp,
        )
        _apply_options(rule, fields)

        def write() -> None:
            if root is None:
                self.files.write_global_rules([*self.files.global_rules(), (rule, None)])
            else:
                self._write_project_rule(root, rule, old=None)

        await self._run(write)
        await self._announce("rule_created", {"rule": rule.model_dump(exclude_none=True)})
        return rule

    async def update_rule(self, rule_id: str, fields: dict[str, Any]) -> Rule:
        """Change what `fields` holds (`content` and `RULE_OPTIONS`); keep every other field."""
        fields = scrub(fields)

        projects = self._all_projects()

        def write() -> Rule:
            rules, root, old = self._find_rule(rule_id, projects)
            rule = next(r for r, _ in rules if r.id == rule_id).model_copy(deep=True)
            if "content" in fields:
                rule.content = clean_content(fields["content"] or "", MAX_RULE_CHARS)
            rule.error = None
            _apply_options(rule, fields)
            rule.updated_at = iso_now()
            if root is None:
                self.files.write_global_rules(
                    [(rule, None) if r.id == rule_id else (r, raw) for r, raw in rules]
                )
            else:
                self._write_project_rule(root, rule, old=old)
            return rule

        rule = await self._run(write)
        await self._announce("rule_updated", {"rule": rule.model_dump(exclude_none=True)})
        return rule

    async def delete_rule(self, rule_id: str) -> None:
        projects = self._all_projects()

        def remove() -> None:
            rules, root, old = self._find_rule(rule_id, projects)
            if root is None:
                self.files.write_global_rules([(r, raw) for r, raw in rules if r.id != rule_id])
            elif old is not None:
                old.unlink(missing_ok=True)

        await self._run(remove)
        await self._announce("rule_deleted", {"deleted_id": rule_id})

    def _find_rule(
        self, rule_id: str, projects: list[tuple[str, Path]]
    ) -> tuple[list[GlobalRule], Path | None, Path | None]:
        """(the rules of its scope, the project directory or None, its file if a project's)."""
        found = self.files.global_rules()
        if any(r.id == rule_id for r, _ in found):
            return found, None, None
        for pid, root in projects:
            for rule, path in self.files.project_rules(pid, root):
                if rule.id == rule_id:
                    return [(rule, None)], root, path
        raise ContextItemNotFound(f"rule {rule_id} not found")

    def _write_project_rule(self, root: Path, rule: Rule, old: Path | None) -> None:
        assert rule.path is not None  # apply_defaults gives every project rule a path
        target = self.files.project_rule_file(root, rule.path)
        if target != old and target.exists():
            raise InvalidContextItem(f"path: a rule file {rule.path} already exists")
        self.files.write_project_rule(target, rule)
        if old is not None and old != target:
            old.unlink(missing_ok=True)

    # Memory -------------------------------------------------------------------------------

    async def memories(self, scope: str, project_id: str | None) -> list[Memory]:
        pid, root = self._project(scope, project_id)
        found = await self._run(lambda: self.files.memory(pid, root))
        return [found] if found is not None else []

    async def create_memory(self, scope: str, project_id: str | None, content: str) -> Memory:
        """Append `content` to the scope's memory document (created when absent)."""
        pid, root = self._project(scope, project_id)
        fact = clean_content(scrub(content), MAX_MEMORY_CHARS)

        def write() -> tuple[str, Memory]:
            memory = self.files.memory(pid, root)
            stamp = iso_now()
            if memory is None:
                memory = Memory(
                    id=new_id(),
                    scope="global" if pid is None else "project",
                    project_id=pid,
                    content=fact,
                    created_at=stamp,
                    updated_at=stamp,
                )
                kind = "memory_created"
            else:
                kind = "memory_updated"
                if fact in memory.content:
                    return "", memory
                memory.content = clean_content(memory.content + "\n\n" + fact, MAX_MEMORY_CHARS)
                memory.updated_at, memory.error = stamp, None
            self.files.write_memory(root, memory)
            return kind, memory

        kind, memory = await self._run(write)
        if kind:
            await self._announce(kind, {"memory": memory.model_dump(exclude_none=True)})
        return memory

    async def update_memory(self, memory_id: str, content: str) -> Memory:
        """Replace the whole memory document `memory_id`."""
        text = clean_content(scrub(content), MAX_MEMORY_CHARS)

        projects = self._all_projects()

        def write() -> Memory:
            memory, root = self._find_memory(memory_id, projects)
            memory.content, memory.updated_at, memory.error = text, iso_now(), None
            self.files.write_memory(root, memory)
            return memory

        memory = await self._run(write)
        await self._announce("memory_updated", {"memory": memory.model_dump(exclude_none=True)})
        return memory

    async def delete_memory(self, memory_id: str) -> None:
        projects = self._all_projects()
        await self._run(
            lambda: self.files.write_memory(self._find_memory(memory_id, projects)[1], None)
        )
        await self._announce("memory_deleted", {"deleted_id": memory_id})

    def _find_memory(
        self, memory_id: str, projects: list[tuple[str, Path]]
    ) -> tuple[Memory, Path | None]:
        scopes: list[tuple[str | None, Path | None]] = [(None, None), *projects]
        for pid, root in scopes:
            memory = self.files.memory(pid, root)
            if memory is not None and memory.id == memory_id:
                return memory, root
        raise ContextItemNotFound(f"memory {memory_id} not found")

    # Memory settings ----------------------------------------------------------------------

    def _read_settings(self) -> MemorySettings:
        found = self.files.cached(self.settings_file, _parse_settings)
        return found if found is not None else MemorySettings(enabled=True)  # Foya's default

    def memory_enabled(self) -> bool:
        """The memory switch (blocking, but a stat when the file has not changed)."""
        return self._read_settings().enabled

    async def memory_settings(self) -> MemorySettings:
        return await asyncio.to_thread(self._read_settings)

    async def update_memory_settings(self, enabled: bool) -> MemorySettings:
        """Persist `enabled`; announced only when it changes."""

        def write() -> bool:
            if self._read_settings().enabled == enabled:
                return False
            write_json_atomic(self.settings_file, {"enabled": enabled})
            return True

        settings = MemorySettings(enabled=enabled)
        if await self._run(write):
            await self._announce(
                "memory_settings_updated", {"memory_settings": settings.model_dump()}
            )
        return settings


def _parse_settings(text: str, _: object) -> MemorySettings:
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    enabled = raw.get("enabled") if isinstance(raw, dict) else None
    return MemorySettings(enabled=enabled if isinstance(enabled, bool) else True)


def _apply_options(rule: Rule, fields: dict[str, Any]) -> None:
    """Set the `RULE_OPTIONS` present in `fields` (None clears), then Foya's defaults."""
    for key in ("name", "description", "trigger"):
        if key in fields:
            setattr(
                rule, key, (fields[key] or "").strip() or ("" if key != "description" else None)
            )
    if "globs" in fields:
        rule.globs = [g.strip() for g in fields["globs"] or []] or None
    if "path" in fields and rule.scope == "project":
        rule.path = rule_path(fields["path"]) if (fields["path"] or "").strip() else None
    apply_defaults(rule)
