"""Canvas videos: generation through a `video` connection's task API, video
uploads streamed to disk, and assets served with byte ranges — in a real `foya serve` with a
HOME of its own, against a fake provider of both of Foya's video protocols on loopback
(tests/support/fake_video_provider.py).

The kernel runs with `FOYA_WEB_FETCH_ALLOW_HOSTS=127.0.0.1`: the fake (on 127.0.0.1) may be
downloaded from, any other private address may not, as for `web_fetch`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from support.desktop_shapes import CANVAS_DOCUMENT, CANVAS_UPLOAD, check
from support.fake_video_provider import (
    API_KEY,
    MINIMAX_SUBMIT,
    SEEDANCE,
    FakeVideoProvider,
    Script,
    mp4,
)
from support.helpers import Launcher, base_env, short_tmpdir, wait_until
from support.streams_helpers import EventStream, Served, assert_error, unix_kernel

BOUND = 20.0  # seconds: upper bound on waits that must end, only to never hang
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeVideoProvider]:
    with FakeVideoProvider.running() as fake:
        yield fake


@dataclass(frozen=True)
class Kernel:
    served: Served
    client: httpx.Client
    connections: dict[str, str]  # protocol -> connection id

    @property
    def data_dir(self) -> Path:
        return self.served.data_dir


def start(launcher: Launcher, root: Path, name: str) -> Served:
    home = root / f"{name}-home"
    home.mkdir(exist_ok=True)
    env = base_env(HOME=str(home), FOYA_WEB_FETCH_ALLOW_HOSTS="127.0.0.1")
    return unix_kernel(launcher, root, name, env=env)


def video_connection(client: httpx.Client, fake: FakeVideoProvider, protocol: str) -> str:
    body = {
        "name": f"videos {protocol}",
        "type": "video",
        "video_protocol": protocol,
        "kind": "openai",
        "auth_kind": "api_key",
        "base_url": f"{fake.base_url}/v1",  # each protocol maps /v1 to its own root
        "api_key": API_KEY,
        "model_settings": {},
        "sort_order": 0,
    }
    response = client.post("/connections", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["video_protocol"] == protocol
    return str(response.json()["id"])


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory, fake: FakeVideoProvider) -> Iterator[Kernel]:
    launcher = Launcher(tmp_path_factory.mktemp("canvas-video"))
    with short_tmpdir() as root:
        try:
            served = start(launcher, root, "v")
            with served.client() as client:
                client.timeout = httpx.Timeout(BOUND)
                ids = {p: video_connection(client, fake, p) for p in ("seedance", "minimax_h3")}
                yield Kernel(served, client, ids)
        finally:
            launcher.close()


# ---------------------------------------------------------------------------------- helpers


def create(client: httpx.Client, title: str) -> dict[str, Any]:
    response = client.post("/canvases", json={"title": title})
    assert response.status_code == 201, response.text
    return dict(response.json())


def patch(client: httpx.Client, doc: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = {"expected_revision": doc["revision"], **fields}
    response = client.patch(f"/canvases/{doc['id']}", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def get(client: httpx.Client, canvas_id: str) -> dict[str, Any]:
    response = client.get(f"/canvases/{canvas_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def upload(
    client: httpx.Client, canvas_id: str, data: bytes, name: str, media_type: str
) -> httpx.Response:
    return client.post(f"/canvases/{canvas_id}/assets", files={"file": (name, data, media_type)})


def node(node_id: str, node_type: str, **fields: Any) -> dict[str, Any]:
    return {"id": node_id, "type": node_type, "x": 0, "y": 0, "width": 200, "height": 120, **fields}


def by_id(doc: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in doc["nodes"] if n["id"] == node_id)


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 24), (10, 200, 90)).save(out, "PNG")
    return out.getvalue()


def video_canvas(
    client: httpx.Client, model: str, *, reference: bool = False, **spec: Any
) -> dict[str, Any]:
    """A prompt node (and, if asked, an image node) wired into a video generation node, and a
    video output node."""
    doc = create(client, "video generation")
    nodes = [
        node("prompt", "text", text="a fox runs through snow"),
        node(
            "gen",
            "generation",
            prompt="slow pan",
            generation={"mode": "video", "model": model, **spec},
        ),
        node("out", "video"),
    ]
    edges = [
        {"id": "e1", "from_node_id": "prompt", "to_node_id": "gen", "kind": "reference"},
        {"id": "e2", "from_node_id": "gen", "to_node_id": "out", "kind": "output"},
    ]
    if reference:
        response = upload(client, doc["id"], png(), "first.png", "image/png")
        assert response.status_code == 201, response.text
        doc = response.json()["canvas"]
        asset_id = response.json()["asset"]["id"]
        nodes.append(node("ref", "image", asset_id=asset_id))
        edges.append({"id": "e3", "from_node_id": "ref", "to_node_id": "gen", "kind": "reference"})
    return patch(client, doc, nodes=nodes, edges=edges)


def generate(client: httpx.Client, doc: dict[str, Any], **extra: Any) -> httpx.Response:
    body = {"expected_revision": doc["revision"], "config_node_id": "gen", "output_node_id": "out"}
    return client.post(f"/canvases/{doc['id']}/generate-video", json={**body, **extra})


@contextlib.contextmanager
def events(served: Served, canvas_id: str) -> Iterator[EventStream]:
    with (
        served.client() as client,
        client.stream("GET", f"/canvases/{canvas_id}/events", timeout=BOUND) as response,
    ):
        assert response.status_code == 200
        yield EventStream(response)


def states_until_done(stream: EventStream) -> list[tuple[str, str]]:
    """(generation node status, output node status) of each document sent, until both end."""
    seen: list[tuple[str, str]] = []
    while not seen or seen[-1][0] not in ("success", "error"):
        frame = stream.next_frame(deadline=_deadline())
        assert frame is not None, "the stream ended"
        doc = frame.data["payload"]
        assert check(CANVAS_DOCUMENT, doc) == []
        seen.append((by_id(doc, "gen").get("status", ""), by_id(doc, "out").get("status", "")))
    return seen


def _deadline() -> float:
    return time.monotonic() + BOUND


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ------------------------------------------------------------------------------ generation


@pytest.mark.parametrize("protocol", ["seedance", "minimax_h3"])
def test_a_generated_video_is_stored_with_its_progress_on_the_stream(
    kernel: Kernel, fake: FakeVideoProvider, protocol: str
) -> None:
    client = kernel.client
    model = unique(protocol)
    video = mp4(300 * 1024, seed=7)
    fake.script(model, Script(states=("queued", "running", "succeeded"), data=video))
    doc = video_canvas(client, model, reference=True, aspect_ratio="9:16", duration=8)
    with events(kernel.served, doc["id"]) as stream:
        response = generate(client, doc, connection_id=kernel.connections[protocol])
        assert response.status_code == 200, response.text
        seen = states_until_done(stream)
    assert seen == [("queued", "queued"), ("running", "running"), ("success", "success")]

    done = response.json()
    assert done == get(client, doc["id"])
    assert check(CANVAS_DOCUMENT, done) == []  # the desktop's CanvasDocument
    out = by_id(done, "out")
    asset = next(a for a in done["assets"] if a["id"] == out["asset_id"])
    assert asset["kind"] == "video" and asset["media_type"] == "video/mp4"
    assert asset["name"] == "generated.mp4" and "width" not in asset
    assert asset["bytes"] == len(video)
    assert asset["sha256"] == hashlib.sha256(video).hexdigest()
    assert "error" not in out and by_id(done, "gen")["status"] == "success"
    served = client.get(f"/canvases/{doc['id']}/assets/{asset['id']}")
    assert served.status_code == 200 and served.content == video
    assert served.headers["content-type"] == "video/mp4"
    stored = kernel.data_dir / "canvas-assets" / doc["id"] / f"{asset['id']}.mp4"
    assert stored.read_bytes() == video
    assert not list((kernel.data_dir / "canvas-assets" / ".incoming").glob("*"))

    (task,) = fake.tasks(model)
    assert task.protocol == protocol
    body = task.body
    assert body["model"] == model and body["ratio"] == "9:16" and body["duration"] == 8
    text, image = body["content"]
    assert text == {"type": "text", "text": "slow pan\n\na fox runs through snow"}
    assert image["role"] == "reference_image" and image["type"] == "image_url"
    prefix = "data:image/png;base64,"
    assert image["image_url"]["url"].startswith(prefix)
    with Image.open(io.BytesIO(base64.b64decode(image["image_url"]["url"][len(prefix) :]))) as im:
        assert im.size == (32, 24)
    if protocol == "seedance":
        assert (body["resolution"], body["generate_audio"], body["watermark"]) == (
            "720p",
            True,
            False,
        )
        submit, query = SEEDANCE, f"{SEEDANCE}/{task.id}"
    else:
        assert body["resolution"] == "768P" and "generate_audio" not in body
        submit, query = MINIMAX_SUBMIT, f"/v2/query/video_generation/{task.id}"
    assert task.polls == 3  # queued, running, succeeded: each seen once
    for path in (submit, query, f"/files/{task.id}.mp4"):
        requests = fake.served(path)
        assert requests, path
        assert {r.authorization for r in requests} == {f"Bearer {API_KEY}"}  # own origin


def test_the_video_default_serves_a_bare_generation_node(
    kernel: Kernel, fake: FakeVideoProvider
) -> None:
    client = kernel.client
    model = unique("default")
    fake.script(model, Script())
    cid = kernel.connections["seedance"]
    response = client.put(
        "/settings/default-models", json={"video": {"connection_id": cid, "model": model}}
    )
    assert response.status_code == 200, response.text
    doc = video_canvas(client, "")
    response = generate(client, doc)
    assert response.status_code == 200, response.text
    assert by_id(response.json(), "out")["status"] == "success"
    assert [t.body["duration"] for t in fake.tasks(model)] == [5]  # Foya's default
    assert fake.tasks(model)[0].body["ratio"] == "16:9"


@pytest.mark.parametrize("protocol", ["seedance", "minimax_h3"])
def test_a_failed_task_marks_both_nodes_error(
    kernel: Kernel, fake: FakeVideoProvider, protocol: str
) -> None:
    client = kernel.client
    model = unique("fails")
    fake.script(model, Script(states=("running", "failed"), reason="prompt rejected by policy"))
    doc = video_canvas(client, model)
    with events(kernel.served, doc["id"]) as stream:
        response = generate(client, doc, connection_id=kernel.connections[protocol])
        body = assert_error(response, 502, "generation_provider_failed")
        seen = states_until_done(stream)
    assert "prompt rejected by policy" in body["message"]
    assert seen == [("queued", "queued"), ("running", "running"), ("error", "error")]
    after = get(client, doc["id"])
    for node_id in ("gen", "out"):
        assert by_id(after, node_id)["error"] == body["message"]
    assert after["assets"] == doc["assets"] and "asset_id" not in by_id(after, "out")


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.2:9/files/secret.mp4",  # loopback, but not the allowed 127.0.0.1
        "http://10.255.0.1/files/secret.mp4",
        "http://[::1]:9/files/secret.mp4",
        "{base}/redirect?to=http://169.254.169.254/latest/meta-data",  # allowed hop, then not
    ],
)
def test_a_result_url_at_a_private_address_is_refused(
    kernel: Kernel, fake: FakeVideoProvider, location: str
) -> None:
    client = kernel.client
    model = unique("private")
    fake.script(model, Script(video_url=location))
    doc = video_canvas(client, model)
    body = assert_error(
        generate(client, doc, connection_id=kernel.connections["seedance"]),
        502,
        "generation_provider_failed",
    )
    assert "could not be downloaded" in body["message"]
    assert "private or reserved address" in body["message"], body
    after = get(client, doc["id"])
    assert by_id(after, "out")["status"] == "error" and after["assets"] == []
    assert not list((kernel.data_dir / "canvas-assets" / ".incoming").glob("*"))


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (None, "the video provider at 127.0.0.1:{port} answered HTTP 400: unknown model"),
        (Script(states=("dancing",)), "answered an unknown status 'dancing'"),
    ],
)
def test_provider_errors_name_the_provider_and_never_the_key(
    kernel: Kernel, fake: FakeVideoProvider, script: Script | None, expected: str
) -> None:
    client = kernel.client
    model = unique("errors")
    if script is not None:
        fake.script(model, script)
    doc = video_canvas(client, model)
    body = assert_error(
        generate(client, doc, connection_id=kernel.connections["seedance"]),
        502,
        "generation_provider_failed",
    )
    port = fake.base_url.rsplit(":", 1)[1]
    assert expected.format(port=port) in body["message"], body
    assert API_KEY not in body["message"]
    assert by_id(get(client, doc["id"]), "gen")["error"] == body["message"]


@pytest.mark.parametrize("redirected", [False, True])
def test_the_key_goes_to_the_provider_s_origin_only(
    kernel: Kernel, fake: FakeVideoProvider, redirected: bool
) -> None:
    """A video on another host (another port is another origin) is fetched without the key,
    also when the provider's own URL redirects there."""
    client = kernel.client
    model = unique("cdn")
    video = mp4(50_000, seed=5)
    with FakeVideoProvider.running() as cdn:
        elsewhere = cdn.put_file(f"{model}.mp4", video)
        location = f"{{base}}/redirect?to={elsewhere}" if redirected else elsewhere
        fake.script(model, Script(video_url=location))
        doc = video_canvas(client, model)
        response = generate(client, doc, connection_id=kernel.connections["seedance"])
        assert response.status_code == 200, response.text
        (fetched,) = cdn.served(f"/files/{model}.mp4")
    assert fetched.authorization is None
    if redirected:
        assert {r.authorization for r in fake.served("/redirect")} >= {f"Bearer {API_KEY}"}
    asset = response.json()["assets"][-1]
    assert asset["sha256"] == hashlib.sha256(video).hexdigest()


