"""Skill discovery: which `SKILL.md` files are skills, their refs and precedence, and the cache
that makes finding them again cost a `stat` per file.

Roots, in this order (within a scope a later root wins a name, so `.foya` beats `.agents`; a
project skill beats a global one of the same name; names compare case-insensitively):

    <plugin>/skills/  ~/.agents/skills/  ~/.foya/skills/      scope global, ref global:<name>
    <project>/.agents/skills/  <project>/.foya/skills/        scope project, ref project:<id>:<name>

`<plugin>` is each enabled plugin's directory (`app.kernel.plugins`), by plugin name: the
user's own skills win a name over a plugin's, and a plugin skill whose real path leaves its
plugin is rejected (`path_escape`). `<name>` in a ref is lower-cased.

Where skill files lie below a root, and what a found one becomes, is `skilltree`'s. A project
skill whose real path leaves the project directory is rejected (`path_escape`): a repository
cannot make the kernel read files elsewhere. A file that is not a skill is rejected with a
diagnostic (`invalid_skill`) and the others still load.

Every file (each SKILL.md and `skills.json`) is read through one cache keyed by its (mtime,
size, inode): it is read and parsed again only when one of them changed, so a hand edit shows
on the next call. `reads` counts the files actually read.

A skill runs nothing by itself: its text and resources are read by the model, whose tool calls
ask for approval like any other, and `allowed-tools` is shown, never granted. So a project's
skills are not executable configuration and need no trust (`app.kernel.trust`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from app.kernel.usercontext.markdown import Malformed
from app.kernel.usercontext.skillfile import (
    MAX_FILE_BYTES,
    SkillFile,
    parse_skill,
    resources,
    skill_name,
)
from app.kernel.usercontext.skillmodels import Resource, Skill, SkillScope
from app.kernel.usercontext.skilltree import (
    Found,
    Scan,
    inside,
    make_skill,
    reject,
    skill_files,
)
from app.logs import get_logger

T = TypeVar("T")
ROOTS = (".agents", ".foya")
RANK = {"project": 4, "global": 3}
# A file changed again within this long of its last change may keep its (mtime, size): the
# clock behind mtimes ticks coarsely. Such a parse is redone on the next call, as git does.
RACY_NS = 100_000_000


@dataclass(frozen=True)
class SkillState:
    """`skills.json`: the refs turned off and the refs pinned."""

    disabled: frozenset[str] = frozenset()
    pinned: frozenset[str] = frozenset()


class SkillFiles:
    """Finds skills below a home and a project; reads `skills.json` (`state_file`)."""

    def __init__(
        self, home: Path, state_file: Path, plugin_dirs: Callable[[], Sequence[Path]] = tuple
    ) -> None:
        self.home = home
        self.state_file = state_file
        self.plugin_dirs = plugin_dirs  # the enabled plugins' directories
        self.reads = 0
        self._cache: dict[str, tuple[tuple[int, int, int], bool, Any]] = {}

    def scan(self, project_id: str | None, project_root: Path | None) -> Scan:
        """Every scope's skills with their state, in Foya's order (project scope first, then
        by name), and what was rejected."""
        if project_root is not None and not project_id:
            raise ValueError("project skills need the project's id")
        state = self.state()
        scan = Scan()
        by_name: dict[str, Found] = {}
        places: list[tuple[SkillScope, Path, str | None]] = [
            ("global", plugin / "skills", os.path.realpath(plugin)) for plugin in self.plugin_dirs()
        ]
        places += [("global", self.home / root / "skills", None) for root in ROOTS]
        if project_root is not None:
            real = os.path.realpath(project_root)
            places += [("project", project_root / root / "skills", real) for root in ROOTS]
        for scope, place, confine in places:
            for item in self._scan_root(place, scope, project_id, confine, scan):
                skill = item[0]
                skill.enabled = skill.ref not in state.disabled
                skill.pinned = skill.ref in state.pinned
                by_name[f"{scope}:{skill.name.lower()}"] = item
        scan.found = sorted(by_name.values(), key=lambda f: order(f[0]))
        scan.rejected.sort(key=lambda r: (-RANK[r.scope], r.path or ""))
        scan.diagnostics.sort(key=lambda d: (d.path or "", d.code, d.message))
        return scan

    def _scan_root(
        self,
        root: Path,
        scope: SkillScope,
        project_id: str | None,
        confine: str | None,
        scan: Scan,
    ) -> list[Found]:
        found: list[Found] = []
        seen: set[str] = set()
        for main, known in skill_files(root, scan):
            directory = os.path.basename(os.path.dirname(main))
            try:
                real = known or os.path.realpath(main, strict=True)
            except (OSError, RuntimeError):
                continue  # removed meanwhile, or a link loop
            if real in seen:
                continue
            seen.add(real)
            if confine is not None and not inside(real, confine):
                where = "the project directory" if scope == "project" else "its plugin"
                escape = f"skill resolves outside {where}"
                reject(scan, scope, project_id, directory, main, "path_escape", escape)
                continue
            try:
                parsed = self.read(real, parse_cached, MAX_FILE_BYTES)
                if isinstance(parsed, Malformed):
                    raise parsed
                if parsed is None:
                    continue
                name = skill_name(parsed, directory)
            except (Malformed, OSError) as exc:
                message = exc.strerror if isinstance(exc, OSError) else str(exc)
                message = message or "unreadable"
                reject(scan, scope, project_id, directory, main, "invalid_skill", message)
                continue
            skill = make_skill(parsed, name, scope, project_id, main)
            scan.diagnostics.extend(skill.diagnostics or ())
            found.append((skill, parsed))
        return found

    def read(self, path: str, parse: Callable[[bytes], T], limit: int) -> T | None:
        """`parse` of the file's bytes (at most `limit` + 1 of them), redone only when the
        file changed; None when it is absent."""
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            self._cache.pop(path, None)
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        hit = self._cache.get(path)
        if hit is not None and hit[0] == key and not hit[1]:
            value: T = hit[2]
            return value
        started = time.time_ns()
        with open(path, "rb") as f:
            data = f.read(limit + 1)
        self.reads += 1
        value = parse(data)
        self._cache[path] = (key, st.st_mtime_ns > started - RACY_NS, value)
        return value

    def state(self) -> SkillState:
        try:
            return self.read(str(self.state_file), _parse_state, MAX_FILE_BYTES) or SkillState()
        except OSError as exc:  # a directory or an unreadable file in its place
            get_logger("foya.skills").warning("skills.json cannot be read", error=exc.strerror)
            return SkillState()

    def remember_state(self, state: SkillState) -> None:
        """Cache the state just written, so it is not read back."""
        st = os.stat(self.state_file)
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        recent = st.st_mtime_ns > time.time_ns() - RACY_NS
        self._cache[str(self.state_file)] = (key, recent, state)


def order(skill: Skill) -> tuple[int, str, str]:
    return (-RANK[skill.scope], skill.name.lower(), skill.ref)


def effective(found: Iterable[Found]) -> list[Found]:
    """One skill per name: the project's over the global one."""
    best: dict[str, Found] = {}
    for item in found:
        key = item[0].name.lower()
        if key not in best or RANK[item[0].scope] > RANK[best[key][0].scope]:
            best[key] = item
    return sorted(best.values(), key=lambda f: order(f[0]))


def with_resources(skill: Skill) -> Skill:
    """`skill` with its package's other files listed (a directory walk, so not for turns)."""
    assert skill.main_path is not None  # every discovered skill has one
    main = Path(skill.main_path).resolve()
    found = [Resource(**r) for r in resources(main.parent, main)]
    return skill.model_copy(update={"resources": found or None})


def parse_cached(data: bytes) -> SkillFile | Malformed:
    """A parse whose failure is cached too (a bad file is not read again until it changes)."""
    try:
        return parse_skill(data)
    except Malformed as exc:
        return exc


def _parse_state(data: bytes) -> SkillState:
    try:
        raw = json.loads(data)
    except ValueError:
        raw = None
    if not isinstance(raw, dict):
        log = get_logger("foya.skills")
        log.warning("skills.json is not a JSON object: every skill counts as enabled")
        return SkillState()

    def refs(key: str) -> frozenset[str]:
        values = raw.get(key)
        items = values if isinstance(values, list) else []
        return frozenset(  # Foya's older `user:` refs are global ones
            "global:" + v.removeprefix("user:") if v.startswith("user:") else v
            for v in items
            if isinstance(v, str)
        )

    return SkillState(disabled=refs("disabled"), pinned=refs("pinned"))
