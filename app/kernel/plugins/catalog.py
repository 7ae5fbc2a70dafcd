"""Marketplace catalogs: finding and reading `marketplace.json`, and where each entry's package
comes from.

A marketplace is a directory (a copy of a local one, or a git checkout) holding a catalog in one
of three places, the first found wins:

    .agents/plugins/marketplace.json    format codex
    .claude-plugin/marketplace.json     format claude
    .github/plugin/marketplace.json     format copilot

    {"name": id, "metadata": {"description", "version", "pluginRoot"}, "owner": {…},
     "plugins": [{"name", "description", "version", "author", …, "source": …}]}

An entry's `source` is a path inside the marketplace (a string, or `{"source": "local",
"path"}`; below `pluginRoot` if set), `{"source": "github", "repo", "path"?, "ref"?, "sha"?}`,
`{"source": "url", "url", "ref"?, "sha"?}` or `{"source": "git-subdir", "url", "path", …}`.
A path that leaves its root (absolute, `..`, or through a link) makes the entry not
installable, with the reason; so do npm sources and unknown kinds.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from app.jsontypes import JSONObject
from app.kernel.plugins import git
from app.kernel.plugins.manifest import valid_name
from app.kernel.plugins.models import Author, EntryInfo, MarketplacePlugin, Problem
from app.kernel.plugins.tree import read_limited, resolved_inside

MAX_CATALOG_BYTES = 4 * 1024 * 1024
MAX_ENTRIES = 2048
Format = Literal["codex", "claude", "copilot"]
LOCATIONS: tuple[tuple[Format, str], ...] = (
    ("codex", ".agents/plugins/marketplace.json"),
    ("claude", ".claude-plugin/marketplace.json"),
    ("copilot", ".github/plugin/marketplace.json"),
)


class _Metadata(BaseModel):
    description: str | None = None
    version: str | None = None
    pluginRoot: str | None = None  # the catalog's own spelling


class _Entry(EntryInfo):
    source: Any = None


class Document(BaseModel):
    """A `marketplace.json` (unknown fields ignored)."""

    name: str | None = None
    metadata: _Metadata | None = None
    owner: Author | None = None
    plugins: list[_Entry] | None = None


@dataclass(frozen=True)
class Package:
    """Where an entry's package is: `local` (a directory of the marketplace) or a git `url`
    at `revision`, in its subdirectory `path`."""

    label: str
    local: Path | None = None
    url: str = ""
    path: str = ""
    revision: str = ""


def discover(root: Path) -> tuple[Format, Path, Document]:
    """The catalog of the marketplace at `root`: its format, file and content."""
    for kind, relative in LOCATIONS:
        path = root / relative
        if not path.exists() and not path.is_symlink():
            continue
        if path.is_symlink() or not path.is_file() or not resolved_inside(path, root):
            raise Problem("the marketplace manifest must be a regular file inside its root")
        document = read(path)
        if not valid_name(document.name or "") or len(document.plugins or ()) > MAX_ENTRIES:
            raise Problem("invalid marketplace catalog: a valid name and at most 2048 plugins")
        return kind, path, document
    raise Problem(
        "marketplace.json not found under .agents/plugins, .claude-plugin or .github/plugin"
    )


def read(path: Path) -> Document:
    try:
        return Document.model_validate(json.loads(read_limited(path, MAX_CATALOG_BYTES)))
    except FileNotFoundError:
        raise Problem("the marketplace catalog is gone: refresh the marketplace") from None
    except ValueError as exc:  # JSON and validation errors alike
        detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise Problem(f"decode marketplace: {detail}") from None


def entries(
    document: Document, root: Path, repository: str, sha: str
) -> tuple[list[MarketplacePlugin], dict[str, Package]]:
    """The catalog's entries by name, and the packages of the installable ones."""
    plugin_root = clean_path((document.metadata or _Metadata()).pluginRoot or "")
    items: list[MarketplacePlugin] = []
    packages: dict[str, Package] = {}
    for entry in document.plugins or ():
        item = MarketplacePlugin(
            **{**entry.model_dump(exclude={"source"}), "name": entry.name or ""}
        )
        if not valid_name(item.name):
            item.reason = "Invalid plugin name"
        elif item.name in packages or any(i.name == item.name for i in items):
            item.reason = "Duplicate plugin name in marketplace"
        else:
            try:
                package = _package(entry.source, root, plugin_root, repository, sha)
            except Problem as exc:
                item.reason = exc.message
            else:
                item.installable, item.source = True, package.label
                packages[item.name] = package
        items.append(item)
    return sorted(items, key=lambda i: i.name), packages


def _package(raw: Any, root: Path, plugin_root: str, repository: str, sha: str) -> Package:
    if isinstance(raw, str) or (isinstance(raw, dict) and raw.get("source") == "local"):
        relative = raw if isinstance(raw, str) else _text(raw, "path")
        if isinstance(raw, str) and not raw.strip():
            raise Problem("Plugin source is required")
        path = posixpath.join(plugin_root, clean_path(relative)).strip("/")
        return Package(_label(repository, path, sha), local=package_dir(root, path))
    if not isinstance(raw, dict):
        raise Problem("Unsupported plugin source")
    kind, url, repo = raw.get("source"), _text(raw, "url"), _text(raw, "repo")
    revision = _revision(_text(raw, "ref"), _text(raw, "sha"))
    if kind == "github":
        if not git.GITHUB_REPO.fullmatch(repo):
            raise Problem("Invalid GitHub repository format")
        path = clean_path(_text(raw, "path"))
        return Package(
            _label(repo, path, revision), url=f"https://github.com/{repo}.git", path=path,
            revision=revision,
        )  # fmt: skip
    if kind in ("url", "git-subdir"):
        path = clean_path(_text(raw, "path")) if kind == "git-subdir" else ""
        return Package(_label(url, path, revision), url=_git_url(url), path=path, revision=revision)
    if kind == "npm":
        raise Problem(f"npm Marketplace source {_text(raw, 'package')!r} is not supported")
    raise Problem("Unsupported plugin source type")


def _git_url(url: str) -> str:
    try:
        source = git.parse_source(url)
    except Problem:
        source = None
    if source is None or source.kind != "git":
        raise Problem("Marketplace Git URL must be an HTTPS or Git SSH URL without credentials")
    return source.location


def _text(raw: JSONObject, key: str) -> str:
    value = raw.get(key)
    return value if isinstance(value, str) else ""


def _revision(ref: str, sha: str) -> str:
    if sha:
        if not git.is_commit(sha):
            raise Problem("Invalid Git commit SHA")
        return sha
    return git.check_revision(ref)


def _label(repository: str, path: str, revision: str) -> str:
    return repository + (f":{path}" if path else "") + (f"#{revision}" if revision else "")


def clean_path(value: str) -> str:
    """A relative path inside its root ("" for the root); `Problem` when it leaves it."""
    value = value.strip().replace("\\", "/")
    clean = posixpath.normpath(value) if value else "."
    if clean == ".":
        return ""
    if clean.startswith("/") or clean == ".." or clean.startswith("../"):
        raise Problem("Plugin subdirectory escapes its root")
    return clean


def package_dir(root: Path, relative: str) -> Path:
    """`root`/`relative`, which must be a directory whose real path is inside `root`."""
    candidate = root / relative if relative else root
    if not resolved_inside(candidate, root):
        raise Problem("Plugin subdirectory escapes its root or does not exist")
    if not candidate.is_dir():
        raise Problem("Plugin source is not a directory")
    return candidate
