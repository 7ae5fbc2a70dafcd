"""The one place images are decoded: an upload bounded from its header, decoded within the
limits and re-encoded in its own format (no EXIF, XMP, comments or text chunks survive).

The one bound on decoding (`_check_header`): at most `MAX_PIXELS` decoded pixels per upload,
width x height x frames, read from the header (the frame count WebP and APNG declare) before a
pixel is decoded, and counted again frame by frame (a GIF's frames can only be counted by
decoding them). Pillow's own bomb guard (`Image.MAX_IMAGE_PIXELS`) is set to the same limit, and
its warning is a refusal too. Pillow is imported on the first upload, not at start.
"""

from __future__ import annotations

import io
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

from app.errors import FoyaError

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
# Frame info worth keeping: colour and timing. The rest (exif, xmp, comment, text) is dropped.
_KEEP_INFO = ("icc_profile", "transparency", "background", "duration", "loop")


class UnsupportedImage(FoyaError):
    """An upload that is not a readable PNG, JPEG, WebP or GIF image."""

    status = 415
    code = "unsupported_image"


class ImageTooLarge(FoyaError):
    """An image over the byte, pixel or frame limits of an upload."""

    status = 413
    code = "image_too_large"


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
