"""The artifact store on real files: formats, normalization, limits, ids, lifecycle, tampering."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageCms, ImageSequence, PngImagePlugin

from app.artifacts import (
    MAX_BYTES,
    MAX_SIDE,
    MEDIA_TYPES,
    ArtifactCorrupt,
    Artifacts,
    ImageTooLarge,
    UnsupportedImage,
    forked_id,
)
from app.errors import FoyaError

SESSION = "0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba98"
BAD_IDS = ["..", "../x", "a/b", "", "A" * 32, "0" * 31, "0" * 33, "%2e%2e", "0" * 31 + "/"]


@pytest.fixture
def store(tmp_path: Path) -> Artifacts:
    return Artifacts(tmp_path / "artifacts")


def encode(im: Image.Image, fmt: str, **params: Any) -> bytes:
    out = io.BytesIO()
    im.save(out, fmt, **params)
    return out.getvalue()


def picture(size: tuple[int, int] = (40, 30), mode: str = "RGB") -> Image.Image:
    """A picture whose left half is red and right half blue, so a rotation is visible."""
    im = Image.new(mode, size, "red")
    im.paste("blue", (size[0] // 2, 0, size[0], size[1]))
    return im


def animation(fmt: str, count: int = 3, **params: Any) -> bytes:
    frames = [Image.new("RGB", (24, 16), color) for color in ("red", "lime", "blue")[:count]]
    durations = [100, 200, 300][:count]
    return encode(
        frames[0], fmt, save_all=True, append_images=frames[1:], duration=durations, **params
    )


def rgb(im: Image.Image, xy: tuple[int, int]) -> tuple[int, int, int]:
    r, g, b = im.convert("RGB").getpixel(xy)  # type: ignore[misc]
    return r, g, b


def opened(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def code_of(excinfo: pytest.ExceptionInfo[FoyaError]) -> tuple[int, str]:
    return excinfo.value.status, excinfo.value.code


def session_files(store_root: Path, session: str = SESSION) -> list[Path]:
    folder = store_root / session
    return sorted(folder.iterdir()) if folder.exists() else []


def png_header_only(width: int, height: int) -> bytes:
    """A well-formed PNG declaring `width`x`height`, whose pixel data is next to nothing."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("fmt", "params"),
    [("PNG", {}), ("JPEG", {"quality": 95}), ("WEBP", {"quality": 80}), ("GIF", {})],
)
def test_round_trip(store: Artifacts, tmp_path: Path, fmt: str, params: dict[str, Any]) -> None:
    ref = store.add(SESSION, "holiday.img", encode(picture(), fmt, **params))
    assert set(ref) == {"id", "name", "kind", "media_type", "bytes", "width", "height", "sha256"}
    assert ref["kind"] == "image"
    assert ref["name"] == "holiday.img"
    assert ref["media_type"] == MEDIA_TYPES[fmt]
    assert (ref["width"], ref["height"]) == (40, 30)
    data, media_type = store.read(SESSION, ref["id"])
    assert media_type == ref["media_type"]
    assert ref["bytes"] == len(data)
    assert ref["sha256"] == hashlib.sha256(data).hexdigest()
    assert opened(data).format == fmt
    assert store.ref(SESSION, ref["id"]) == ref

    root = tmp_path / "artifacts"
    ext = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp", "GIF": "gif"}[fmt]
    assert {p.name for p in session_files(root)} == {f"{ref['id']}.{ext}", f"{ref['id']}.json"}
    for path in session_files(root):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / SESSION).stat().st_mode) == 0o700
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    meta = json.loads((root / SESSION / f"{ref['id']}.json").read_text())
    assert meta["committed"] is False
    assert meta["created_at"].endswith("Z") and len(meta["created_at"]) == 24
    assert {k: meta[k] for k in ref} == ref


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG"])
def test_animation_keeps_frames_durations_and_loop(store: Artifacts, fmt: str) -> None:
    ref = store.add(SESSION, "anim", animation(fmt, loop=0))
    im = opened(store.read(SESSION, ref["id"])[0])
    assert im.format == fmt
    assert im.info.get("loop") == 0
    seen = []
    for frame in ImageSequence.Iterator(im):
        frame.load()
        seen.append((frame.info["duration"], rgb(frame, (3, 3))))
    assert [d for d, _ in seen] == [100, 200, 300]
    first, last = seen[0][1], seen[-1][1]
    assert first[0] > 200 and first[2] < 60  # red, then ... blue
    assert last[2] > 200 and last[0] < 60


