"""Plugin marketplaces (Foya's marketplace part of `plugin.Manager`): catalogs of plugins the
user registers, browses, previews and installs from.

    ~/.foya/marketplaces/<id>/            the catalog's directory: a copy of a local directory
                                          (no links, at most 20000 files / 256 MiB) or a shallow
                                          git checkout at `ref`
    <data-dir>/plugin-marketplaces.json   {"version": 1, "items": [summary…]}, atomic, 0600

The id is the catalog's `name` (`app.kernel.plugins.catalog`). Registering stages the copy
under `~/.foya/marketplaces`, reads its catalog there, and renames it into place; refreshing
fetches again and swaps it in. `sparse_paths` are checked and kept (as in Foya), but the checkout
is a whole shallow one. Browsing, previewing and installing need the marketplace enabled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import BadRequest
from app.files import fsync_dir, write_json_atomic
from app.kernel.plugins import catalog, git
from app.kernel.plugins.manifest import (
    MAX_COMMAND_DIRS,
    count_files,
    count_skills,
    load_manifest,
    load_mcp,
    valid_name,
)
from app.kernel.plugins.models import (
    Author,
    MarketplaceCatalog,
    MarketplacePlugin,
    MarketplacePluginPreview,
    MarketplaceSummary,
    Plugin,
    Problem,
    reported,
)
from app.kernel.plugins.tree import copy_tree, inside, resolved_inside
from app.staging import STAGING, new_staging

if TYPE_CHECKING:
    from app.kernel.plugins.store import Plugins

MAX_FILES = 20000
MAX_BYTES = 256 * 1024 * 1024
Entries = tuple[list[MarketplacePlugin], dict[str, catalog.Package]]
UNSUPPORTED = {
    "hooks": ("hooks", "hooks.json"),
    "lsp": ("lsp.json", ".lsp.json", "lsp-config"),
    "legacy_mcp": (".mcp.json", ".github/mcp.json"),
}
UNSUPPORTED_FIELDS = {
    "agents": "agents",
    "commands": "commands",
    "hooks": "hooks",
    "lspServers": "lsp",
    "mcpServers": "legacy_mcp",
    "skills": "legacy_skills",
}


class Marketplaces:
    """The registered marketplaces; installs go through `plugins`."""

    def __init__(self, root: Path, data_dir: Path, plugins: Plugins) -> None:
        self.root = root
        self.state_file = data_dir / "plugin-marketplaces.json"
        self.plugins = plugins
        self._items: dict[str, MarketplaceSummary] = self._load()

    def listing(self) -> list[MarketplaceSummary]:
        return sorted(self._items.values(), key=lambda m: m.name)

    async def add(self, source: str, ref: str, sparse_paths: list[str]) -> MarketplaceSummary:
        if not source.strip():
            raise BadRequest("source is required")
        with reported("plugin_marketplace_add_failed"):
            async with self.plugins.lock:
                with self._staging() as temp:
                    item = await self._fetch(temp, source, ref, sparse_paths)
                    if item.id in self._items or (self.root / item.id).exists():
                        raise Problem(f"plugin marketplace already exists: {item.id}")
                    await asyncio.to_thread(self._place, temp / "tree", item, replace=False)
        return item

    async def refresh(self, id: str) -> MarketplaceSummary:
        with reported("plugin_marketplace_refresh_failed"):
            async with self.plugins.lock:
                current = self._get(id, enabled_only=False)
                with self._staging() as temp:
                    item = await self._fetch(
                        temp, current.source, current.ref or "", current.sparse_paths or []
                    )
                    if item.id != current.id:
                        raise Problem("the marketplace's name changed: remove it and add it again")
                    item.enabled = current.enabled
                    await asyncio.to_thread(self._place, temp / "tree", item, replace=True)
        return item

    async def set_enabled(self, id: str, enabled: bool) -> list[MarketplaceSummary]:
        with reported("plugin_marketplace_update_failed"):
            async with self.plugins.lock:
                item = self._get(id, enabled_only=False).model_copy(update={"enabled": enabled})
                await asyncio.to_thread(self._save, {**self._items, item.id: item})
        return self.listing()

    async def remove(self, id: str) -> None:
        def work() -> None:
            item = self._get(id, enabled_only=False)
            place = self.root / item.id
            if place.is_symlink() or not inside(
                os.path.realpath(place), os.path.realpath(self.root)
            ):
                raise Problem("the marketplace's directory resolves outside its root")
            shutil.rmtree(place, ignore_errors=True)
            self._save({k: v for k, v in self._items.items() if k != item.id})

        with reported("plugin_marketplace_remove_failed"):
            async with self.plugins.lock:
                await asyncio.to_thread(work)

    async def browse(self, id: str) -> MarketplaceCatalog:
        """The catalog, each entry marked installed (and enabled, and its version) or not."""

        def work() -> MarketplaceCatalog:
            item, document, (entries, _) = self._catalog(id)
            installed = {p.name: p for p in self.plugins.list_now()}
            for entry in entries:
                if entry.name in installed:
                    found = installed[entry.name]
                    entry.installed, entry.installed_version = True, found.version
                    entry.enabled = found.enabled or None
            description = (document.metadata and document.metadata.description) or item.description
            owner = document.owner if document.owner and document.owner.name else item.owner
            summary = item.model_copy(update={"description": description, "owner": owner})
            return MarketplaceCatalog(**summary.model_dump(), plugins=entries)

        with reported("plugin_marketplace_failed", missing=404, other=502):
            return await asyncio.to_thread(work)

    async def preview(self, id: str, name: str) -> MarketplacePluginPreview:
        """What installing entry `name` would bring, from a fetched copy of its package."""
        with reported("plugin_preview_failed", missing=404, other=502):
            package = await asyncio.to_thread(self._package, id, name)
            with self.plugins.staging(".preview-") as temp:
                root = await self._prepare(package, temp)
                return await asyncio.to_thread(_preview, root, name, self.plugins.data_root)

    async def install(self, id: str, name: str, replace: bool) -> Plugin:
        with reported("plugin_install_failed", missing=404):
            package = await asyncio.to_thread(self._package, id, name)
            async with self.plugins.lock:
                with self.plugins.staging(".marketplace-") as temp:
                    root = await self._prepare(package, temp)
                    label = f"marketplace:{self._get(id).id}:{name}"
                    item = await self.plugins.install_package(
                        root, label, expected=name, replace=replace
                    )
        await self.plugins.changed()
        return item

    # Inside -------------------------------------------------------------------------------

    def _get(self, id: str, *, enabled_only: bool = True) -> MarketplaceSummary:
        item = self._items.get(id.strip())
        if item is None:
            raise Problem(f"plugin marketplace not found: {id[:80]}", missing=True)
        if enabled_only and not item.enabled:
            raise Problem(f"plugin marketplace is disabled: {item.id}")
        return item

    def _catalog(self, id: str) -> tuple[MarketplaceSummary, catalog.Document, Entries]:
        """The marketplace, its catalog, its entries and their packages (blocking)."""
        item = self._get(id)
        root = self.root / item.id
        path = root / dict(catalog.LOCATIONS)[item.format]
        if not resolved_inside(path, root):
            raise Problem("the marketplace catalog is gone or resolves outside its root")
        document = catalog.read(path)
        if document.name != item.id or len(document.plugins or ()) > catalog.MAX_ENTRIES:
            raise Problem("invalid marketplace catalog: its name changed; refresh it")
        sha = item.resolved_sha or ""
        return item, document, catalog.entries(document, root, item.repository, sha)

    def _package(self, id: str, name: str) -> catalog.Package:
        package = self._catalog(id)[2][1].get(name.strip())
        if package is None:
            raise Problem(f"marketplace plugin not found: {name[:80]}", missing=True)
        return package

    async def _prepare(self, package: catalog.Package, temp: Path) -> Path:
        """The directory of the package: inside the marketplace, or fetched below `temp`."""
        if package.local is not None:
            return package.local
        await git.clone(package.url, temp / "repo", package.revision, allow=self.plugins.allow)
        return await asyncio.to_thread(catalog.package_dir, temp / "repo", package.path)

    async def _fetch(
        self, temp: Path, source: str, ref: str, sparse_paths: list[str]
    ) -> MarketplaceSummary:
        """Copy or clone `source` to `temp`/tree and read its catalog."""
        ref = git.check_revision(ref, "marketplace Git ref")
        paths = sorted({catalog.clean_path(p) for p in sparse_paths if p.strip()})
        if "" in paths:
            raise Problem("invalid sparse checkout path")
        parsed = git.parse_source(source)
        tree, sha = temp / "tree", ""
        if parsed.kind == "local":
            if inside(os.path.realpath(parsed.location), os.path.realpath(self.root)):
                raise Problem("the marketplace source cannot be inside its cache directory")
            tree.mkdir(mode=0o700)
            await asyncio.to_thread(
                copy_tree, Path(parsed.location), tree, max_files=MAX_FILES, max_bytes=MAX_BYTES
            )
        else:
            await git.clone(parsed.location, tree, ref, allow=self.plugins.allow)
            sha = await git.head(tree)
        kind, _, document = await asyncio.to_thread(catalog.discover, tree)
        assert document.name is not None  # discover checked it
        return MarketplaceSummary(
            id=document.name,
            name=document.name,
            description=(document.metadata and document.metadata.description) or None,
            repository=parsed.label,
            owner=document.owner or Author(),
            source=source.strip(),
            ref=ref or None,
            sparse_paths=paths or None,
            resolved_sha=sha or None,
            format=kind,
            enabled=True,
        )

    def _place(self, tree: Path, item: MarketplaceSummary, *, replace: bool) -> None:
        target, old = self.root / item.id, tree.parent / "previous"
        if replace and target.exists():
            os.rename(target, old)
        try:
            os.rename(tree, target)
        except OSError:
            if old.exists():
                os.rename(old, target)
            raise
        fsync_dir(self.root)
        self._save({**self._items, item.id: item})

    @contextlib.contextmanager
    def _staging(self) -> Iterator[Path]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = new_staging(self.root, "register")  # a crash's leftover is swept at start
        try:
            yield temp
        finally:
            shutil.rmtree(temp, ignore_errors=True)
            with contextlib.suppress(OSError):  # only if empty
                (self.root / STAGING).rmdir()

    def _load(self) -> dict[str, MarketplaceSummary]:
        try:
            raw = json.loads(self.state_file.read_bytes())
            items = [MarketplaceSummary.model_validate(i) for i in raw.get("items") or ()]
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, AttributeError) as exc:
            self.plugins.log.warning("plugin-marketplaces.json cannot be read", error=str(exc))
            return {}
        return {i.id: i for i in items if valid_name(i.id)}

    def _save(self, items: dict[str, MarketplaceSummary]) -> None:
        listed = [i.model_dump(exclude_none=True) for _, i in sorted(items.items())]
        write_json_atomic(self.state_file, {"version": 1, "items": listed})
        self._items = items


def _preview(root: Path, name: str, data_root: Path) -> MarketplacePluginPreview:
    manifest, found = load_manifest(root)
    skills, more = count_skills(root)
    servers, mcp = load_mcp(root, data_root / name, name)
    commands, more_commands = count_files(root, "commands", MAX_COMMAND_DIRS)
    agents, more_agents = count_files(root, "agents", 0)
    component_problems = [*more, *mcp, *more_commands, *more_agents]
    valid = manifest is not None and manifest.name == name
    unsupported = _unsupported(root)
    if not valid or skills + len(servers) + commands + agents == 0:
        compatibility = "unsupported"
    elif unsupported or any(d.severity == "error" for d in component_problems):
        compatibility = "partial"
    else:
        compatibility = "compatible"
    diagnostics = [*found, *component_problems]
    return MarketplacePluginPreview(
        name=name,
        valid=valid,
        compatibility=compatibility,
        skill_count=skills,
        mcp_server_count=len(servers),
        command_count=commands,
        agent_count=agents,
        unsupported_components=unsupported or None,
        diagnostics=diagnostics or None,
    )


def _unsupported(root: Path) -> list[str]:
    """The parts of a package this kernel does not load (hooks, LSP, legacy layouts)."""
    found = {c for c, paths in UNSUPPORTED.items() if any(os.path.lexists(root / p) for p in paths)}
    try:
        raw = json.loads((root / "plugin.json").read_bytes())
    except (OSError, ValueError):
        raw = None
    if isinstance(raw, dict):
        found |= {c for f, c in UNSUPPORTED_FIELDS.items() if raw.get(f) is not None}
        if isinstance(raw.get("extensions"), dict) and raw["extensions"]:
            found.add("extensions")
    return sorted(found)
