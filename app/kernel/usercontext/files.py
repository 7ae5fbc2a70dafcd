"""Rules and memory as the user's Markdown files: the files are the source of truth.

    ~/.foya/rules/user_rules.md                              global rules (marked blocks)
    ~/.foya/memory/user_profile.md                           global memory
    ~/.foya/memory/projects/<project path>/project_memory.md  a project's memory
    <project>/.foya/rules/**/*.md                            project rules, one per file

`~` is the kernel's home directory (`HOME`), as `Settings.protected_paths` has it. Every read
stats the file and re-parses it only when its mtime or size changed, so a hand edit shows on the
next request without a restart. Writes are atomic (`app.files`), files 0600, new directories
0700. Below a project, no directory on the way to a rule file may be a symbolic link: a rule is
never read from or written to a place outside `<project>/.foya/rules`. A file's text becomes
rules or a memory in `fileparse`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from app.events import iso_time
from app.files import replace_atomic
from app.jsontypes import JSONObject
from app.kernel.usercontext.fileparse import (
    MEMORY_HEADINGS,
    parse_memory,
    parse_project_rule,
    parsed_rule,
)
from app.kernel.usercontext.items import (
    MAX_RULE_CHARS,
    MAX_RULE_DIRS,
    InvalidContextItem,
    Memory,
    Rule,
    stable_id,
)
from app.kernel.usercontext.markdown import parse_blocks, render_block, render_front_matter

RULES_HEADING = "# Foya User Rules"
_META = ("id", "name", "description", "trigger", "globs", "path", "created_at", "updated_at")

T = TypeVar("T")
GlobalRule = tuple[Rule, str | None]
"""A global rule and, when its block is malformed, the block's text (written back unchanged)."""