def test_webp_keeps_lossless_or_lossy(store: Artifacts) -> None:
    lossless = store.add(SESSION, "a", encode(picture(), "WEBP", lossless=True))
    lossy = store.add(SESSION, "b", encode(picture(), "WEBP", quality=50))
    assert b"VP8L" in store.read(SESSION, lossless["id"])[0]
    assert b"VP8 " in store.read(SESSION, lossy["id"])[0]


def test_jpeg_exif_is_applied_then_stripped(store: Artifacts) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90° clockwise to display
    exif[0x010F] = "SecretCamMaker"
    exif.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 29.0)})  # GPS latitude
    source = encode(picture(), "JPEG", exif=exif, comment=b"my home address")
    assert b"SecretCamMaker" in source

    ref = store.add(SESSION, "photo.jpg", source)
    data, _ = store.read(SESSION, ref["id"])
    assert (ref["width"], ref["height"]) == (30, 40)
    im = opened(data)
    assert im.size == (30, 40)
    red, blue = rgb(im, (15, 3)), rgb(im, (15, 36))
    assert red[0] > 200 and red[2] < 60  # the left (red) half is now on top
    assert blue[2] > 200 and blue[0] < 60
    assert not im.getexif()
    assert "exif" not in im.info and "comment" not in im.info
    for secret in (b"Exif", b"SecretCamMaker", b"my home address", b"GPS"):
        assert secret not in data


def test_png_text_removed_and_icc_kept(store: Artifacts) -> None:
    info = PngImagePlugin.PngInfo()
    info.add_text("Author", "Jane Doe, 12 Secret Street")
    info.add_itxt("Comment", "private note")
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    source = encode(picture(), "PNG", pnginfo=info, icc_profile=icc)
    data, _ = store.read(SESSION, store.add(SESSION, "x.png", source)["id"])
    for secret in (b"tEXt", b"iTXt", b"Jane Doe", b"private note"):
        assert secret not in data
    assert opened(data).info.get("icc_profile") == icc


def test_jpeg_icc_and_cmyk(store: Artifacts) -> None:
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    rgb = store.add(SESSION, "a", encode(picture(), "JPEG", icc_profile=icc))
    assert opened(store.read(SESSION, rgb["id"])[0]).info.get("icc_profile") == icc
    cmyk = store.add(SESSION, "b", encode(picture(mode="CMYK"), "JPEG"))
    assert opened(store.read(SESSION, cmyk["id"])[0]).mode == "CMYK"


@pytest.mark.parametrize(
    "data",
    [
        b"just some text, not an image\n",
        b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n",
        encode(picture(), "BMP"),
        encode(picture(), "TIFF"),
        encode(picture((16, 16)), "ICO"),
        b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>',
        b"",
    ],
    ids=["text", "pdf", "bmp", "tiff", "ico", "svg", "empty"],
)
def test_refuses_other_formats(store: Artifacts, tmp_path: Path, data: bytes) -> None:
    with pytest.raises(UnsupportedImage) as excinfo:
        store.add(SESSION, "x.png", data)
    assert code_of(excinfo) == (415, "unsupported_image")
    assert session_files(tmp_path / "artifacts") == []


