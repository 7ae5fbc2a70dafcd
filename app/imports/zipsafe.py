"""Read an untrusted ZIP archive into memory, refusing anything that could hurt the reader.

`read_zip` returns every file member's bytes by name (directory entries are checked, then
left out). What it refuses, and with which error:

- `InvalidImport`: not a ZIP, truncated, a member that does not decompress or whose CRC-32 does
  not match (every member is read to its end, which is where `zipfile` checks the CRC), an
  encrypted member, two members with the same name, or an unsafe name: absolute, a drive
  letter, a backslash, a NUL, an empty, `.` or `..` segment. Such names could escape a
  directory if anyone ever extracted them, and two spellings of one path could hide a member.
- `ImportTooLarge`: more than `max_members` members, more than `max_total` bytes once
  decompressed, or a member that inflates more than `max_ratio` times its compressed size
  (plus `RATIO_ALLOWANCE`, so that small highly compressible files pass): a ZIP bomb.

The sizes a header declares are never trusted: each member is read in chunks, counted as it
comes, and reading stops as soon as a limit is passed, so a bomb costs at most one chunk over
the limit. (`zipfile` also stops at the declared size; the CRC then catches a header that lied.)
"""

from __future__ import annotations

import io
import lzma
import re
import zipfile
import zlib

from app.imports.model import ImportTooLarge, InvalidImport

RATIO_ALLOWANCE = 1024 * 1024
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


def read_zip(
    data: bytes,
    *,
    max_members: int = 100_000,
    max_total: int = 2 * 1024**3,
    max_ratio: int = 200,
) -> dict[str, bytes]:
    """Every file member of the ZIP `data`, name → bytes, after the checks above."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except _READ_ERRORS as exc:
        raise InvalidImport(f"not a readable ZIP archive ({_reason(exc)})") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > max_members:
            raise ImportTooLarge(f"the archive has {len(infos)} members (at most {max_members})")
        seen: set[str] = set()
        for info in infos:
            _check_name(info)
            if info.filename in seen:
                raise InvalidImport(f"the archive holds {info.filename!r} twice")
            seen.add(info.filename)
            if info.flag_bits & _ENCRYPTED_FLAGS:
                raise InvalidImport(f"member {info.filename!r} is encrypted")
        members: dict[str, bytes] = {}
        total = 0
        for info in infos:
            if info.is_dir():
                continue
            allowed = max_ratio * min(info.compress_size, len(data)) + RATIO_ALLOWANCE
            body = _read_member(archive, info, allowed, max_total - total)
            total += len(body)
            members[info.filename] = body
        return members


def _read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, allowed: int, remaining: int
) -> bytes:
    """The member's bytes, read in chunks; stops as soon as a limit is passed."""
    chunks: list[bytes] = []
    size = 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > allowed:
                    raise ImportTooLarge(
                        f"member {info.filename!r} inflates more than {allowed} bytes from "
                        f"{info.compress_size} compressed (a ZIP bomb?)"
                    )
                if size > remaining:
                    raise ImportTooLarge("the archive's members add up to more than the limit")
                chunks.append(chunk)
    except _READ_ERRORS as exc:
        raise InvalidImport(f"member {info.filename!r} is damaged ({_reason(exc)})") from None
    return b"".join(chunks)


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
