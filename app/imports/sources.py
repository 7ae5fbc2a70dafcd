"""Which parser reads which source: the one dispatch the CLI (`foya import`) and the kernel
(`POST /imports`) share. Parsers are imported on first use: start-up never loads them."""

from __future__ import annotations

from pathlib import Path

from app.imports.model import ImportBundle, Progress


def parse(
    source: str,
    path: Path,
    *,
    passphrase: str | None = None,
    images_dir: Path | None = None,
    progress: Progress | None = None,
    scratch: Path | None = None,
) -> ImportBundle:
    """What the file or directory `path` holds, read as `source` (one of `model.SOURCES`).
    Providers are always read; callers drop them unless the user asked for keys. An archive's
    members are extracted under `scratch` (default: the system's temporary directory)."""
    if source == "chatbuddy":
        from app.imports import chatbuddy

        return chatbuddy.parse(
            path,
            passphrase=passphrase,
            images_dir=images_dir,
            with_keys=True,
            progress=progress,
            scratch=scratch,
        )
    if source == "foya":
        from app.imports import archive

        return archive.read(path, progress=progress, scratch=scratch)
    if source == "claude-code":
        from app.imports import claude_code

        return claude_code.parse(path, progress=progress)
    if source == "codex":
        from app.imports import codex

        return codex.parse(path, progress=progress)
    if source == "opencode":
        from app.imports import opencode

        return opencode.parse(path, progress=progress)
    raise ValueError(f"unknown import source {source!r}")