def test_refuses_truncated_image(store: Artifacts, tmp_path: Path) -> None:
    noisy = Image.effect_noise((64, 64), 64).convert("RGB")
    for data in (encode(noisy, "PNG"), encode(noisy, "JPEG"), encode(noisy, "GIF")):
        with pytest.raises(UnsupportedImage):
            store.add(SESSION, "x", data[: len(data) // 2])
    assert session_files(tmp_path / "artifacts") == []


def test_refuses_too_many_bytes(store: Artifacts, tmp_path: Path) -> None:
    data = encode(picture(), "PNG")
    with pytest.raises(ImageTooLarge) as excinfo:
        store.add(SESSION, "x.png", data + bytes(MAX_BYTES + 1 - len(data)))
    assert code_of(excinfo) == (413, "image_too_large")
    assert session_files(tmp_path / "artifacts") == []


@pytest.mark.parametrize(
    "data",
    [
        encode(Image.new("L", (MAX_SIDE + 808, 10)), "PNG"),
        encode(Image.new("L", (10, MAX_SIDE + 1)), "GIF"),
        png_header_only(7000, 7000),  # under Pillow's own limit, over MAX_PIXELS
        png_header_only(60_000, 60_000),  # 3.6 GB if it were ever decoded
    ],
    ids=["wide-png", "tall-gif", "pixels", "bomb"],
)
def test_refuses_large_dimensions(store: Artifacts, tmp_path: Path, data: bytes) -> None:
    with pytest.raises(ImageTooLarge) as excinfo:
        store.add(SESSION, "x.png", data)
    assert code_of(excinfo) == (413, "image_too_large")
    assert session_files(tmp_path / "artifacts") == []


@pytest.mark.parametrize("bad", BAD_IDS)
def test_invalid_ids_are_refused_everywhere(store: Artifacts, bad: str) -> None:
    store.add(SESSION, "x", encode(picture(), "PNG"))
    calls: list[Callable[[], object]] = [
        lambda: store.ref(SESSION, bad),
        lambda: store.read(SESSION, bad),
        lambda: store.delete(SESSION, bad),
        lambda: store.commit(SESSION, [bad]),
        lambda: store.copy(SESSION, OTHER, [bad]),
    ]
    for call in calls:
        with pytest.raises(FoyaError) as excinfo:
            call()
        assert code_of(excinfo) == (400, "invalid_artifact_id")


@pytest.mark.parametrize("bad", ["", "..", "a/b", "x" * 65, "sess ion"])
def test_invalid_session_ids_are_refused(store: Artifacts, tmp_path: Path, bad: str) -> None:
    with pytest.raises(FoyaError) as excinfo:
        store.add(bad, "x", encode(picture(), "PNG"))
    assert code_of(excinfo) == (400, "invalid_session_id")
    with pytest.raises(FoyaError):
        store.remove_session(bad)
    assert not (tmp_path / "artifacts").exists()


def test_unknown_id_is_not_found(store: Artifacts) -> None:
    for call in (store.ref, store.read, store.delete):
        with pytest.raises(FoyaError) as excinfo:
            call(SESSION, "0" * 32)
        assert code_of(excinfo) == (404, "artifact_not_found")


def test_display_name_is_sanitized(store: Artifacts) -> None:
    data = encode(picture(), "PNG")
    cases = {
        "../../etc/pass\x00wd.png": "passwd.png",
        "C:\\Users\\me\\cat.png": "cat.png",
        "evil\u202egnp.exe": "evilgnp.exe",
        "": "image",
        "dir/..": "image",
        "  spaced.png ": "spaced.png",
        "n" * 300: "n" * 255,
    }
    for given, expected in cases.items():
        assert store.add(SESSION, given, data)["name"] == expected


def test_delete_uncommitted(store: Artifacts, tmp_path: Path) -> None:
    ref = store.add(SESSION, "x", encode(picture(), "PNG"))
    store.delete(SESSION, ref["id"])
    with pytest.raises(FoyaError) as excinfo:
        store.read(SESSION, ref["id"])
    assert code_of(excinfo) == (404, "artifact_not_found")
    assert session_files(tmp_path / "artifacts") == []


def test_commit_then_delete_is_refused(store: Artifacts) -> None:
    a = store.add(SESSION, "a", encode(picture(), "PNG"))
    b = store.add(SESSION, "b", encode(picture(), "JPEG"))
    assert store.commit(SESSION, [b["id"], a["id"]]) == [b, a]
    assert store.commit(SESSION, [a["id"]]) == [a]  # idempotent
    assert store.committed(SESSION, a["id"])
    with pytest.raises(FoyaError) as excinfo:
        store.delete(SESSION, a["id"])
    assert code_of(excinfo) == (409, "artifact_committed")
    assert store.read(SESSION, a["id"])[1] == "image/png"
    assert store.ref(SESSION, a["id"]) == a  # the wire ref never shows `committed`


def test_commit_with_an_unknown_id_changes_nothing(store: Artifacts) -> None:
    a = store.add(SESSION, "a", encode(picture(), "PNG"))
    b = store.add(SESSION, "b", encode(picture(), "PNG"))
    with pytest.raises(FoyaError) as excinfo:
        store.commit(SESSION, [a["id"], "f" * 32, b["id"]])
    assert code_of(excinfo) == (404, "artifact_not_found")
    assert not store.committed(SESSION, a["id"])
    assert not store.committed(SESSION, b["id"])
    store.delete(SESSION, a["id"])


def test_copy_for_fork(store: Artifacts, tmp_path: Path) -> None:
    a = store.add(SESSION, "a", encode(picture(), "PNG"))
    b = store.add(SESSION, "b", encode(picture(), "GIF"))
    store.add(SESSION, "c", encode(picture(), "WEBP"))
    store.commit(SESSION, [a["id"]])
    store.copy(SESSION, OTHER, [a["id"], b["id"], "e" * 32])
    # Copies get the fork's own ids (derived, so the store can rename references to them).
    a2, b2 = forked_id(OTHER, a["id"]), forked_id(OTHER, b["id"])
    assert len({a["id"], b["id"], a2, b2}) == 4
    assert store.ref(OTHER, a2) == {**a, "id": a2} and store.committed(OTHER, a2)
    assert store.ref(OTHER, b2) == {**b, "id": b2} and not store.committed(OTHER, b2)
    assert store.read(OTHER, b2) == store.read(SESSION, b["id"])
    with pytest.raises(FoyaError):
        store.ref(OTHER, a["id"])
    assert len(session_files(tmp_path / "artifacts", OTHER)) == 4
    for path in session_files(tmp_path / "artifacts", OTHER):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    store.copy(SESSION, "0" * 24, [])  # nothing to copy: no directory is made
    assert not (tmp_path / "artifacts" / ("0" * 24)).exists()


def test_remove_session(store: Artifacts, tmp_path: Path) -> None:
    ref = store.add(SESSION, "a", encode(picture(), "PNG"))
    store.add(OTHER, "b", encode(picture(), "PNG"))
    store.remove_session(SESSION)
    assert not (tmp_path / "artifacts" / SESSION).exists()
    assert (tmp_path / "artifacts" / OTHER).exists()
    with pytest.raises(FoyaError) as excinfo:
        store.read(SESSION, ref["id"])
    assert excinfo.value.status == 404
    store.remove_session(SESSION)  # already gone: no error
    Artifacts(tmp_path / "never-created").remove_session(SESSION)


def test_tampered_bytes_are_detected(store: Artifacts, tmp_path: Path) -> None:
    ref = store.add(SESSION, "a", encode(picture(), "PNG"))
    stored = tmp_path / "artifacts" / SESSION / f"{ref['id']}.png"
    stored.write_bytes(encode(picture((41, 30)), "PNG"))
    with pytest.raises(ArtifactCorrupt) as excinfo:
        store.read(SESSION, ref["id"])
    assert code_of(excinfo) == (500, "artifact_corrupt")
    stored.unlink()
    with pytest.raises(ArtifactCorrupt):
        store.read(SESSION, ref["id"])


def test_damaged_metadata_is_reported(store: Artifacts, tmp_path: Path) -> None:
    ref = store.add(SESSION, "a", encode(picture(), "PNG"))
    meta = tmp_path / "artifacts" / SESSION / f"{ref['id']}.json"
    for damage in (b"{not json", b"[]", json.dumps({"id": ref["id"]}).encode()):
        meta.write_bytes(damage)
        with pytest.raises(ArtifactCorrupt):
            store.ref(SESSION, ref["id"])
    store.copy(SESSION, OTHER, [ref["id"]])  # a damaged artifact is not carried into a fork
    assert session_files(tmp_path / "artifacts", OTHER) == []


@pytest.mark.parametrize("fmt", ["PNG", "GIF", "WEBP"])
def test_transparency_is_kept(store: Artifacts, fmt: str) -> None:
    im = Image.new("RGBA", (10, 10), (255, 0, 0, 255))
    im.paste((0, 0, 0, 0), (0, 0, 5, 10))
    source = encode(im.convert("P") if fmt == "PNG" else im, fmt, lossless=True)
    stored = opened(store.read(SESSION, store.add(SESSION, "t", source)["id"])[0]).convert("RGBA")
    assert stored.getpixel((1, 1))[3] == 0  # type: ignore[index]
    assert stored.getpixel((8, 1)) == (255, 0, 0, 255)
