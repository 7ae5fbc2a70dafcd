"""Artifacts: images a user attaches to a session, stored as files beside the event log.

`<root>/<session>/<id>.<ext>` is the normalized image, `<id>.json` its metadata (AttachmentRef
fields, `committed`, `created_at`), written last so that metadata present means a complete image.
Uploads are identified by content, never by name or client media type, bounded from the header
before any pixel is decoded, then re-encoded in the same format so the stored file carries no EXIF,
XMP, comments or text chunks. Synchronous and CPU bound: the kernel calls it via asyncio.to_thread.

The one bound on decoding (`_check_header`, for session artifacts, canvas assets and imported
images alike, since all of them are stored through `Artifacts.add`): at most `MAX_PIXELS`
decoded pixels per upload, width x height x frames, read from the header (the frame count
WebP and APNG declare) before a pixel is decoded, and counted again frame by frame (a GIF's
frames can only be counted by decoding them). A 186-byte animated WebP of three 5700² frames
is refused with the header read, never decoded. Pillow's own bomb guard
(`Image.MAX_IMAGE_PIXELS`) is set to the same limit, and its warning is a refusal too.

Pillow is imported by the functions that decode, on the first upload: mapping its native
libraries at start cost every `foya serve` resident memory and start-up time (bench/http.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import secrets
import shutil
import threading
import unicodedata
import warnings
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from app.errors import BadRequest, Conflict, FoyaError, NotFound
from app.files import fsync_dir, write_bytes_atomic, write_json_atomic

if TYPE_CHECKING:
    from PIL.Image import Image as PILImage

MAX_BYTES = 20 * 1024 * 1024
MAX_SIDE = 8192
MAX_PIXELS = 40_000_000
MAX_FRAMES = 300
# Summed over frames: every frame is held decoded while saving, so an animation may decode no
# more than the largest still image.
MAX_ANIMATION_PIXELS = MAX_PIXELS
MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif"}
_REF_FIELDS = ("id", "name", "kind", "media_type", "bytes", "width", "height", "sha256")
# Frame info worth keeping: colour and timing. The rest (exif, xmp, comment, text) is dropped.
_KEEP_INFO = ("icc_profile", "transparency", "background", "duration", "loop")
_ID = re.compile(r"[0-9a-f]{32}")
_SESSION = re.compile(r"[A-Za-z0-9_-]{1,64}")


class InvalidArtifactId(BadRequest):
    code = "invalid_artifact_id"


class ArtifactNotFound(NotFound):
    code = "artifact_not_found"


class ArtifactCommitted(Conflict):
    code = "artifact_committed"


class UnsupportedImage(FoyaError):
    status = 415
    code = "unsupported_image"


class ImageTooLarge(FoyaError):
    status = 413
    code = "image_too_large"


class ArtifactCorrupt(FoyaError):  # stored bytes or metadata damaged or tampered with
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
            raise BadRequest("invalid session id", code="invalid_session_id")
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


def _normalize(data: bytes) -> tuple[str, bytes, int, int]:
    """Decode an upload within the limits and re-encode it: (format, bytes, width, height)."""
    if len(data) > MAX_BYTES:
        raise ImageTooLarge(f"image is larger than {MAX_BYTES // (1024 * 1024)} MiB")
    Image = _pillow()

    try:
        # Only these four decoders may run: a refused format (TIFF, BMP, PSD, ...) is never
        # parsed at all, which is both less attack surface and less wasted work.
        with Image.open(io.BytesIO(data), formats=list(MEDIA_TYPES)) as im:
            fmt = "JPEG" if im.format == "MPO" else str(im.format)
            _check_header(im, fmt)
            frames = _frames(im, single=fmt == "JPEG")
            out = _encode(frames, fmt, im, data)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        # Pillow's own guard, at the same limit as ours (`_pillow`): a refusal either way.
        raise ImageTooLarge("image dimensions are too large") from None
    except (FoyaError, MemoryError):
        raise
    except Exception as e:  # Pillow reports corrupt data as OSError, SyntaxError, ValueError...
        raise UnsupportedImage("not a readable PNG, JPEG, WebP or GIF image") from e
    return fmt, out, frames[0].width, frames[0].height


def _pillow() -> ModuleType:
    """Pillow's Image module, its bomb guard set to our limit: above `MAX_PIXELS` it warns
    (made an error here: a warning would let the image be decoded) and above twice that it
    refuses. Set on every call, since test runners and other code may reset warning filters;
    `filterwarnings` replaces an identical filter rather than adding one."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    warnings.filterwarnings("error", category=Image.DecompressionBombWarning)
    return Image


