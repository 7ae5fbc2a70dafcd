"""Canvas videos: what counts as one (from its bytes), and receiving one onto disk as it arrives.

A video is recognized by its container's signature, never by a name or a declared type:

- MP4 (`video/mp4`) and QuickTime (`video/quicktime`, major brand `qt  `): an ISO base media
  `ftyp` box first, whose major brand is not one of a still image (HEIF, AVIF) or of audio
  only (M4A and kin) — those share the container.
- WebM (`video/webm`): an EBML header whose `DocType` is `webm`.

`Incoming` writes an upload or a download to a staging file (`canvas-assets/.incoming/`, 0600,
on the same file system as the assets, so storing it is a rename) while hashing it; it is never
held in memory. It refuses more than its limit as soon as it is passed, and removes its file
unless it was kept (`discard`, called on every failure). The disk work runs off the event loop,
a batch of at least `BATCH` bytes at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from app.files import fsync_dir
from app.kernel.canvas.models import AssetTooLarge

MAX_VIDEO_BYTES = 500 * 1024 * 1024
#: Bytes enough to recognize any of the containers above.
SNIFF_BYTES = 64
BATCH = 1024 * 1024
EXTENSIONS = {"video/mp4": "mp4", "video/quicktime": "mov", "video/webm": "webm"}
_STILL_OR_AUDIO = frozenset(
    {b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1", b"avif", b"avis"}
    | {b"M4A ", b"M4B ", b"M4P ", b"F4A ", b"F4B "}
)
_EBML = b"\x1a\x45\xdf\xa3"
_DOCTYPE = b"\x42\x82"


def video_type(head: bytes) -> str | None:
    """The media type of the video whose first bytes are `head`, or None."""
    if len(head) >= 12 and head[4:8] == b"ftyp" and int.from_bytes(head[:4], "big") >= 12:
        brand = head[8:12]
        if brand in _STILL_OR_AUDIO:
            return None
        return "video/quicktime" if brand == b"qt  " else "video/mp4"
    if head.startswith(_EBML) and _doctype(head) == b"webm":
        return "video/webm"
    return None


def _doctype(head: bytes) -> bytes | None:
    """The EBML header's DocType, if it lies within `head` (its size a one-byte vint)."""
    at = head.find(_DOCTYPE, len(_EBML))
    if at < 0 or at + 3 > len(head) or not head[at + 2] & 0x80:
        return None
    size = head[at + 2] & 0x7F
    return head[at + 3 : at + 3 + size]


@dataclass(frozen=True)
class Received:
    """A complete staged file: where it is, its size, SHA-256 and first bytes."""

    path: Path
    size: int
    sha256: str
    head: bytes


class Incoming:
    """One file being received into `staging` (see the module docstring)."""

    def __init__(self, staging: Path, limit: int = MAX_VIDEO_BYTES) -> None:
        self.staging = staging
        self.limit = limit
        self.path = staging / f"{secrets.token_hex(16)}.part"
        self._file: BinaryIO | None = None
        self._hash = hashlib.sha256()
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._size = 0
        self._head = b""

    async def write(self, chunk: bytes) -> None:
        """Take the next bytes; `AssetTooLarge` once past the limit."""
        self._size += len(chunk)
        if self._size > self.limit:
            raise AssetTooLarge(
                f"canvas asset is too large: videos are at most {self.limit >> 20} MiB"
            )
        if len(self._head) < SNIFF_BYTES:
            self._head += chunk[: SNIFF_BYTES - len(self._head)]
        self._pending.append(chunk)
        self._pending_size += len(chunk)
        if self._pending_size >= BATCH:
            await self._flush()

    async def finish(self) -> Received:
        """Everything written and synced: the staged file."""
        await self._flush()
        await asyncio.to_thread(self._close, True)
        return Received(self.path, self._size, self._hash.hexdigest(), self._head)

    async def discard(self) -> None:
        """Close and remove the staged file (nothing if it was stored meanwhile)."""
        await asyncio.to_thread(self._drop)

    async def _flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending, self._pending_size = [], 0
        await asyncio.to_thread(self._append, data)

    def _append(self, data: bytes) -> None:
        if self._file is None:
            self.staging.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            self._file = os.fdopen(fd, "wb")
        self._hash.update(data)
        self._file.write(data)

    def _close(self, sync: bool) -> None:
        if self._file is None and sync:
            self._append(b"")  # an empty file is still a file to store (or refuse)
        if self._file is not None:
            if sync:
                self._file.flush()
                os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def _drop(self) -> None:
        with contextlib.suppress(OSError):
            self._close(False)
        self.path.unlink(missing_ok=True)


async def receive(staging: Path, chunks: AsyncIterator[bytes], head: bytes = b"") -> Received:
    """`head` then `chunks`, staged whole (see `Incoming`)."""
    incoming = Incoming(staging)
    try:
        if head:
            await incoming.write(head)
        async for chunk in chunks:
            await incoming.write(chunk)
        return await incoming.finish()
    except BaseException:
        await asyncio.shield(incoming.discard())
        raise


async def peek(chunks: AsyncIterator[bytes], size: int = SNIFF_BYTES) -> bytes:
    """At least `size` bytes from the start of `chunks` (fewer only if it ends first)."""
    head = b""
    while len(head) < size:
        chunk = await anext(chunks, None)
        if chunk is None:
            break
        head += chunk
    return head


async def collect(head: bytes, chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """`head` and the rest of `chunks` in memory, refused (`AssetTooLarge`) past `limit`."""
    parts, size = [head], len(head)
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise AssetTooLarge(
                f"canvas asset is too large: images are at most {limit >> 20} MiB "
                f"(videos {MAX_VIDEO_BYTES >> 20} MiB)"
            )
        parts.append(chunk)
    if size > limit:
        raise AssetTooLarge(f"canvas asset is too large: images are at most {limit >> 20} MiB")
    return b"".join(parts)


def place(received: Received, target: Path) -> None:
    """Move a staged file to `target` (its directory created 0700) durably (blocking)."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.replace(received.path, target)
    fsync_dir(target.parent)


@dataclass(frozen=True)
class AssetBody:
    """An asset's bytes to serve: an image's (checked against its SHA-256) in memory, or a
    video's file, read a range at a time."""

    size: int
    data: bytes | None = None
    path: Path | None = None

    async def chunks(self, start: int, stop: int, size: int = 256 * 1024) -> AsyncIterator[bytes]:
        """Bytes `start` up to (not including) `stop`, in pieces of at most `size`."""
        if self.data is not None:
            yield self.data[start:stop]
            return
        assert self.path is not None
        file = await asyncio.to_thread(self.path.open, "rb")
        try:
            await asyncio.to_thread(file.seek, start)
            left = stop - start
            while left > 0:
                piece = await asyncio.to_thread(file.read, min(size, left))
                if not piece:
                    return  # cut short (truncated meanwhile): the client sees a short body
                left -= len(piece)
                yield piece
        finally:
            await asyncio.to_thread(file.close)