def test_a_result_that_is_not_a_video_fails_the_generation(
    kernel: Kernel, fake: FakeVideoProvider
) -> None:
    client = kernel.client
    model = unique("html")
    fake.script(model, Script(data=b"<html><body>not a video</body></html>" * 10))
    doc = video_canvas(client, model)
    body = assert_error(
        generate(client, doc, connection_id=kernel.connections["minimax_h3"]),
        502,
        "generation_provider_failed",
    )
    assert "MP4, QuickTime or WebM" in body["message"]
    assert get(client, doc["id"])["assets"] == []


def test_generation_requests_are_checked_first(kernel: Kernel, fake: FakeVideoProvider) -> None:
    client = kernel.client
    model = unique("checked")
    fake.script(model, Script())
    doc = video_canvas(client, model)
    # A request naming the wrong nodes changes nothing.
    response = client.post(
        f"/canvases/{doc['id']}/generate-video",
        json={
            "expected_revision": doc["revision"],
            "config_node_id": "prompt",
            "output_node_id": "out",
        },
    )
    assert_error(response, 400, "canvas_failed")
    stale = {**doc, "revision": doc["revision"] - 1}
    assert generate(client, stale).status_code == 409
    assert get(client, doc["id"]) == doc
    # A connection that cannot make videos fails both nodes.
    image = client.post(
        "/connections",
        json={"name": "img", "type": "image", "base_url": fake.base_url, "api_key": API_KEY},
    )
    assert image.status_code == 201, image.text
    body = assert_error(
        generate(client, doc, connection_id=image.json()["id"]), 400, "canvas_failed"
    )
    assert body["message"] == "video generation requires a video connection"
    after = get(client, doc["id"])
    assert by_id(after, "out")["status"] == by_id(after, "gen")["status"] == "error"
    assert fake.tasks(model) == []
    assert_error(generate(client, {**doc, "id": "0" * 32}), 404, "canvas_not_found")


