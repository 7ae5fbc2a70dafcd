"""An upload to import (`POST /imports`): its form, and the bundle its file holds.

Which sources can be uploaded, and the name each upload is saved as for its parser, come from
the one table of import sources (`app.imports.sources`).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from app.imports import sources
from app.imports.model import ImportBundle, InvalidImportSource
from app.imports.sources import NOT_UPLOADABLE, UPLOADABLE

__all__ = ["UPLOADABLE", "UploadForm", "parse_upload", "receive"]


@dataclass(frozen=True)
class UploadForm:
    """What `POST /imports` sends beside its file."""

    source: str
    passphrase: str | None = None
    with_keys: bool = False
    project_id: str | None = None


async def receive(chunks: AsyncIterator[bytes], path: Path) -> None:
    """Write a file that arrives in `chunks` to `path` (a new file) as it comes: an upload is
    never held whole in memory."""
    with path.open("xb") as out:
        async for chunk in chunks:
            await asyncio.to_thread(out.write, chunk)


def parse_upload(
    source: str, data: bytes | Path, passphrase: str | None, scratch: Path
) -> ImportBundle:
    """The bundle an uploaded file (its bytes, or a file, which is moved) holds, read from a
    private temporary file; an archive's members are extracted beside it. Runs in a thread."""
    found = sources.TABLE.get(source)
    if found is None or found.upload_name is None:
        directories = " and ".join(f"{name}'s" for name in NOT_UPLOADABLE)
        commands = ", ".join(f"`foya import {name}`" for name in NOT_UPLOADABLE)
        raise InvalidImportSource(
            f"source must be one of {', '.join(UPLOADABLE)} ({directories} history is a "
            f"directory: import it with {commands})"
        )
    scratch.mkdir(mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        path = Path(folder) / found.upload_name
        if isinstance(data, Path):
            data.replace(path)
        else:
            path.write_bytes(data)
        return sources.parse(source, path, passphrase=passphrase, scratch=Path(folder))
