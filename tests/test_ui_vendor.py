"""The vendored libraries under `app/ui/static/vendor/` are exactly what the npm lock pins.

Datasette-style vendoring (tools/vendor.py): the files the browser loads are committed, so the
kernel serves its client with no Node, build step or network; the lock keeps them honest.
Offline: every vendored file is in `MANIFEST.json` with its SHA-256, every entry exists, and
each entry's version, `integrity` and `resolved` are the lock's, whose pins are package.json's.
Against the registry (reachable from CI): each package's tarball, downloaded from the lock's
`resolved` URL, has the lock's sha512 `integrity`, and each vendored file is byte for byte the
file at its path inside that tarball.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import io
import json
import sys
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from support.helpers import REPO

PINS = {
    "htm": "3.1.1",
    "marked": "18.3.0",
    "dompurify": "3.5.0",
    "@xterm/xterm": "6.0.0",
    "@xterm/addon-fit": "0.11.0",
}
#: What the client imports (the contract's paths under /ui/vendor/).
LOADED = {
    "htm/standalone.module.js",
    "marked/marked.esm.js",
    "dompurify/purify.es.mjs",
    "xterm/xterm.mjs",
    "xterm/xterm.css",
    "xterm/addon-fit.mjs",
}


def tool() -> ModuleType:
    """`tools.vendor`, imported from the repository root (where `python -m tools.vendor` runs)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("tools.vendor")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def lock() -> Any:
    return read_json(tool().LOCK)


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    files: dict[str, Any] = read_json(tool().MANIFEST)["files"]
    return files


def vendored() -> dict[str, bytes]:
    root: Path = tool().VENDOR
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path != tool().MANIFEST
    }


def test_the_pins_are_exact_and_locked(lock: Any) -> None:
    package = read_json(tool().NPM / "package.json")
    assert package["dependencies"] == PINS
    assert lock["packages"][""]["dependencies"] == PINS
    for name, version in PINS.items():
        entry = lock["packages"][f"node_modules/{name}"]
        assert entry["version"] == version
        assert entry["integrity"].startswith("sha512-")
        assert entry["resolved"].startswith("https://registry.npmjs.org/")


def test_every_vendored_file_is_in_the_manifest_with_its_hash(manifest: dict[str, Any]) -> None:
    files = vendored()
    assert sorted(files) == sorted(manifest)
    for path, body in files.items():
        assert hashlib.sha256(body).hexdigest() == manifest[path]["sha256"], path
    assert set(manifest) >= LOADED
    licences = {entry["package"] for path, entry in manifest.items() if "LICENSE" in path}
    assert licences == set(PINS)  # every package's licence comes with its files


def test_the_manifest_says_what_the_lock_says(manifest: dict[str, Any], lock: Any) -> None:
    for path, entry in manifest.items():
        locked = lock["packages"][f"node_modules/{entry['package']}"]
        for key in ("version", "integrity", "resolved"):
            assert entry[key] == locked[key], (path, key)
    # and it is what the tool writes for these files (its table of files included)
    assert tool().manifest(vendored(), lock)["files"] == manifest


@pytest.fixture(scope="module")
def tarballs(manifest: dict[str, Any]) -> dict[str, bytes]:
    """Each package's tarball, downloaded once from its `resolved` URL."""
    urls = sorted({entry["resolved"] for entry in manifest.values()})
    with httpx.Client(timeout=httpx.Timeout(60, connect=15), follow_redirects=True) as client:
        return {url: client.get(url).raise_for_status().content for url in urls}


def integrity(body: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(body).digest()).decode()


def inside(tarball: bytes, path: str) -> bytes:
    """The file at `path` inside an npm tarball (whose one top directory is usually
    `package/`)."""
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.split("/", 1)[-1] == path:
                file = archive.extractfile(member)
                assert file is not None
                return file.read()
    raise AssertionError(f"{path} is not in the tarball")


@pytest.mark.timeout(300)
def test_each_tarball_has_the_locks_integrity_and_holds_the_vendored_files(
    manifest: dict[str, Any], tarballs: dict[str, bytes]
) -> None:
    for url, body in tarballs.items():
        expected = {e["integrity"] for e in manifest.values() if e["resolved"] == url}
        assert {integrity(body)} == expected, url
    files = vendored()
    for path, entry in manifest.items():
        assert inside(tarballs[entry["resolved"]], entry["path"]) == files[path], path