def _check_header(im: PILImage, fmt: str) -> None:
    """Refuse, from the header alone, an image whose frames would decode to more than
    `MAX_PIXELS` pixels. WebP and APNG declare their frame count; a GIF's is only known by
    decoding its frames, so `_frames` counts it as it goes; a JPEG (MPO) keeps one picture."""
    width, height = im.size
    declared = 1 if fmt in ("JPEG", "GIF") else int(getattr(im, "n_frames", 1))
    if declared > MAX_FRAMES:
        raise ImageTooLarge(f"animation has {declared} frames (at most {MAX_FRAMES})")
    if width * height * declared > MAX_ANIMATION_PIXELS:
        raise ImageTooLarge(
            f"image is {declared} frame(s) of {width}x{height}: more than {MAX_PIXELS} "
            "pixels to decode"
        )


def _frames(im: PILImage, *, single: bool) -> list[PILImage]:
    """Every frame, upright and without metadata; sizes are checked before a frame is decoded."""
    from PIL import ImageOps

    frames: list[PILImage] = []
    total = 0
    while True:
        width, height = im.size  # from the header: Image.open and seek do not decode pixels
        total += width * height
        if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
            raise ImageTooLarge(f"image is {width}x{height}; the limit is {MAX_SIDE} per side")
        if len(frames) >= MAX_FRAMES or total > MAX_ANIMATION_PIXELS:
            raise ImageTooLarge("animation has too many frames")
        im.load()
        frame = ImageOps.exif_transpose(im) or im.copy()  # turned the way EXIF says it displays
        frame.info = {key: frame.info[key] for key in _KEEP_INFO if key in frame.info}
        if frame.mode in ("RGBA", "LA", "PA"):
            frame.info.pop("transparency", None)
        frames.append(frame)
        if single:  # an MPO's extra pictures are stereo/preview views, not animation frames
            return frames
        try:
            im.seek(len(frames))
        except EOFError:
            return frames


def _encode(frames: list[PILImage], fmt: str, source: PILImage, data: bytes) -> bytes:
    from PIL import JpegImagePlugin

    first = frames[0]
    params: dict[str, Any] = {}
    # The ICC profile is colour data, not personal metadata: dropping it would shift colours.
    if icc := first.info.get("icc_profile"):
        params["icc_profile"] = icc
    if fmt == "JPEG":
        if first.mode not in ("L", "RGB", "CMYK"):
            frames = [first.convert("RGB")]
        params["quality"] = 90
        if (sampling := JpegImagePlugin.get_sampling(source)) >= 0:
            params["subsampling"] = sampling
    elif fmt == "PNG":
        params["optimize"] = False
    elif fmt == "WEBP":
        params.update({"lossless": True} if _webp_lossless(data) else {"quality": 90})
    if len(frames) > 1:
        params.update(save_all=True, append_images=frames[1:])
        params["duration"] = [frame.info.get("duration", 0) for frame in frames]
        if "loop" in first.info:
            params["loop"] = first.info["loop"]
        if fmt == "GIF" and any("A" in f.mode or "transparency" in f.info for f in frames):
            # Frames are saved whole; disposing to background lets pixels turn transparent again.
            params["disposal"] = 2
    out = io.BytesIO()
    frames[0].save(out, fmt, **params)
    return out.getvalue()


def _webp_lossless(data: bytes) -> bool:
    """Whether the first image chunk of a WebP file is VP8L (lossless) rather than VP8 (lossy)."""
    pos = 12
    while pos + 8 <= len(data):
        fourcc, size = data[pos : pos + 4], int.from_bytes(data[pos + 4 : pos + 8], "little")
        if fourcc in (b"VP8 ", b"VP8L"):
            return fourcc == b"VP8L"
        # An animation frame nests its image chunks after its 16-byte frame header.
        pos += 24 if fourcc == b"ANMF" else 8 + size + (size & 1)
    return False