def test_a_job_cut_short_by_a_kill_is_an_error_after_restart(
    tmp_path: Path, fake: FakeVideoProvider
) -> None:
    model = unique("endless")
    fake.script(model, Script(states=("queued",)))  # never done
    launcher = Launcher(tmp_path / "procs")
    with short_tmpdir() as root:
        try:
            served = start(launcher, root, "r")
            with served.client() as client:
                cid = video_connection(client, fake, "seedance")
                doc = video_canvas(client, model)
                with served.client() as other:
                    other.timeout = httpx.Timeout(0.5)
                    with contextlib.suppress(httpx.TimeoutException):
                        generate(other, doc, connection_id=cid)
                wait_until(lambda: bool(fake.tasks(model)), "the submitted task", BOUND)
                queued = get(client, doc["id"])
                assert by_id(queued, "out")["status"] == "queued"
            served.kernel.proc.kill()  # by PID, mid-job
            served.kernel.proc.wait(BOUND)
            again = start(launcher, root, "r")  # same data directory
            with again.client() as client:
                after = get(client, doc["id"])
        finally:
            launcher.close()
    assert after["revision"] == queued["revision"] + 1
    for node_id in ("gen", "out"):
        assert by_id(after, node_id)["status"] == "error"
        assert "interrupted" in by_id(after, node_id)["error"]