class ContextFiles:
    """Reads and writes the rule and memory files, caching each parse by path, mtime and size."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.rules_file = home / "rules" / "user_rules.md"
        self._cache: dict[Path, tuple[tuple[int, int], Any]] = {}

    def cached(self, path: Path, parse: Callable[[str, os.stat_result], T]) -> T | None:
        """`parse(text, stat)` of `path`, re-run only when its mtime or size changed; None when
        the file is absent."""
        try:
            st = path.stat()
            key = (st.st_mtime_ns, st.st_size)
            hit = self._cache.get(path)
            if hit is not None and hit[0] == key:
                value: T = hit[1]
            else:
                value = parse(path.read_text(encoding="utf-8", errors="replace"), st)
                self._cache[path] = (key, value)
        except (FileNotFoundError, NotADirectoryError):
            self._cache.pop(path, None)
            return None
        return value

    # Global rules -------------------------------------------------------------------------

    def global_rules(self, *, copy: bool = True) -> list[GlobalRule]:
        """The global rules; `copy=False` shares the cached objects (never change them)."""
        found = self.cached(self.rules_file, self._parse_global) or []
        return [(r.model_copy(deep=True), raw) for r, raw in found] if copy else list(found)

    def _parse_global(self, text: str, st: os.stat_result) -> list[GlobalRule]:
        stamp = iso_time(st.st_mtime_ns)
        head, blocks = parse_blocks(text, "rule")
        if not blocks:
            body = head.removeprefix(RULES_HEADING).strip()
            if not body:
                return []
            blocks_meta: list[tuple[JSONObject, str, str | None, str | None]] = [
                ({"id": stable_id(str(self.rules_file))}, body, None, None)
            ]
        else:
            blocks_meta = [(b.meta, b.content, b.raw, b.error) for b in blocks]
        out: list[GlobalRule] = []
        for index, (meta, content, raw, error) in enumerate(blocks_meta):
            if not content:
                continue
            rid = meta.get("id") if isinstance(meta.get("id"), str) and meta.get("id") else None
            fields = {k: meta.get(k) for k in _META}
            fields.update(id=rid or stable_id(f"{self.rules_file}#{index}"), path=None)
            rule, error = parsed_rule(fields, "global", None, content, stamp, error, MAX_RULE_CHARS)
            out.append((rule, raw if error else None))
        return out

    def write_global_rules(self, rules: list[GlobalRule]) -> None:
        parts = [RULES_HEADING + "\n"]
        for rule, raw in rules:
            if raw is not None:
                parts.append(raw if raw.startswith("\n") else "\n" + raw)
            else:
                meta = rule.model_dump(include=set(_META), exclude={"path"})
                parts.append(render_block("rule", meta | {"scope": "global"}, rule.content))
        _write_private(self.rules_file, "".join(parts))

    # Project rules ------------------------------------------------------------------------

    def project_rules(
        self, project_id: str, project: Path, *, copy: bool = True
    ) -> list[tuple[Rule, Path]]:
        """Every rule file below `<project>/.foya/rules` (at most three directories deep);
        `copy=False` shares the cached objects where it can (never change them)."""
        root = project / ".foya" / "rules"
        if not _plain_dirs(project, (".foya", "rules"), create=False) or not root.is_dir():
            return []
        found: list[tuple[Rule, Path]] = []
        seen: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(root):
            depth = len(Path(dirpath).relative_to(root).parts)
            dirnames[:] = sorted(d for d in dirnames if depth < MAX_RULE_DIRS)
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if not name.lower().endswith(".md") or path.is_symlink():
                    continue
                rel = path.relative_to(root).as_posix()
                parsed = self.cached(
                    path, partial(parse_project_rule, path=path, rel=rel, project_id=project_id)
                )
                if parsed is None:
                    continue
                duplicate = parsed.id in seen
                rule = parsed.model_copy(deep=True) if copy or duplicate else parsed
                if duplicate:
                    rule.error = f"id {rule.id} is already used by another rule file"
                    rule.id = stable_id(str(path))
                seen.add(rule.id)
                found.append((rule, path))
        return found

    def project_rule_file(self, project: Path, rel: str) -> Path:
        """The file for rule path `rel`, its directories made (0700). Refused when a directory
        on the way is a symbolic link or not a directory, or the file itself is a link."""
        parts = (".foya", "rules", *rel.split("/")[:-1])
        if not _plain_dirs(project, parts, create=False):
            raise InvalidContextItem(f"path: {rel} passes a symbolic link or a file")
        _plain_dirs(project, parts, create=True)
        target = project.joinpath(*parts, rel.rsplit("/", 1)[-1])
        if target.is_symlink() or (target.exists() and not target.is_file()):
            raise InvalidContextItem(f"path: {rel} is not a regular file")
        return target

    def write_project_rule(self, path: Path, rule: Rule) -> None:
        meta = rule.model_dump(include={"id", "name", "description", "trigger", "globs"})
        data = render_front_matter(meta) + rule.content + "\n"
        replace_atomic(path, data.encode(), mode=0o600)

    # Memory -------------------------------------------------------------------------------

    def memory_file(self, project: Path | None) -> Path:
        """`user_profile.md`, or the project's `project_memory.md` (named after its path)."""
        if project is None:
            return self.home / "memory" / "user_profile.md"
        parts = [p.replace(":", "_") for p in Path(os.path.normpath(project)).parts[1:]]
        return self.home / "memory" / "projects" / Path(*(parts or ["_root"])) / "project_memory.md"

    def memory(
        self, project_id: str | None, project: Path | None, *, copy: bool = True
    ) -> Memory | None:
        """The scope's memory; `copy=False` shares the cached object (never change it)."""
        path = self.memory_file(project)
        found = self.cached(path, lambda t, s: parse_memory(t, s, path, project_id))
        return found.model_copy(deep=True) if found is not None and copy else found

    def write_memory(self, project: Path | None, memory: Memory | None) -> None:
        """Write the scope's one memory document (None leaves only the heading)."""
        scope = "global" if project is None else "project"
        text = MEMORY_HEADINGS[scope] + "\n"
        if memory is not None:
            meta = memory.model_dump(exclude={"content", "error"})
            text += render_block("memory", meta, memory.content)
        _write_private(self.memory_file(project), text)


def _write_private(path: Path, text: str) -> None:
    """Write `path` atomically, 0600, making each missing directory on the way 0700."""
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    replace_atomic(path, text.encode(), mode=0o600)


def _plain_dirs(base: Path, parts: tuple[str, ...], *, create: bool) -> bool:
    """Whether each of `parts` below `base` is a real directory or absent (then made, 0700, if
    `create`). A symbolic link or a file on the way answers False."""
    current = base
    for part in parts:
        current = current / part
        try:
            mode = current.lstat().st_mode
        except FileNotFoundError:
            if not create:
                return True
            current.mkdir(mode=0o700)
            continue
        if not stat.S_ISDIR(mode):
            return False
    return True
