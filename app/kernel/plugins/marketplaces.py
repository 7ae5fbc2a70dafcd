"""Plugin marketplaces (Foya's marketplace part of `plugin.Manager`): catalogs of plugins the
user registers, browses, previews and installs from.

    ~/.foya/marketplaces/<id>/            the catalog's directory: a copy of a local directory
                                          (no links, at most 20000 files / 256 MiB) or a shallow
                                          git checkout at `ref`
    <data-dir>/plugin-marketplaces.json   {"version": 1, "items": [summary…]}, atomic, 0600

The id is the catalog's `name` (`app.kernel.plugins.catalog`). Registering stages the copy
under `~/.foya/marketplaces`, reads its catalog there, and renames it into place; refreshing
fetches again and swaps it in. `sparse_paths` are checked and kept (as in Foya), but the
checkout is a whole shallow one. Browsing, previewing and installing need the marketplace
enabled; what installing an entry would bring is counted by `preview`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from app.errors import BadRequest
from app.files import fsync_dir, write_json_atomic
from app.kernel.plugins import catalog, errors, git
from app.kernel.plugins.manifest import valid_name
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
from app.kernel.plugins.ports import Installer
from app.kernel.plugins.preview import preview_package
from app.kernel.plugins.tree import copy_tree, inside, resolved_inside
from app.logs import get_logger
from app.staging import STAGING, new_staging

MAX_FILES = 20000
MAX_BYTES = 256 * 1024 * 1024
Entries = tuple[list[MarketplacePlugin], dict[str, catalog.Package]]


class Marketplaces:
    """The registered marketplaces; installs go through `plugins`."""

    def __init__(self, root: Path, data_dir: Path, plugins: Installer) -> None:
        self.root = root
        self.state_file = data_dir / "plugin-marketplaces.json"
        self.plugins = plugins
        self._items: dict[str, MarketplaceSummary] = self._load()

    def listing(self) -> list[MarketplaceSummary]:
        return sorted(self._items.values(), key=lambda m: m.name)

    async def add(self, source: str, ref: str, sparse_paths: list[str]) -> MarketplaceSummary:
        if not source.strip():
            raise BadRequest("source is required")
        with reported(errors.MarketplaceAddFailed):
            async with self.plugins.lock:
                with self._staging() as temp:
                    item = await self._fetch(temp, source, ref, sparse_paths)
                    if item.id in self._items or (self.root / item.id).exists():
                        raise Problem(f"plugin marketplace already exists: {item.id}")
                    await asyncio.to_thread(self._place, temp / "tree", item, replace=False)
        return item

    async def refresh(self, id: str) -> MarketplaceSummary:
        with reported(errors.MarketplaceRefreshFailed):
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
        with reported(errors.MarketplaceUpdateFailed):
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

        with reported(errors.MarketplaceRemoveFailed):
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

        with reported(errors.MarketplaceFailed, missing=errors.MarketplaceNotFound):
            return await asyncio.to_thread(work)

    async def preview(self, id: str, name: str) -> MarketplacePluginPreview:
        """What installing entry `name` would bring, from a fetched copy of its package."""
        with reported(errors.PreviewFailed, missing=errors.PreviewNotFound):
            package = await asyncio.to_thread(self._package, id, name)
            with self.plugins.staging(".preview-") as temp:
                root = await self._prepare(package, temp)
                return await asyncio.to_thread(preview_package, root, name, self.plugins.data_root)

    async def install(self, id: str, name: str, replace: bool) -> Plugin:
        with reported(errors.PluginInstallFailed, missing=errors.InstallNotFound):
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
            log = get_logger("foya.plugins")  # the store's own logger
            log.warning("plugin-marketplaces.json cannot be read", error=str(exc))
            return {}
        return {i.id: i for i in items if valid_name(i.id)}

    def _save(self, items: dict[str, MarketplaceSummary]) -> None:
        listed = [i.model_dump(exclude_none=True) for _, i in sorted(items.items())]
        write_json_atomic(self.state_file, {"version": 1, "items": listed})
        self._items = items
