"""Installed plugins (Foya's `plugin.Manager`): install, list, turn on and off, remove; and what
the enabled ones bring to the rest of the kernel.

Where things live (Foya's layout with a home directory):

    ~/.foya/plugins/<name>/        installed packages (0700; files keep only owner bits)
    ~/.foya/plugin-data/<name>/    a plugin's PLUGIN_DATA (made when its MCP servers are read;
                                   kept when the plugin is removed, as in Foya)
    ~/.foya/marketplaces/<id>/     marketplace catalogs (`app.kernel.plugins.marketplaces`)
    <data-dir>/plugins.json        {"disabled": [names], "sources": {name: source}}, written
                                   atomically, 0600

Installing copies the package (a local directory, or a shallow git checkout) into a staging
directory, `~/.foya/plugins/.staging/<kind>-<random>/` (`app.staging`), checks it there (no
links, no special files, limits, a valid manifest, no error in its components) and renames it
into place: a refused install leaves nothing behind, and nothing in the package is ever run.
A crash leaves files only under `.staging/`, never listed; `sweep_staging()` at start deletes
them (and the `.install-*` directories of earlier versions), after putting back a plugin that
a crash caught between moving it aside and moving its replacement in. A plugin whose name is
taken is refused unless `replace` is set. Hand edits show without a restart: listings read the
directory again, and the enabled set re-reads a manifest when its file changed.

For the other services (synchronous, cheap: one directory listing and a `stat` per plugin):
`enabled_dirs()` (skills, commands and agents are found below them) and `mcp_servers()`.
`on_change`, given at construction, is awaited after every change of the installed or enabled
set (the MCP manager reconciles the plugin servers there); its failure is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from app.errors import BadRequest
from app.failpoints import failpoint
from app.files import fsync_dir, write_json_atomic
from app.kernel.plugins import errors, git
from app.kernel.plugins.installed import MAX_PLUGINS, describe, package_dirs
from app.kernel.plugins.manifest import (
    load_manifest,
)
from app.kernel.plugins.marketplaces import Marketplaces
from app.kernel.plugins.mcpspec import load_mcp
from app.kernel.plugins.models import Manifest, Plugin, PluginMCPServer, Problem, reported
from app.kernel.plugins.state import PREVIOUS, load_state, moved_aside
from app.kernel.plugins.tree import copy_tree, inside, remove_tree
from app.kernel.web.guard import AllowList
from app.logs import get_logger
from app.staging import STAGING, new_staging
from app.store.orphans import sweep_leftovers

MAX_FILES = 2048
MAX_BYTES = 32 * 1024 * 1024

_StatKey = tuple[int, int, int]


class Plugins:
    """The plugins installed below `base` (`~/.foya`), their state in `data_dir`."""

    def __init__(
        self,
        base: Path,
        data_dir: Path,
        on_change: Callable[[], Awaitable[None]] | None = None,
        allow: AllowList | None = None,
    ) -> None:
        self.root = base / "plugins"
        self.data_root = base / "plugin-data"
        self.state_file = data_dir / "plugins.json"
        self.on_change = on_change
        # Git remotes it may reach although private (FOYA_WEB_FETCH_ALLOW_HOSTS; plugins.git).
        self.allow = allow or AllowList()
        self.lock = asyncio.Lock()  # one install, removal or marketplace change at a time
        self.log = get_logger("foya.plugins")
        self._disabled, self._sources = load_state(self.state_file)
        self._manifests: dict[str, tuple[_StatKey, Manifest | None]] = {}
        self.marketplaces = Marketplaces(base / "marketplaces", data_dir, self)

    # For the other services ---------------------------------------------------------------

    def enabled_dirs(self) -> list[Path]:
        """The directories of the enabled, valid plugins, by name."""
        found = []
        for path in self._dirs():
            manifest = self._manifest(path)
            if manifest is not None and manifest.name not in self._disabled:
                found.append(path)
        return found

    def mcp_servers(self) -> list[PluginMCPServer]:
        """The MCP servers the enabled plugins define (their data directories are made)."""
        servers = []
        for path in self.enabled_dirs():
            manifest = self._manifest(path)
            assert manifest is not None  # enabled_dirs only lists valid plugins
            data = self.data_root / manifest.name
            data.mkdir(parents=True, exist_ok=True, mode=0o700)
            real, real_data = Path(os.path.realpath(path)), Path(os.path.realpath(data))
            servers += load_mcp(real, real_data, manifest.name)[0]
        return servers

    # For the routes -----------------------------------------------------------------------

    async def listing(self) -> list[Plugin]:
        """`GET /plugins`: every installed plugin, valid or not, by name."""
        return await asyncio.to_thread(self.list_now)

    async def install(self, source: str, replace: bool) -> Plugin:
        """`POST /plugins/install`: install from a local directory or a git URL."""
        if not source.strip():
            raise BadRequest("source is required")
        with reported(errors.PluginInstallFailed):
            parsed = git.parse_source(source)
            async with self.lock:
                if parsed.kind == "git":
                    with self.staging(".download-") as temp:
                        await git.clone(parsed.location, temp / "repo", allow=self.allow)
                        repo = temp / "repo"
                        item = await self.install_package(repo, parsed.label, replace=replace)
                else:
                    real_root = os.path.realpath(self.root)
                    if inside(os.path.realpath(parsed.location), real_root):
                        raise Problem("the source cannot be inside the plugin install directory")
                    local = Path(parsed.location)
                    item = await self.install_package(local, parsed.label, replace=replace)
        await self.changed()
        return item

    async def set_enabled(self, name: str, enabled: bool) -> list[Plugin]:
        """`PATCH /plugins/{name}`: turn a plugin on or off; every plugin after the change."""

        def work() -> list[Plugin]:
            item = self.find(name)
            if enabled and not item.valid:
                raise Problem(f"plugin {item.name} has manifest errors")
            disabled = self._disabled - {item.name} if enabled else self._disabled | {item.name}
            self._save_state(disabled, self._sources)
            return self.list_now()

        with reported(errors.PluginUpdateFailed):
            async with self.lock:
                items = await asyncio.to_thread(work)
        await self.changed()
        return items

    async def remove(self, name: str) -> None:
        """`DELETE /plugins/{name}`: remove the package (its data directory stays)."""

        def work() -> None:
            item = self.find(name)
            path = Path(item.path)
            if not inside(path, os.path.realpath(self.root)) or path == Path(self.root):
                raise Problem(f"plugin {item.name} resolves outside the install directory")
            remove_tree(path)
            fsync_dir(self.root)
            sources = {k: v for k, v in self._sources.items() if k != item.name}
            self._save_state(self._disabled - {item.name}, sources)

        with reported(errors.PluginRemoveFailed):
            async with self.lock:
                await asyncio.to_thread(work)
        await self.changed()

    # Shared with the marketplaces --------------------------------------------------------

    def list_now(self) -> list[Plugin]:
        """Every installed plugin (blocking)."""
        return sorted((self._inspect(p) for p in self._dirs()), key=lambda p: p.name)

    def find(self, name: str) -> Plugin:
        name = name.strip()
        found = next((p for p in self.list_now() if p.name == name), None) if name else None
        if found is None:
            raise Problem(f"plugin {name[:80]!r} not found", missing=True)
        return found

    @contextlib.contextmanager
    def staging(self, prefix: str) -> Iterator[Path]:
        """A private directory in `<install dir>/.staging/` (same file system as the plugins,
        so its contents rename into place), removed afterwards; `prefix` names its kind."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for attempt in range(3):
            try:
                temp = new_staging(self.root, prefix.strip(".-"))
                break
            except FileNotFoundError:  # another staging removed the emptied parent meanwhile
                if attempt == 2:
                    raise
        try:
            yield temp
        finally:
            shutil.rmtree(temp, ignore_errors=True)
            with contextlib.suppress(OSError):  # only if empty: others may be staging
                (self.root / STAGING).rmdir()

    def sweep_staging(self) -> list[Path]:
        """At start, before any install: put back a plugin a crash left moved aside, then
        delete every staging leftover of the plugin and marketplace directories."""
        for aside in moved_aside(self.root):
            target = self.root / aside.name
            if os.path.lexists(target):
                continue  # the replacement is in place: the old copy is disposable
            try:
                os.rename(aside, target)
                fsync_dir(self.root)
            except OSError as exc:  # kept in staging would delete it: refuse to sweep instead
                self.log.error("an interrupted plugin replacement cannot be undone",
                               plugin=aside.name, error=str(exc))  # fmt: skip
                return []
            self.log.warning("an interrupted plugin replacement was undone", plugin=aside.name)
        removed: list[Path] = []
        for root in (self.root, self.marketplaces.root):
            removed += sweep_leftovers(root)
            with contextlib.suppress(OSError):  # nothing stages yet: an empty one goes too
                (root / STAGING).rmdir()
        if removed:
            self.log.info("staging a crash left was removed", entries=len(removed))
        return removed

    async def install_package(
        self, source: Path, label: str, *, expected: str = "", replace: bool = False
    ) -> Plugin:
        """Copy, check and install the package at `source` (caller holds `lock`)."""
        return await asyncio.to_thread(self._install, source, label, expected, replace)

    async def changed(self) -> None:
        if self.on_change is None:
            return
        try:
            await self.on_change()
        except Exception as exc:  # the plugin change itself stands
            self.log.warning("plugin change not applied everywhere", error=str(exc))

    # Inside -------------------------------------------------------------------------------

    def _install(self, source: Path, label: str, expected: str, replace: bool) -> Plugin:
        with self.staging(".install-") as temp:
            package = temp / "package"
            package.mkdir(mode=0o700)
            copy_tree(source, package, max_files=MAX_FILES, max_bytes=MAX_BYTES)
            failpoint("plugin_install_copied")
            item = self._inspect(package)
            errors = [d.message for d in item.diagnostics or () if d.severity == "error"]
            if errors:
                raise Problem("invalid plugin: " + "; ".join(errors))
            if expected and item.name != expected:
                raise Problem(f"marketplace entry {expected!r} contains plugin {item.name!r}")
            target = self.root / item.name
            if target.exists() or target.is_symlink():
                if not replace:
                    raise Problem(f"plugin already exists: {item.name}")
                # Named after its place, so that a start after a crash here can put it back.
                aside = temp / PREVIOUS / item.name
                aside.parent.mkdir(mode=0o700)
                os.rename(target, aside)
                failpoint("plugin_replace_moved_aside")
                try:
                    os.rename(package, target)
                except OSError:
                    os.rename(aside, target)
                    raise
            else:
                if len(self._dirs()) >= MAX_PLUGINS:
                    raise Problem(f"at most {MAX_PLUGINS} plugins can be installed")
                os.rename(package, target)
            fsync_dir(self.root)
        self._save_state(self._disabled - {item.name}, {**self._sources, item.name: label})
        return self.find(item.name)

    def _dirs(self) -> list[Path]:
        return package_dirs(self.root)

    def _manifest(self, path: Path) -> Manifest | None:
        """The valid manifest of the plugin at `path`, read again only when it changed."""
        try:
            st = os.stat(path / "plugin.json", follow_symlinks=False)
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        hit = self._manifests.get(str(path))
        if hit is None or hit[0] != key:
            hit = (key, load_manifest(path)[0])
            self._manifests[str(path)] = hit
        return hit[1]

    def _inspect(self, path: Path) -> Plugin:
        return describe(path, self.data_root, self._sources, self._disabled)

    def _save_state(self, disabled: frozenset[str], sources: dict[str, str]) -> None:
        value = {"disabled": sorted(disabled), "sources": dict(sorted(sources.items()))}
        write_json_atomic(self.state_file, value)
        self._disabled, self._sources = disabled, sources
