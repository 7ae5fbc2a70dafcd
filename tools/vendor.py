"""Vendor the web client's libraries from npm into `app/ui/static/vendor/`.

    python -m tools.vendor      # npm ci in a temporary copy of app/ui/npm, then copy the files

Datasette-style vendoring: the few files the browser loads are committed, byte for byte as npm
ships them, so the kernel needs no Node, no build step and no network to serve its client, and a
review sees every byte that changes. What keeps them honest is the lock: `app/ui/npm` pins each
package exactly (`package.json`) with the tarball's `integrity` and `resolved` URL
(`package-lock.json`), and `vendor/MANIFEST.json` records, for every vendored file, its package,
version, path inside the package and SHA-256, with the tarball's `integrity` and `resolved` from
the lock. `tests/test_ui_vendor.py` checks the files against the manifest and the manifest against
the lock offline, and, with the registry, each tarball against its `integrity` and each file
against the tarball.

To upgrade a library: change its pin in `app/ui/npm/package.json`, refresh the lock there
(`npm install --package-lock-only --ignore-scripts --omit-lockfile-registry-resolved=false`:
the test downloads each tarball from its `resolved` URL), run this tool, review the diff.
`npm ci --ignore-scripts` installs exactly the lock and runs no package's install scripts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NPM = REPO / "app" / "ui" / "npm"
LOCK = NPM / "package-lock.json"
VENDOR = REPO / "app" / "ui" / "static" / "vendor"
MANIFEST = VENDOR / "MANIFEST.json"


@dataclass(frozen=True)
class Vendored:
    """One file the client loads (or a licence that comes with it): the npm package it is taken
    from, its path inside that package, and where it goes under `vendor/`."""

    package: str
    inner: str
    destination: str


#: Every vendored file, with each package's licence beside its files (app/ui/static/vendor/).
FILES: tuple[Vendored, ...] = (
    Vendored("htm", "preact/standalone.module.js", "htm/standalone.module.js"),
    Vendored("htm", "LICENSE", "htm/LICENSE"),
    Vendored("marked", "lib/marked.esm.js", "marked/marked.esm.js"),
    Vendored("marked", "LICENSE", "marked/LICENSE"),
    Vendored("dompurify", "dist/purify.es.mjs", "dompurify/purify.es.mjs"),
    # DOMPurify is offered under either licence; both texts come with it.
    Vendored("dompurify", "LICENSE", "dompurify/LICENSE"),
    Vendored("dompurify", "LICENSE-MPL", "dompurify/LICENSE-MPL"),
    Vendored("@xterm/xterm", "lib/xterm.mjs", "xterm/xterm.mjs"),
    Vendored("@xterm/xterm", "css/xterm.css", "xterm/xterm.css"),
    Vendored("@xterm/xterm", "LICENSE", "xterm/LICENSE"),
    Vendored("@xterm/addon-fit", "lib/addon-fit.mjs", "xterm/addon-fit.mjs"),
    Vendored("@xterm/addon-fit", "LICENSE", "xterm/LICENSE-addon-fit"),
)


def locked(lock: dict[str, Any], package: str) -> dict[str, Any]:
    """The lock's entry for `package` (its `version`, `integrity` and `resolved`)."""
    entry = lock["packages"].get(f"node_modules/{package}")
    if not isinstance(entry, dict):
        raise SystemExit(f"{package} is not in {LOCK.relative_to(REPO)}")
    return entry


def manifest(files: dict[str, bytes], lock: dict[str, Any]) -> dict[str, Any]:
    """The manifest of `files` (vendored contents by destination), provenance from `lock`."""
    entries: dict[str, Any] = {}
    for item in sorted(FILES, key=lambda f: f.destination):
        entry = locked(lock, item.package)
        entries[item.destination] = {
            "package": item.package,
            "version": entry["version"],
            "path": item.inner,
            "sha256": hashlib.sha256(files[item.destination]).hexdigest(),
            "integrity": entry["integrity"],
            "resolved": entry["resolved"],
        }
    return {"lock": LOCK.relative_to(REPO).as_posix(), "files": entries}


def install(workdir: Path) -> Path:
    """`npm ci --ignore-scripts` in a copy of app/ui/npm under `workdir`: its node_modules."""
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(NPM / name, workdir / name)
    subprocess.run(
        ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=workdir,
        check=True,
        stdout=sys.stderr,
    )
    return workdir / "node_modules"


def vendor() -> dict[str, Any]:
    """Install the lock, copy `FILES` into `VENDOR` (removing any other file there) and write
    the manifest; returns it."""
    lock = json.loads(LOCK.read_text())
    with tempfile.TemporaryDirectory(prefix="foya-vendor-") as tmp:
        modules = install(Path(tmp))
        files: dict[str, bytes] = {}
        for item in FILES:
            installed = json.loads((modules / item.package / "package.json").read_text())
            if installed["version"] != locked(lock, item.package)["version"]:
                raise SystemExit(f"npm installed {item.package} {installed['version']}")
            files[item.destination] = (modules / item.package / item.inner).read_bytes()
    for stale in sorted(VENDOR.rglob("*"), reverse=True):
        relative = stale.relative_to(VENDOR).as_posix()
        if stale.is_file() and relative not in files:
            stale.unlink()
        elif stale.is_dir() and not any(stale.iterdir()):
            stale.rmdir()
    for destination, body in files.items():
        target = VENDOR / destination
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    document = manifest(files, lock)
    MANIFEST.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return document


def main(argv: list[str] | None = None) -> int:
    """The command line: vendor, then list what was written."""
    argparse.ArgumentParser(prog="python -m tools.vendor", description=__doc__).parse_args(argv)
    document = vendor()
    for destination, entry in document["files"].items():
        print(f"vendor/{destination}  {entry['package']}@{entry['version']}  {entry['path']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
