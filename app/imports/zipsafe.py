"""Read an untrusted ZIP archive with bounded memory, refusing anything that could hurt the reader.

`read_zip` checks an archive whole and extracts every file member, in chunks, to a private
temporary directory: it answers a `ZipMembers`, a read-only mapping name → bytes whose values
are read from disk when asked for (one member at a time), and which also opens a member as a
stream (`open`) or hashes it without holding it (`sha256`). Directory entries are checked, then
left out. Use it as a context manager: leaving it removes the extracted files. Every ZIP the
kernel or the CLI reads (ChatBuddy backups, Foya archives) goes through it. What it refuses:

- `InvalidImport`: not a ZIP, truncated, a member that does not decompress or whose CRC-32 does
  not match (every member is read to its end, which is where `zipfile` checks the CRC), an
  encrypted member, two members with the same name, or an unsafe name: absolute, a drive
  letter, a backslash, a NUL, an empty, `.` or `..` segment. Such names could escape a
  directory if anyone ever extracted them by name, and two spellings of one path could hide a
  member. (Members are extracted under numbers, never under their names.)
- `ImportTooLarge`: more than `max_members` members; members that together inflate to more
  than `max_total` bytes, or more than `max_ratio` times the archive's compressed bytes plus
  one `RATIO_ALLOWANCE` (granted once per archive, not per member: 400 small members of
  zeros each pass a per-member ratio); or one member that inflates more than `max_ratio` times
  its own compressed size plus `RATIO_ALLOWANCE` (so that small compressible files pass).

The sizes a header declares are never trusted to be small: a total they declare over the limit
is refused before anything is inflated, and every byte inflated is counted as it comes, so a
bomb is refused at the first chunk over a limit and costs one chunk of memory, whatever it
holds. (`zipfile` also stops at the declared size; the CRC then catches a header that lied.)
"""

from __future__ import annotations

import hashlib
import io
import lzma
import re
import tempfile
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from app.imports.model import ImportTooLarge, InvalidImport

RATIO_ALLOWANCE = 1024 * 1024
MAX_TOTAL = 2 * 1024**3
_CHUNK = 64 * 1024
_ENCRYPTED_FLAGS = 0x0001 | 0x0040  # traditional PKWARE encryption, strong encryption
_DRIVE = re.compile(r"^[A-Za-z]:")
# What a damaged archive can raise from inside zipfile and its decompressors.
_READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    zlib.error,
    lzma.LZMAError,
)


class ZipMembers(Mapping[str, bytes]):
    """The file members of a checked archive, extracted to a private temporary directory:
    `members[name]` reads one member's bytes from disk; `open` and `sha256` never hold it."""

    def __init__(self, folder: tempfile.TemporaryDirectory[str], files: dict[str, Path]) -> None:
        self._folder, self._files = folder, files

    def __getitem__(self, name: str) -> bytes:
        return self._files[name].read_bytes()

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, name: object) -> bool:
        return name in self._files

    def open(self, name: str) -> IO[bytes]:
        """The member `name` as a binary file, read from disk."""
        return self._files[name].open("rb")

    def size(self, name: str) -> int:
        """The member's inflated size in bytes."""
        return self._files[name].stat().st_size

    def sha256(self, name: str) -> str:
        """The member's SHA-256 (hex), read in chunks."""
        with self._files[name].open("rb") as stream:
            return hashlib.file_digest(stream, "sha256").hexdigest()

    def close(self) -> None:
        """Remove the extracted files (also done when the mapping is garbage-collected)."""
        self._folder.cleanup()

    def __enter__(self) -> ZipMembers:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_zip(
    source: bytes | Path,
    *,
    max_members: int = 100_000,
    max_total: int = MAX_TOTAL,
    max_ratio: int = 200,
    into: Path | None = None,
) -> ZipMembers:
    """Every file member of the ZIP `source` (its bytes, or a file), checked as above and
    extracted under `into` (default: the system's temporary directory)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except _READ_ERRORS as exc:
        raise InvalidImport(f"not a readable ZIP archive ({_reason(exc)})") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > max_members:
            raise ImportTooLarge(f"the archive has {len(infos)} members (at most {max_members})")
        compressed = len(source) if isinstance(source, bytes) else source.stat().st_size
        limit = min(max_total, max_ratio * compressed + RATIO_ALLOWANCE)
        _check_entries(infos, limit)
        folder = tempfile.TemporaryDirectory(prefix="foya-zip-", dir=into)
        try:
            root = Path(folder.name)
            files: dict[str, Path] = {}
            budget = limit
            for info in infos:
                if info.is_dir():
                    continue
                allowed = max_ratio * min(info.compress_size, compressed) + RATIO_ALLOWANCE
                target = root / str(len(files))
                budget -= _extract(archive, info, target, (allowed, budget, limit))
                files[info.filename] = target
        except BaseException:
            folder.cleanup()
            raise
        return ZipMembers(folder, files)


def _check_entries(infos: list[zipfile.ZipInfo], budget: int) -> None:
    """Names, duplicates and encryption, and the declared sizes against `budget`: all before
    a byte is inflated."""
    seen: set[str] = set()
    declared = 0
    for info in infos:
        _check_name(info)
        if info.filename in seen:
            raise InvalidImport(f"the archive holds {info.filename!r} twice")
        seen.add(info.filename)
        if info.flag_bits & _ENCRYPTED_FLAGS:
            raise InvalidImport(f"member {info.filename!r} is encrypted")
        declared += info.file_size
        if declared > budget:
            raise ImportTooLarge(_total_message(budget, info))


def _extract(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, limits: tuple[int, int, int]
) -> int:
    """Inflate one member into `target` in chunks, stopping at the first chunk past a limit
    (`limits`: this member's allowance, what is left of the archive's, the archive's); the
    bytes written."""
    allowed, remaining, total = limits
    size = 0
    try:
        with archive.open(info) as stream, target.open("xb") as out:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > allowed:
                    raise ImportTooLarge(
                        f"member {info.filename!r} inflates more than {allowed} bytes from "
                        f"{info.compress_size} compressed (a ZIP bomb?)"
                    )
                if size > remaining:
                    raise ImportTooLarge(_total_message(total, info))
                out.write(chunk)
    except ImportTooLarge:
        raise
    except _READ_ERRORS as exc:
        raise InvalidImport(f"member {info.filename!r} is damaged ({_reason(exc)})") from None
    return size


def _total_message(limit: int, at: zipfile.ZipInfo) -> str:
    return (
        f"the archive's members inflate to more than {limit} bytes, at member "
        f"{at.filename!r} (a ZIP bomb?)"
    )


def _check_name(info: zipfile.ZipInfo) -> None:
    # `orig_filename` is the name as stored: zipfile cuts `filename` at a NUL.
    raw = info.orig_filename
    name = raw[:-1] if raw.endswith("/") else raw
    if (
        "\x00" in raw
        or "\\" in raw
        or raw.startswith("/")
        or _DRIVE.match(raw)
        or any(part in ("", ".", "..") for part in name.split("/"))
    ):
        raise InvalidImport(f"member name {raw!r} is not a safe relative path")


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
