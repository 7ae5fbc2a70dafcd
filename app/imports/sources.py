"""The one table of import sources: each history Foya reads, its name, what it is, the name an
upload of it gets for its parser, and its parser. The CLI (`foya import`), the kernel
(`POST /imports`) and the routes (the upload form's `source` values) all read it. Parsers are
imported on first use: start-up never loads them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.imports.model import ImportBundle, Progress


@dataclass(frozen=True)
class Options:
    """What a parser may be given beside its path."""

    passphrase: str | None = None
    images_dir: Path | None = None
    progress: Progress | None = None
    scratch: Path | None = None


@dataclass(frozen=True)
class Source:
    """One source of histories to import."""

    name: str
    #: What PATH (or an upload) is for this source, as the CLI's help says it.
    what: str
    #: The file name an upload is saved as for the parser (the transcript parsers pick their
    #: files by name); None when the source cannot be uploaded (a directory).
    upload_name: str | None
    read: Callable[[Path, Options], ImportBundle]


def _chatbuddy(path: Path, options: Options) -> ImportBundle:
    from app.imports import chatbuddy

    # Providers are always read; callers drop them unless the user asked for keys.
    return chatbuddy.parse(
        path,
        passphrase=options.passphrase,
        images_dir=options.images_dir,
        with_keys=True,
        progress=options.progress,
        scratch=options.scratch,
    )


def _foya(path: Path, options: Options) -> ImportBundle:
    from app.imports import archive

    return archive.read(path, progress=options.progress, scratch=options.scratch)


def _claude_code(path: Path, options: Options) -> ImportBundle:
    from app.imports import claude_code

    return claude_code.parse(path, progress=options.progress)


def _codex(path: Path, options: Options) -> ImportBundle:
    from app.imports import codex

    return codex.parse(path, progress=options.progress)


def _opencode(path: Path, options: Options) -> ImportBundle:
    from app.imports import opencode

    return opencode.parse(path, progress=options.progress)


# In the order the upload form lists them.
TABLE: dict[str, Source] = {
    source.name: source
    for source in (
        Source("chatbuddy", "a ChatBuddy backup", "backup.zip", _chatbuddy),
        Source("foya", "an archive of `foya export`", "archive.zip", _foya),
        Source("claude-code", "a transcript or a folder of them", "transcript.jsonl", _claude_code),
        Source("codex", "a transcript or a folder of them", "rollout-upload.jsonl", _codex),
        Source("opencode", "its storage folder", None, _opencode),
    )
}
#: Every source the CLI imports.
SOURCES = tuple(TABLE)
#: The sources `POST /imports` takes (the others are directories).
UPLOADABLE = tuple(name for name, source in TABLE.items() if source.upload_name is not None)
#: Those it does not take, each imported from its directory with `foya import`.
NOT_UPLOADABLE = tuple(name for name in SOURCES if name not in UPLOADABLE)


def parse(
    source: str,
    path: Path,
    *,
    passphrase: str | None = None,
    images_dir: Path | None = None,
    progress: Progress | None = None,
    scratch: Path | None = None,
) -> ImportBundle:
    """What the file or directory `path` holds, read as `source` (one of `SOURCES`).
    Providers are always read; callers drop them unless the user asked for keys. An archive's
    members are extracted under `scratch` (default: the system's temporary directory)."""
    found = TABLE.get(source)
    if found is None:
        raise ValueError(f"unknown import source {source!r}")
    return found.read(path, Options(passphrase, images_dir, progress, scratch))
