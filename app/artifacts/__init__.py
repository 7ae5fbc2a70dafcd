"""Artifacts: images a user attaches to a session, stored as files beside the event log.

`<root>/<session>/<id>.<ext>` is the normalized image, `<id>.json` its metadata (AttachmentRef
fields, `committed`, `created_at`), written last so that metadata present means a complete image.
Uploads are identified by content, never by name or client media type, bounded from the header
before any pixel is decoded, then re-encoded in the same format so the stored file carries no EXIF,
XMP, comments or text chunks. Synchronous and CPU bound: the kernel calls it via asyncio.to_thread.

Decoding is `app.artifacts.images`'s alone, for session artifacts, canvas assets and imported
images alike, since all of them are stored through `Artifacts.add`: at most `MAX_PIXELS`
decoded pixels per upload, bounded from the header before a pixel is decoded (a 186-byte
animated WebP of three 5700² frames is refused with the header read, never decoded).

Pillow is imported by the functions that decode, on the first upload: mapping its native
libraries at start cost every `foya serve` resident memory and start-up time (bench/http.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
import threading
import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.artifacts.images import (
    MAX_ANIMATION_PIXELS,
    MAX_BYTES,
    MAX_FRAMES,
    MAX_PIXELS,
    MAX_SIDE,
    MEDIA_TYPES,
    ImageTooLarge,
    UnsupportedImage,
    _normalize,
)
from app.errors import BadRequest, Conflict, FoyaError, NotFound
from app.files import fsync_dir, write_bytes_atomic, write_json_atomic

__all__ = [
    "MAX_ANIMATION_PIXELS",
    "MAX_BYTES",
    "MAX_FRAMES",
    "MAX_PIXELS",
    "MAX_SIDE",
    "MEDIA_TYPES",
    "ArtifactCommitted",
    "ArtifactCorrupt",
    "ArtifactNotFound",
    "Artifacts",
    "ImageTooLarge",
    "InvalidArtifactId",
    "InvalidSessionId",
    "UnsupportedImage",
    "_normalize",
    "display_name",
    "forked_id",
]

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
_REF_FIELDS = ("id", "name", "kind", "media_type", "bytes", "width", "height", "sha256")
_ID = re.compile(r"[0-9a-f]{32}")
_SESSION = re.compile(r"[A-Za-z0-9_-]{1,64}")


class InvalidArtifactId(BadRequest):
    """An artifact id that is not 32 lowercase hex digits."""

    code = "invalid_artifact_id"


class InvalidSessionId(BadRequest):
    """A session id an artifact path cannot be made of (1-64 of A-Z, a-z, 0-9, `_`, `-`)."""

    code = "invalid_session_id"


class ArtifactNotFound(NotFound):
    """No artifact of that id in the session."""

    code = "artifact_not_found"


class ArtifactCommitted(Conflict):
    """Deleting an artifact a stored message uses (it is part of the conversation)."""

    code = "artifact_committed"


class ArtifactCorrupt(FoyaError):  # stored bytes or metadata damaged or tampered with
    """An artifact whose stored bytes or metadata are missing, damaged or tampered with."""

    code = "artifact_corrupt"


class Artifacts:
    """Images a user attaches to a session, normalized and stored under <root>/<session>/."""

    def __init__(self, root: Path) -> None:
        self._root = root
        # Serializes metadata changes, so a delete cannot interleave with a commit's rewrite.
        self._lock = threading.Lock()

    def add(self, session: str, name: str, data: bytes) -> dict[str, Any]:
        """Validate and normalize an upload, store it uncommitted, and return its AttachmentRef."""
        folder = self._dir(session)
        fmt, payload, width, height = _normalize(data)
        media_type = MEDIA_TYPES[fmt]
        artifact_id = secrets.token_hex(16)
        meta: dict[str, Any] = {
            "id": artifact_id,
            "name": display_name(name),
            "kind": "image",
            "media_type": media_type,
            "bytes": len(payload),
            "width": width,
            "height": height,
            "sha256": hashlib.sha256(payload).hexdigest(),
            "committed": False,
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        }
        with self._lock:
            self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.mkdir(mode=0o700, exist_ok=True)
            write_bytes_atomic(folder / f"{artifact_id}.{_EXTENSIONS[media_type]}", payload)
            write_json_atomic(folder / f"{artifact_id}.json", meta)
        return _ref(meta)

    def ref(self, session: str, artifact_id: str) -> dict[str, Any]:
        """The AttachmentRef of a stored artifact."""
        return _ref(self._meta(session, artifact_id))

    def committed(self, session: str, artifact_id: str) -> bool:
        """Whether a turn has used the artifact (then it is kept with history)."""
        return bool(self._meta(session, artifact_id)["committed"])

    def read(self, session: str, artifact_id: str) -> tuple[bytes, str]:
        """The stored bytes and media type, after checking them against the recorded SHA-256."""
        meta = self._meta(session, artifact_id)
        try:
            data = self._image(session, meta).read_bytes()
        except FileNotFoundError:
            self._meta(session, artifact_id)  # deleted meanwhile: that is a 404, not damage
            raise ArtifactCorrupt(f"artifact {artifact_id}: image file is missing") from None
        if hashlib.sha256(data).hexdigest() != meta["sha256"]:
            raise ArtifactCorrupt(f"artifact {artifact_id}: stored bytes do not match their hash")
        return data, str(meta["media_type"])

    def delete(self, session: str, artifact_id: str) -> None:
        """Remove an uncommitted artifact; a committed one belongs to history and is refused."""
        with self._lock:
            meta = self._meta(session, artifact_id)
            if meta["committed"]:
                raise ArtifactCommitted(f"artifact {artifact_id} is used by a message")
            # Metadata first: a crash in between leaves an orphan image, never a dangling ref.
            (self._dir(session) / f"{artifact_id}.json").unlink(missing_ok=True)
            self._image(session, meta).unlink(missing_ok=True)
            fsync_dir(self._dir(session))

    def commit(self, session: str, ids: list[str]) -> list[dict[str, Any]]:
        """Mark artifacts as used by a message (all or none) and return their refs in order."""
        with self._lock:
            metas = [self._meta(session, artifact_id) for artifact_id in ids]
            for meta in metas:
                if not meta["committed"]:
                    meta["committed"] = True
                    write_json_atomic(self._dir(session) / f"{meta['id']}.json", meta)
        return [_ref(meta) for meta in metas]

    def copy(self, source: str, target: str, ids: Iterable[str]) -> None:
        """Copy artifacts (image, then metadata) into a forked session under the ids
        `forked_id` gives them there; absent ones are skipped."""
        wanted = [_check_id(artifact_id) for artifact_id in ids]
        dst = self._dir(target)
        with self._lock:
            for artifact_id in wanted:
                try:
                    meta = self._meta(source, artifact_id)
                    image_bytes = self._image(source, meta).read_bytes()
                except (ArtifactNotFound, ArtifactCorrupt, FileNotFoundError):
                    continue
                copied = {**meta, "id": forked_id(target, artifact_id)}
                self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
                dst.mkdir(mode=0o700, exist_ok=True)
                write_bytes_atomic(self._image(target, copied), image_bytes)
                write_json_atomic(dst / f"{copied['id']}.json", copied)

    def remove_session(self, session: str) -> None:
        """Delete every artifact of a session (its whole directory)."""
        folder = self._dir(session)
        with self._lock:
            try:
                shutil.rmtree(folder)
            except FileNotFoundError:
                return
            fsync_dir(self._root)

    def _dir(self, session: str) -> Path:
        if not _SESSION.fullmatch(session):
            raise InvalidSessionId("invalid session id")
        return self._root / session

    def _meta(self, session: str, artifact_id: str) -> dict[str, Any]:
        path = self._dir(session) / f"{_check_id(artifact_id)}.json"
        try:
            meta = json.loads(path.read_bytes())
        except FileNotFoundError:
            raise ArtifactNotFound(f"artifact {artifact_id} not found") from None
        except ValueError:
            meta = None
        if not (
            isinstance(meta, dict)
            and all(key in meta for key in (*_REF_FIELDS, "committed"))
            and meta["id"] == artifact_id
            and meta["media_type"] in _EXTENSIONS
        ):
            raise ArtifactCorrupt(f"artifact {artifact_id}: unreadable metadata")
        return meta

    def _image(self, session: str, meta: dict[str, Any]) -> Path:
        # `meta` comes from `_meta`, so its id is checked and its media type known.
        return self._dir(session) / f"{meta['id']}.{_EXTENSIONS[meta['media_type']]}"


def forked_id(target: str, artifact_id: str) -> str:
    """The id an artifact gets in fork `target`: derived, so the store can rename references
    in the copied messages and the files can be copied afterwards without a shared table, and
    distinct per fork, so no two sessions share an artifact id."""
    return hashlib.sha256(f"{target}\0{artifact_id}".encode()).hexdigest()[:32]


def _check_id(artifact_id: str) -> str:
    # Checked before any path is built: ids arrive from URLs and message bodies.
    if not isinstance(artifact_id, str) or not _ID.fullmatch(artifact_id):
        raise InvalidArtifactId("invalid artifact id")
    return artifact_id


def _ref(meta: dict[str, Any]) -> dict[str, Any]:
    return {key: meta[key] for key in _REF_FIELDS}


def display_name(name: str) -> str:
    """A file name safe to show and store: its last path part, without control characters."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    # Drop controls, format characters (bidi overrides can fake an extension) and lone surrogates.
    clean = "".join(c for c in base if unicodedata.category(c) not in ("Cc", "Cf", "Cs")).strip()
    return clean[:255] if clean not in ("", ".", "..") else "image"
