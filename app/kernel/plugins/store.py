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
directory under `~/.foya/plugins`, checks it there (no links, no special files, limits, a valid
manifest, no error in its components) and renames it into place: a refused install leaves
nothing behind, and nothing in the package is ever run. A plugin whose name is taken is refused
unless `replace` is set. Hand edits show without a restart: listings read the directory again,
and the enabled set re-reads a manifest when its file changed.

For the other services (synchronous, cheap: one directory listing and a `stat` per plugin):
`enabled_dirs()` (skills, commands and agents are found below them) and `mcp_servers()`.
`on_change`, given at construction, is awaited after every change of the installed or enabled
set (the MCP manager reconciles the plugin servers there); its failure is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from app.errors import BadRequest
from app.files import fsync_dir, write_json_atomic
from app.kernel.plugins import git
from app.kernel.plugins.manifest import (
    MAX_COMMAND_DIRS,
    count_files,
    count_skills,
    load_manifest,
    load_mcp,
    valid_name,
)
from app.kernel.plugins.marketplaces import Marketplaces
from app.kernel.plugins.models import Manifest, Plugin, PluginMCPServer, Problem, reported
from app.kernel.plugins.tree import copy_tree, inside, remove_tree
from app.logs import get_logger

MAX_FILES = 2048
MAX_BYTES = 32 * 1024 * 1024
MAX_PLUGINS = 128

_StatKey = tuple[int, int, int]


class Plugins:
    """The plugins installed below `base` (`~/.foya`), their state in `data_dir`."""

    def __init__(
        self,
        base: Path,
        data_dir: Path,
        on_change: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.root = base / "plugins"
        self.data_root = base / "plugin-data"
        self.state_file = data_dir / "plugins.json"
        self.on_change = on_change
        self.lock = asyncio.Lock()  # one install, removal or marketplace change at a time
        self.log = get_logger("foya.plugins")
        self._disabled, self._sources = self._load_state()
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
        with reported("plugin_install_failed"):
            parsed = git.parse_source(source)
            async with self.lock:
                if parsed.kind == "git":
                    with self.staging(".download-") as temp:
                        await git.clone(parsed.location, temp / "repo")
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

        with reported("plugin_update_failed"):
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

        with reported("plugin_remove_failed"):
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
        """A private directory below the install directory, removed afterwards."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))
        try:
            yield temp
        finally:
            shutil.rmtree(temp, ignore_errors=True)

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
                os.rename(target, temp / "previous")
                try:
                    os.rename(package, target)
                except OSError:
                    os.rename(temp / "previous", target)
                    raise
            else:
                if len(self._dirs()) >= MAX_PLUGINS:
                    raise Problem(f"at most {MAX_PLUGINS} plugins can be installed")
                os.rename(package, target)
            fsync_dir(self.root)
        self._save_state(self._disabled - {item.name}, {**self._sources, item.name: label})
        return self.find(item.name)

    def _dirs(self) -> list[Path]:
        try:
            entries = sorted(os.scandir(self.root), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [
            Path(e.path)
            for e in entries
            if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
        ][:MAX_PLUGINS]

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
        root = Path(os.path.realpath(path))
        manifest, found = load_manifest(root)
        name = manifest.name if manifest is not None else root.name
        data = self.data_root.absolute() / name
        counts = {"skill_count": 0, "mcp_server_count": 0, "command_count": 0, "agent_count": 0}
        if manifest is not None:
            counts["skill_count"], more = count_skills(root)
            found += more
            servers, more = load_mcp(root, data, name)
            counts["mcp_server_count"] = len(servers)
            found += more
            counts["command_count"], more = count_files(root, "commands", MAX_COMMAND_DIRS)
            found += more
            counts["agent_count"], more = count_files(root, "agents", 0)
            found += more
        return Plugin(
            **(manifest.model_dump() if manifest is not None else {"name": name}),
            path=str(root),
            data_path=str(data),
            source=self._sources.get(name) or None,
            enabled=manifest is not None and name not in self._disabled,
            valid=manifest is not None,
            **counts,
            diagnostics=found or None,
        )

    def _load_state(self) -> tuple[frozenset[str], dict[str, str]]:
        try:
            raw = json.loads(self.state_file.read_bytes())
        except FileNotFoundError:
            return frozenset(), {}
        except (OSError, ValueError) as exc:
            self.log.warning("plugins.json cannot be read: every plugin counts as enabled",
                             error=str(exc))  # fmt: skip
            return frozenset(), {}
        raw = raw if isinstance(raw, dict) else {}
        disabled = raw.get("disabled")
        disabled = disabled if isinstance(disabled, list) else []
        sources = raw.get("sources")
        sources = sources if isinstance(sources, dict) else {}
        return (
            frozenset(n for n in disabled if isinstance(n, str) and valid_name(n)),
            {k: v for k, v in sources.items() if valid_name(k) and isinstance(v, str)},
        )

    def _save_state(self, disabled: frozenset[str], sources: dict[str, str]) -> None:
        value = {"disabled": sorted(disabled), "sources": dict(sorted(sources.items()))}
        write_json_atomic(self.state_file, value)
        self._disabled, self._sources = disabled, sources
