"""Agent skills (Foya's `skill` package): found on disk (see
`skillscan` for the roots, refs and precedence), turned on and off, pinned, and loaded.

`<data-dir>/skills.json` holds `{"disabled": [refs], "pinned": [refs]}` (Foya's file), rewritten
atomically, 0600. Turning a skill on or off and pinning are not announced on the context
journal (Foya announces only rules and memory there).

Errors (rendered by `app.http.errors`):

- `InvalidSkillRef` 400 `bad_request`: an empty ref, or one holding `/`, `\\`, a `..` part or a
  control character; a resource path that is absolute, has a `..` part, is not a text type or
  resolves outside its package
- `SkillNotFound` 404 `skill_not_found`: no such skill now (a PATCH names one that was found;
  Foya stores any ref), or, when loading it, it is disabled or needs a tool the kernel lacks
- `ParentProjectNotFound` 404 `project_not_found`: `/projects/{id}/skills…` of an unknown project
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Literal

from app.files import write_json_atomic
from app.kernel.projects import ParentProjectNotFound, ProjectNotFound, Projects
from app.kernel.usercontext.markdown import Malformed
from app.kernel.usercontext.skillfile import (
    BINARY,
    MAX_FILE_BYTES,
    MAX_RESOURCE_BYTES,
    SkillFile,
    media_type,
    resource_path,
)
from app.kernel.usercontext.skillmodels import (
    InvalidSkillRef,
    ResourceContent,
    ScanResult,
    Skill,
    SkillNotFound,
)
from app.kernel.usercontext.skillscan import (
    SkillFiles,
    SkillState,
    effective,
    parse_cached,
    with_resources,
)

# Tools a capability stands for (Foya's `required-capabilities`); `approval` is always there.
CAPABILITY_TOOLS = {
    "filesystem": ("read", "write", "edit"),
    "terminal": ("bash",),
    "memory": ("memory_remember",),
    "rules": ("rule_load",),
    "skill_resources": ("skill_read_resource",),
    "web_search": ("web_search",),
    "network": ("web_fetch",),
    "browser": ("browser_navigate",),
}


class Skills:
    """The skills of the user and of each project, and their enabled and pinned state.

    For turns (synchronous; a `stat` per skill when nothing changed; safe from any thread):

    - `available(project_id, project_root)`: the skills a turn there may use (enabled, their
      required tools present, a project's over a global one of the same name), each with `ref`,
      `name`, `description`, `pinned` and `main_path` (its SKILL.md);
    - `body(skill)`: the instructions of a skill `available` returned (cheap: for pinned ones);
    - `load(ref_or_name, project_id, project_root)`: one skill, with its `resources`, and its
      instructions (the Markdown after the front matter), for `skill_load` and `skill_ref`;
    - `read_resource(ref_or_name, path, project_id, project_root)`: a text file of its package.

    `project_id` and `project_root` are both None outside a project. `files.reads` counts the
    files read (a listing of unchanged skills reads none)."""

    def __init__(
        self,
        home: Path,
        data_dir: Path,
        projects: Projects,
        tools: Callable[[], Collection[str]] = tuple,
        plugin_dirs: Callable[[], Sequence[Path]] = tuple,
    ) -> None:
        self.files = SkillFiles(home, data_dir / "skills.json", plugin_dirs)
        self.projects = projects
        self.tools = tools  # the names of the tools a turn offers (`required-tools` are checked)
        self._lock = asyncio.Lock()

    # For turns ----------------------------------------------------------------------------

    def available(self, project_id: str | None, project_root: Path | None) -> list[Skill]:
        lacks = _lacking(self.tools())
        found = effective(self.files.scan(project_id, project_root).found)
        return [s for s, _ in found if s.enabled and not lacks(s)]

    def body(self, skill: Skill) -> str:
        """The instructions of a skill `available` returned: a `stat` when its SKILL.md is
        unchanged, where `load` finds every skill again (for a pinned skill's body in each
        step). Empty when the file is gone or no longer a skill."""
        assert skill.main_path is not None  # every discovered skill has one
        try:
            real = os.path.realpath(skill.main_path, strict=True)
            parsed = self.files.read(real, parse_cached, MAX_FILE_BYTES)
        except OSError:
            return ""
        return parsed.body if isinstance(parsed, SkillFile) else ""

    def load(
        self, ref_or_name: str, project_id: str | None, project_root: Path | None
    ) -> tuple[Skill, str]:
        """The skill with that ref (of any scope) or name (the one that wins), and its body.
        Raises `InvalidSkillRef`, or `SkillNotFound` when it is unknown, disabled or needs a
        tool the kernel lacks."""
        wanted = check_ref(ref_or_name)
        scan = self.files.scan(project_id, project_root)
        by_ref = [f for f in scan.found if f[0].ref == wanted] if ":" in wanted else []
        by_name = [
            f
            for f in effective(scan.found)
            if f[0].ref == wanted or f[0].name.lower() == wanted.lower()
        ]
        if not by_ref + by_name:
            raise SkillNotFound(f"skill {wanted} not found")
        skill, parsed = (by_ref + by_name)[0]
        if not skill.enabled:
            raise SkillNotFound(f"skill {skill.name!r} is disabled")
        missing = _lacking(self.tools())(skill)
        if missing:
            raise SkillNotFound(f"skill {skill.name!r} needs what this kernel lacks: {missing}")
        return with_resources(skill), parsed.body

    def read_resource(
        self, ref_or_name: str, path: str, project_id: str | None, project_root: Path | None
    ) -> ResourceContent:
        """A text file inside a loadable skill's package (at most 512 KiB)."""
        try:
            rel = resource_path(path)
        except Malformed as exc:
            raise InvalidSkillRef(f"path: {exc}") from None
        if media_type(rel) == BINARY:
            raise InvalidSkillRef(f"path: {rel} is not a text resource")
        skill, _ = self.load(ref_or_name, project_id, project_root)
        assert skill.main_path is not None  # every discovered skill has one
        package = Path(skill.main_path).resolve().parent
        try:
            real = (package / rel).resolve(strict=True)
        except (OSError, RuntimeError):
            raise SkillNotFound(f"skill {skill.ref} has no resource {rel}") from None
        if not real.is_relative_to(package):
            raise InvalidSkillRef(f"path: {rel} leaves the skill package")
        if not real.is_file():
            raise SkillNotFound(f"skill {skill.ref} has no resource {rel}")
        if real.stat().st_size > MAX_RESOURCE_BYTES:
            raise InvalidSkillRef(f"path: {rel} exceeds {MAX_RESOURCE_BYTES} bytes")
        content = real.read_bytes().decode("utf-8", errors="replace")
        return ResourceContent(
            skill_ref=skill.ref, path=rel, media_type=media_type(rel), content=content
        )

    # For the routes -----------------------------------------------------------------------

    async def listing(self, *, every: bool, invocable: bool) -> list[Skill]:
        """`GET /skills`: the global skills (`every`: each scope's; `invocable`: the usable)."""

        def work() -> list[Skill]:
            if invocable and not every:
                return self.available(None, None)
            found = self.files.scan(None, None).found
            return [s for s, _ in (found if every else effective(found))]

        return [with_resources(s) for s in await asyncio.to_thread(work)]

    async def project_listing(self, project_id: str, *, every: bool) -> list[Skill]:
        """`GET /projects/{id}/skills`: the skills usable there (`every`: each scope's)."""
        root = self._project_root(project_id)

        def work() -> list[Skill]:
            if every:
                return [s for s, _ in self.files.scan(project_id, root).found]
            return self.available(project_id, root)

        return [with_resources(s) for s in await asyncio.to_thread(work)]

    async def inspect(self, project_id: str | None) -> ScanResult:
        """`GET [/projects/{id}]/skills/inspect`: the winning skills, every scope's, and what
        could not be read."""
        root = self._project_root(project_id) if project_id is not None else None
        scan = await asyncio.to_thread(self.files.scan, project_id, root)
        return ScanResult(
            skills=[with_resources(s) for s, _ in effective(scan.found)],
            inventory=[with_resources(s) for s, _ in scan.found],
            rejected=scan.rejected or None,
            diagnostics=scan.diagnostics or None,
        )

    async def set_enabled(self, ref: str, enabled: bool) -> None:
        await self._update(ref, "disabled", not enabled)

    async def set_pinned(self, ref: str, pinned: bool) -> None:
        await self._update(ref, "pinned", pinned)

    async def _update(self, ref: str, key: Literal["disabled", "pinned"], member: bool) -> None:
        wanted = check_ref(ref)

        def write() -> None:
            self._check_known(wanted)
            state = self.files.state()
            current: frozenset[str] = getattr(state, key)
            refs = current | {wanted} if member else current - {wanted}
            new = SkillState(**{**vars(state), key: refs})
            if new != state:
                value = {"disabled": sorted(new.disabled), "pinned": sorted(new.pinned)}
                write_json_atomic(self.files.state_file, value)
                self.files.remember_state(new)

        async with self._lock:
            await asyncio.to_thread(write)

    def _check_known(self, ref: str) -> None:
        """Raise `SkillNotFound` unless `ref` names a skill found now."""
        scope, _, rest = ref.partition(":")
        pid = rest.partition(":")[0]
        if scope == "global":
            found = self.files.scan(None, None).found
        elif scope == "project" and self.projects.exists(pid):
            found = self.files.scan(pid, Path(self.projects.get(pid)["path"])).found
        else:
            found = []
        if not any(s.ref == ref for s, _ in found):
            raise SkillNotFound(f"skill {ref} not found")

    def _project_root(self, project_id: str) -> Path:
        try:
            return Path(self.projects.get(project_id)["path"])
        except ProjectNotFound as exc:
            raise ParentProjectNotFound(exc.message) from None


def check_ref(ref: str) -> str:
    """`ref` trimmed; refused when empty or when a part of it could read as a path."""
    text = ref.strip()
    if not text:
        raise InvalidSkillRef("skill ref is required")
    bad = any(c in "/\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in text)
    if bad or ".." in text.split(":"):
        raise InvalidSkillRef(
            f"skill ref {text[:200]!r}: must not hold '/', '\\', a '..' part or a control character"
        )
    return text


def capabilities(tools: Collection[str]) -> set[str]:
    """The capabilities (Foya's names) the `tools` give."""
    given = {c for c, needs in CAPABILITY_TOOLS.items() if any(t in tools for t in needs)}
    return given | {"approval"}


def _lacking(tools: Collection[str]) -> Callable[[Skill], str]:
    """What a skill requires that `tools` do not give, in words (empty when nothing)."""
    names = set(tools)
    have = capabilities(names)

    def lacking(skill: Skill) -> str:
        lacking_tools = [t for t in skill.required_tools or () if t not in names]
        lacking_caps = [c for c in skill.required_capabilities or () if c not in have]
        parts = [f"tools {', '.join(lacking_tools)}"] if lacking_tools else []
        parts += [f"capabilities {', '.join(lacking_caps)}"] if lacking_caps else []
        return "; ".join(parts)

    return lacking
