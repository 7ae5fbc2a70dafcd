"""Bounded memory for every archive and image, in a real `foya serve`.

Each measurement starts a fresh kernel (so no earlier test's peak hides a new one), warms the
code path with a small refused request, reads the kernel's peak resident memory (VmHWM in
/proc/<pid>/status), sends the hostile input, and reads the peak again. The hostile inputs are
generated here: ZIP bombs (many small members of zeros, one member that inflates to 1 GiB, a
large plain upload) and a 186-byte animated WebP of three 5700x5700 frames.
"""

from __future__ import annotations

import io
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from support.chatbuddy_fixtures import sample_payload, v2_zip
from support.helpers import Launcher, base_env, short_tmpdir
from support.streams_helpers import Served, assert_error, new_session, unix_kernel

MIB = 1024 * 1024
TIMEOUT = httpx.Timeout(120.0)  # only so that nothing hangs: no timing is asserted


# --------------------------------------------------------------- hostile archive generator


def zeros_zip(members: int, size: int) -> bytes:
    """A ZIP of `members` members of `size` zero bytes each, deflated, written in 1 MiB pieces
    (the generator itself never holds a member whole)."""
    out = io.BytesIO()
    piece = bytes(min(size, MIB))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for number in range(members):
            with archive.open(f"zeros/{number:04}.bin", "w", force_zip64=True) as member:
                left = size
                while left:
                    member.write(piece[:left])
                    left -= min(left, len(piece))
    return out.getvalue()


def stored_zip(size: int) -> bytes:
    """A ZIP whose one member is `size` zero bytes, stored (no compression: no bomb, just big)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("big.bin", bytes(size))
    return out.getvalue()


def webp_bomb() -> bytes:
    """Three 5700x5700 frames, lossless and uniform: under 1 KiB on disk, ~390 MB decoded."""
    frames = [Image.new("L", (5700, 5700), shade) for shade in (0, 120, 240)]
    out = io.BytesIO()
    frames[0].save(out, "WEBP", save_all=True, append_images=frames[1:], lossless=True, method=0)
    return out.getvalue()


def png(size: tuple[int, int] = (64, 48)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(out, "PNG")
    return out.getvalue()


# ------------------------------------------------------------------------------ the kernel


def peak_rss(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A kernel of its own (data directory and HOME), for one measurement."""
    launcher = Launcher(tmp_path_factory.mktemp("memory"))
    with short_tmpdir() as root:
        try:
            home = root / "home"
            home.mkdir()
            yield unix_kernel(launcher, root, "m", env=base_env(HOME=str(home)))
        finally:
            launcher.close()


def client_of(served: Served) -> httpx.Client:
    client = served.client()
    client.timeout = TIMEOUT
    return client


def import_archive(client: httpx.Client, data: bytes, source: str = "foya") -> httpx.Response:
    # A file object, not bytes: httpx sends it in 64 KiB pieces, where one bytes value is
    # re-sliced after every partial socket write (quadratic: minutes of CPU for 96 MiB).
    files = {"file": ("archive.zip", io.BytesIO(data), "application/zip")}
    return client.post("/imports", files=files, data={"source": source})


def warm_imports(client: httpx.Client) -> None:
    """Load the import code (zipfile, parsers, JSON) with a small refused archive."""
    small = zeros_zip(1, 10)
    assert_error(import_archive(client, small), 400, "invalid_import")


def measured(served: Served, send: Any) -> tuple[httpx.Response, int]:
    """`send()`'s response and how much the kernel's peak resident memory grew meanwhile."""
    pid = served.kernel.pid
    before = peak_rss(pid)
    response = send()
    return response, peak_rss(pid) - before


# ----------------------------------------------------------------------------- ZIP bombs


def test_a_bomb_of_many_small_members_is_refused_with_little_memory(fresh: Served) -> None:
    """400 members of 1 MiB of zeros (~0.4 MB on disk, 400 MiB inflated): each passes the
    per-member ratio allowance, together they pass the archive's; refused at the first chunk
    over it, streamed to disk, so the kernel's peak grows far less than the bomb."""
    bomb = zeros_zip(400, MIB)
    assert len(bomb) < MIB
    with client_of(fresh) as client:
        warm_imports(client)
        response, growth = measured(fresh, lambda: import_archive(client, bomb))
        body = assert_error(response, 413, "import_too_large")
        assert "inflate" in body["message"]
        assert growth < 50 * MIB, growth
        assert client.get("/sessions").json() == []