# ---------------------------------------------------------------------------------- uploads


def peak_rss(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_video_upload_is_streamed_to_disk(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A 24 MiB video passes every image limit and is not held in memory: the kernel's peak
    resident memory grows by far less than the upload (a fresh kernel, so earlier tests'
    peaks do not hide it)."""
    video = mp4(24 * MIB, seed=3)
    launcher = Launcher(tmp_path_factory.mktemp("canvas-upload"))
    with short_tmpdir() as root:
        try:
            served = start(launcher, root, "u")
            with served.client() as client:
                client.timeout = httpx.Timeout(BOUND * 3)
                doc = create(client, "uploads")
                assert upload(client, doc["id"], png(), "warm.png", "image/png").status_code == 201
                before = peak_rss(served.kernel.pid)
                response = upload(
                    client, doc["id"], video, "holiday.mp4", "application/octet-stream"
                )
                after = peak_rss(served.kernel.pid)
                assert response.status_code == 201, response.text[:300]
                asset = response.json()["asset"]
                assert (asset["kind"], asset["media_type"], asset["name"]) == (
                    "video",
                    "video/mp4",
                    "holiday.mp4",
                )
                assert asset["bytes"] == len(video)
                assert asset["sha256"] == hashlib.sha256(video).hexdigest()
                assert response.json()["canvas"]["assets"][-1] == asset
                assert check(CANVAS_UPLOAD, response.json()) == []
                assert after - before < 8 * MIB, (before, after)
                served_back = client.get(f"/canvases/{doc['id']}/assets/{asset['id']}")
                assert served_back.content == video
        finally:
            launcher.close()


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + b"\x00" * 4096, "still.mp4"),
        (b"RIFF\x00\x00\x00\x00AVI LIST" + b"\x00" * 4096, "clip.avi"),
        (b"\x1a\x45\xdf\xa3\x42\x82\x88matroska" + b"\x00" * 4096, "clip.webm"),
        (b"just some text, not a video " * 200, "notes.mov"),
    ],
)
def test_what_is_not_a_video_or_an_image_is_refused(kernel: Kernel, data: bytes, name: str) -> None:
    client = kernel.client
    doc = create(client, "refusals")
    response = upload(client, doc["id"], data, name, "video/mp4")
    assert_error(response, 415, "unsupported_canvas_media")
    assert get(client, doc["id"]) == doc


def test_webm_and_quicktime_are_videos(kernel: Kernel) -> None:
    client = kernel.client
    doc = create(client, "containers")
    webm = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\x82\x84webm\x42\x87\x81\x04" + b"\x01" * 5000
    mov = b"\x00\x00\x00\x14ftypqt  \x00\x00\x02\x00qt  " + b"\x02" * 5000
    for data, media_type, extension in (
        (webm, "video/webm", "webm"),
        (mov, "video/quicktime", "mov"),
    ):
        response = upload(client, doc["id"], data, f"clip.{extension}", "video/mp4")
        assert response.status_code == 201, response.text
        asset = response.json()["asset"]
        assert (asset["kind"], asset["media_type"]) == ("video", media_type)
        path = kernel.data_dir / "canvas-assets" / doc["id"] / f"{asset['id']}.{extension}"
        assert path.read_bytes() == data


def test_an_upload_declared_over_the_video_limit_is_refused_unread(kernel: Kernel) -> None:
    doc = create(kernel.client, "too large")
    assert kernel.served.kernel.uds is not None
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(BOUND)
        sock.connect(str(kernel.served.kernel.uds))
        head = (
            f"POST /canvases/{doc['id']}/assets HTTP/1.1\r\nHost: foya\r\n"
            "Content-Type: multipart/form-data; boundary=xyz\r\n"
            f"Content-Length: {501 * MIB + MIB}\r\n\r\n"
        )
        sock.sendall(head.encode() + b"--xyz\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 413 " in status_line, answer[:300]
    assert b"canvas_asset_too_large" in rest and b"connection: close" in rest.lower()
    assert get(kernel.client, doc["id"]) == doc


# ----------------------------------------------------------------------------------- ranges


def test_assets_are_served_with_byte_ranges(kernel: Kernel) -> None:
    client = kernel.client
    doc = create(client, "ranges")
    video = mp4(200_000, seed=11)
    asset = upload(client, doc["id"], video, "seek.mp4", "video/mp4").json()["asset"]
    url = f"/canvases/{doc['id']}/assets/{asset['id']}"
    size = len(video)

    whole = client.get(url)
    assert whole.status_code == 200 and whole.content == video
    assert whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["content-length"] == str(size)
    etag = whole.headers["etag"]
    assert etag == f'"{asset["sha256"]}"'

    for header, start, stop in (
        ("bytes=100-199", 100, 200),
        ("bytes=150000-", 150000, size),
        ("bytes=-10", size - 10, size),
        (f"bytes=0-{size * 2}", 0, size),  # an end past the body is cut to it
    ):
        part = client.get(url, headers={"Range": header})
        assert part.status_code == 206, (header, part.status_code)
        assert part.content == video[start:stop], header
        assert part.headers["content-range"] == f"bytes {start}-{stop - 1}/{size}"
        assert part.headers["content-length"] == str(stop - start)
        assert part.headers["etag"] == etag and part.headers["accept-ranges"] == "bytes"

    for header in (f"bytes={size}-", f"bytes={size + 5}-{size + 9}", "bytes=-0"):
        refused = client.get(url, headers={"Range": header})
        assert_error(refused, 416, "range_not_satisfiable")
        assert refused.headers["content-range"] == f"bytes */{size}"

    # Not understood, several ranges, or an If-Range for another copy: the whole body.
    for headers in (
        {"Range": "items=0-5"},
        {"Range": "bytes=0-1,5-6"},
        {"Range": "bytes=9-2"},
        {"Range": "bytes=0-9", "If-Range": '"another"'},
    ):
        full = client.get(url, headers=headers)
        assert (full.status_code, full.content) == (200, video), headers
    matching = client.get(url, headers={"Range": "bytes=0-9", "If-Range": etag})
    assert (matching.status_code, matching.content) == (206, video[:10])

    cached = client.get(url, headers={"If-None-Match": etag, "Range": "bytes=0-9"})
    assert (cached.status_code, cached.content) == (304, b"")

    # Images are ranged the same way.
    image = upload(client, doc["id"], png(), "still.png", "image/png").json()["asset"]
    image_url = f"/canvases/{doc['id']}/assets/{image['id']}"
    full_image = client.get(image_url).content
    part = client.get(image_url, headers={"Range": "bytes=0-7"})
    assert (part.status_code, part.content) == (206, full_image[:8])
    assert part.content == b"\x89PNG\r\n\x1a\n"