def test_one_member_inflating_to_a_gibibyte_is_refused_with_little_memory(
    fresh: Served,
) -> None:
    bomb = zeros_zip(1, 1024 * MIB)
    assert len(bomb) < 2 * MIB
    with client_of(fresh) as client:
        warm_imports(client)
        for source in ("foya", "chatbuddy"):
            response, growth = measured(fresh, lambda s=source: import_archive(client, bomb, s))
            assert_error(response, 413, "import_too_large")
            assert growth < 50 * MIB, (source, growth)
        assert client.get("/sessions").json() == []


def test_a_large_upload_is_streamed_to_disk(fresh: Served) -> None:
    """A 96 MiB archive (no bomb: one stored member) is neither held in memory by the upload
    nor by the reader: refused as no Foya export, with the peak grown far less than its size."""
    big = stored_zip(96 * MIB)
    with client_of(fresh) as client:
        warm_imports(client)
        response, growth = measured(fresh, lambda: import_archive(client, big))
        assert_error(response, 400, "invalid_import")
        assert growth < 50 * MIB, growth
    scratch = [p for p in fresh.data_dir.rglob("*") if p.is_file() and p.stat().st_size > MIB]
    assert not [p for p in scratch if "foya-zip-" in str(p) or p.name == "upload"], scratch


def test_an_archive_still_imports_with_its_fields_after_the_file(fresh: Served) -> None:
    """The streamed upload reads the form's text fields wherever they are: here after the
    file, which a client may send first."""
    boundary = uuid.uuid4().hex
    archive = v2_zip(sample_payload())
    body = b"".join(
        [
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="backup.zip"\r\nContent-Type: application/zip\r\n\r\n'.encode(),
            archive,
            f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="source"\r\n\r\n'
            f"chatbuddy\r\n--{boundary}--\r\n".encode(),
        ]
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    with client_of(fresh) as client:
        response = client.post("/imports", content=body, headers=headers)
        assert response.status_code == 200, response.text
        summary = response.json()
        assert summary["source"] == "chatbuddy"
        assert summary["sessions_created"] == len(client.get("/sessions").json()) > 0


# ---------------------------------------------------------------------- image bombs


def test_an_animated_webp_bomb_is_refused_as_an_artifact_before_decoding(fresh: Served) -> None:
    bomb = webp_bomb()
    assert len(bomb) < 1024
    with client_of(fresh) as client:
        sid = new_session(client)["id"]
        path = f"/sessions/{sid}/artifacts"

        def send(data: bytes, name: str) -> httpx.Response:
            return client.post(path, files={"file": (name, data, "image/webp")})

        assert send(png(), "warm.png").status_code == 201  # Pillow loaded: a clean baseline
        response, growth = measured(fresh, lambda: send(bomb, "bomb.webp"))
        body = assert_error(response, 413, "image_too_large")
        assert "5700x5700" in body["message"]
        assert growth < 100 * MIB, growth
        ok = send(png((320, 200)), "normal.png")
        assert ok.status_code == 201, ok.text
        assert (ok.json()["attachment"]["width"], ok.json()["attachment"]["height"]) == (320, 200)


def test_an_animated_webp_bomb_is_refused_as_a_canvas_asset_before_decoding(
    fresh: Served,
) -> None:
    bomb = webp_bomb()
    with client_of(fresh) as client:
        created = client.post("/canvases", json={"title": "bombs"})
        assert created.status_code == 201, created.text
        path = f"/canvases/{created.json()['id']}/assets"

        def send(data: bytes, name: str) -> httpx.Response:
            return client.post(path, files={"file": (name, data, "image/webp")})

        assert send(png(), "warm.png").status_code == 201
        response, growth = measured(fresh, lambda: send(bomb, "bomb.webp"))
        body = assert_error(response, 413, "canvas_asset_too_large")  # the canvas's own code
        assert "5700x5700" in body["message"]
        assert growth < 100 * MIB, growth
        ok = send(png((320, 200)), "normal.png")
        assert ok.status_code == 201, ok.text
        assert ok.json()["asset"]["media_type"] == "image/png"
