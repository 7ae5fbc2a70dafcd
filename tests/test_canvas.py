"""Canvases (app.kernel.canvas, app.http.routes.canvas): documents, revision conflicts, the
canvas event stream, assets and image generation, in a real `foya serve` with a HOME of its own
and an image connection to the fake provider's images API (tests/support/fake_provider.py).

Images are real PNGs made with Pillow. Generation is held at the fake (a gate) to look at the
`running` state, to show that other requests are answered meanwhile, and to kill the kernel
mid-generation.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from prometheus_client.parser import text_string_to_metric_families
from support.fake_provider import API_KEY, FakeProvider, http_error, image, wait
from support.helpers import Launcher, base_env, short_tmpdir, wait_until
from support.streams_helpers import (
    SSE_HEADERS,
    EventStream,
    Frame,
    Served,
    assert_error,
    unix_kernel,
)

BOUND = 20.0  # seconds: upper bound on waits that must end, only to never hang
ENVELOPE = {"seq", "kind", "session", "time", "payload"}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as fake:
        yield fake


@dataclass(frozen=True)
class Kernel:
    """A real kernel (Unix socket, HOME of its own) with an image connection to the fake, which
    is also the `image` default (model `img-default`)."""

    served: Served
    client: httpx.Client
    connection_id: str

    @property
    def data_dir(self) -> Path:
        return self.served.data_dir


def start(launcher: Launcher, root: Path, name: str = "c") -> Served:
    home = root / f"{name}-home"
    home.mkdir(exist_ok=True)
    # The fake's linked images are on 127.0.0.1, behind web_fetch's guard (test_guarded_fetch).
    env = base_env(HOME=str(home), FOYA_WEB_FETCH_ALLOW_HOSTS="127.0.0.1")
    return unix_kernel(launcher, root, name, env=env)


def image_connection(client: httpx.Client, fake: FakeProvider) -> str:
    body = {
        "name": "images",
        "type": "image",
        "base_url": fake.base_url,
        "api_key": API_KEY,
        "models": ["img-default"],
    }
    response = client.post("/connections", json=body)
    assert response.status_code == 201, response.text
    cid = str(response.json()["id"])
    defaults = {"image": {"connection_id": cid, "model": "img-default"}}
    response = client.put("/settings/default-models", json=defaults)
    assert response.status_code == 200, response.text
    return cid


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory, fake: FakeProvider) -> Iterator[Kernel]:
    launcher = Launcher(tmp_path_factory.mktemp("canvas"))
    with short_tmpdir() as root:
        try:
            served = start(launcher, root)
            with served.client() as client:
                client.timeout = httpx.Timeout(BOUND)
                yield Kernel(served, client, image_connection(client, fake))
        finally:
            launcher.close()


# ---------------------------------------------------------------------------------- helpers


def png(width: int = 64, height: int = 48, colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def size_of(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as im:
        assert im.format == "PNG"
        return im.size


def create(client: httpx.Client, **fields: Any) -> dict[str, Any]:
    response = client.post("/canvases", json=fields)
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
    client: httpx.Client, canvas_id: str, data: bytes, name: str = "photo.png"
) -> httpx.Response:
    files = {"file": (name, data, "image/png")}
    return client.post(f"/canvases/{canvas_id}/assets", files=files)


def node(node_id: str, node_type: str, **fields: Any) -> dict[str, Any]:
    return {"id": node_id, "type": node_type, "x": 0, "y": 0, "width": 200, "height": 120, **fields}


def by_id(doc: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in doc["nodes"] if n["id"] == node_id)


def generation_canvas(client: httpx.Client, model: str, **spec: Any) -> dict[str, Any]:
    """A canvas with a prompt node wired into an image generation node, and an output node."""
    doc = create(client, title="generation")
    nodes = [
        node("prompt", "text", text="a red fox in snow"),
        node(
            "gen",
            "generation",
            prompt="watercolour",
            generation={"mode": "image", "model": model, **spec},
        ),
        node("out", "image"),
    ]
    edges = [
        {"id": "e1", "from_node_id": "prompt", "to_node_id": "gen", "kind": "reference"},
        {"id": "e2", "from_node_id": "gen", "to_node_id": "out", "kind": "output"},
    ]
    return patch(client, doc, nodes=nodes, edges=edges)


def generate(client: httpx.Client, doc: dict[str, Any], **extra: Any) -> httpx.Response:
    body = {"expected_revision": doc["revision"], "config_node_id": "gen", "output_node_id": "out"}
    return client.post(f"/canvases/{doc['id']}/generate-image", json={**body, **extra})


@contextlib.contextmanager
def events(
    client: httpx.Client,
    canvas_id: str,
    *,
    after: int | None = None,
    last_event_id: int | None = None,
) -> Iterator[EventStream]:
    """The canvas's SSE stream, subscribed (head received) when this returns."""
    params = {"after": after} if after is not None else {}
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    with client.stream(
        "GET", f"/canvases/{canvas_id}/events", params=params, headers=headers
    ) as response:
        assert response.status_code == 200, response.read()
        for name, value in SSE_HEADERS.items():
            assert response.headers[name] == value
        yield EventStream(response)


def next_frame(stream: EventStream) -> Frame:
    frame = stream.next_frame(deadline=_deadline())
    assert frame is not None, "the stream ended"
    return frame


def frames_until(stream: EventStream, stop: Callable[[Frame], bool]) -> list[Frame]:
    out = [next_frame(stream)]
    while not stop(out[-1]):
        out.append(next_frame(stream))
    return out


def _deadline() -> float:
    return time.monotonic() + BOUND


def counter(client: httpx.Client, name: str, **labels: str) -> float:
    """A labelled sample of /metrics (0 when not exposed yet)."""
    response = client.get("/metrics")
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def raw_get(served: Served, path: str) -> tuple[int, bytes]:
    """(status, body) of a GET sent byte for byte: httpx would resolve `..` segments itself."""
    assert served.kernel.uds is not None
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(BOUND)
        sock.connect(str(served.kernel.uds))
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: foya\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


class Background:
    """A request made from another thread (with its own client), so the test can watch."""

    def __init__(self, served: Served, call: Callable[[httpx.Client], httpx.Response]) -> None:
        self.response: httpx.Response | None = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                with served.client() as client:
                    client.timeout = httpx.Timeout(BOUND * 2)
                    self.response = call(client)
            except BaseException as exc:  # reported by result()
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def result(self) -> httpx.Response:
        self.thread.join(BOUND * 3)
        assert not self.thread.is_alive(), "the request did not end"
        assert self.error is None, repr(self.error)
        assert self.response is not None
        return self.response


# ------------------------------------------------------------------------------------- CRUD


def test_canvas_crud_as_foya_shapes_it(kernel: Kernel) -> None:
    client = kernel.client
    response = client.post("/canvases")  # an empty body is allowed
    assert response.status_code == 201, response.text
    blank = response.json()
    assert blank["title"] == "Untitled canvas"
    assert blank["revision"] == 1
    assert (blank["nodes"], blank["edges"], blank["assets"]) == ([], [], [])
    assert blank["viewport"] == {"x": 160, "y": 120, "zoom": 1}
    assert blank["background"] == "dots"
    assert "session_id" not in blank and "project_id" not in blank
    assert len(blank["id"]) == 32 and blank["created_at"] == blank["updated_at"]

    doc = create(client, title="  Moodboard  ")
    assert doc["title"] == "Moodboard"
    assert get(client, doc["id"]) == doc

    nodes = [node("a", "text", text="hello", title="", rotation=0), node("b", "image")]
    edges = [{"id": "e", "from_node_id": "a", "to_node_id": "b"}]
    changed = patch(
        client,
        doc,
        title="Renamed",
        nodes=nodes,
        edges=edges,
        viewport={"x": 1, "y": 2, "zoom": 2},
        background="grid",
    )
    assert changed["revision"] == 2
    assert changed["title"] == "Renamed"
    # Foya leaves empty fields out: `title: ""` and `rotation: 0` are not sent back.
    assert changed["nodes"][0] == {
        "id": "a",
        "type": "text",
        "text": "hello",
        "x": 0,
        "y": 0,
        "width": 200,
        "height": 120,
        "z_index": 0,
    }
    assert changed["edges"] == edges
    assert (changed["viewport"], changed["background"]) == ({"x": 1, "y": 2, "zoom": 2}, "grid")
    assert get(client, doc["id"]) == changed

    listed = client.get("/canvases").json()
    ids = [d["id"] for d in listed]
    assert ids.index(doc["id"]) < ids.index(blank["id"])  # last changed first

    stored = json.loads((kernel.data_dir / "canvases.json").read_bytes())
    assert [d for d in stored if d["id"] == doc["id"]] == [changed]
    assert stat.S_IMODE((kernel.data_dir / "canvases.json").stat().st_mode) == 0o600

    response = client.delete(f"/canvases/{doc['id']}")
    assert response.status_code == 204
    assert_error(client.get(f"/canvases/{doc['id']}"), 404, "canvas_not_found")
    assert_error(client.delete(f"/canvases/{doc['id']}"), 404, "canvas_not_found")
    stored = json.loads((kernel.data_dir / "canvases.json").read_bytes())
    assert doc["id"] not in [d["id"] for d in stored]


def test_a_session_canvas_is_listed_by_session(kernel: Kernel) -> None:
    client = kernel.client
    session = client.post("/sessions", json={}).json()
    doc = create(client, session_id=session["id"], title="for the session")
    other = create(client, title="elsewhere")
    assert doc["session_id"] == session["id"]
    listed = client.get("/canvases", params={"session_id": session["id"]}).json()
    assert [d["id"] for d in listed] == [doc["id"]]
    assert other["id"] not in [d["id"] for d in listed]
    response = client.post("/canvases", json={"session_id": "nope"})
    assert_error(response, 404, "canvas_not_found")


@pytest.mark.parametrize(
    ("fields", "status", "code"),
    [
        ({"nodes": [node("a", "sticker")]}, 400, "canvas_failed"),
        ({"nodes": [node("a", "text"), node("a", "text")]}, 400, "canvas_failed"),
        ({"nodes": [node("a", "text", width=3)]}, 400, "canvas_failed"),
        ({"nodes": [node("a", "image", asset_id="0" * 32)]}, 400, "canvas_failed"),
        ({"nodes": [node("a", "text", generation={"mode": "image"})]}, 400, "canvas_failed"),
        ({"edges": [{"id": "e", "from_node_id": "x", "to_node_id": "y"}]}, 400, "canvas_failed"),
        ({"viewport": {"x": 0, "y": 0, "zoom": 20}}, 400, "canvas_failed"),
        ({"background": "plaid"}, 400, "canvas_failed"),
        ({"title": "   "}, 400, "canvas_failed"),
        ({"nodes": [node("a", "text", colour="red")]}, 400, "bad_request"),
        ({"workspace": "x"}, 400, "bad_request"),
    ],
)
def test_bad_changes_are_refused_and_change_nothing(
    kernel: Kernel, fields: dict[str, Any], status: int, code: str
) -> None:
    client = kernel.client
    doc = create(client, title="strict")
    response = client.patch(f"/canvases/{doc['id']}", json={"expected_revision": 1, **fields})
    assert_error(response, status, code)
    assert get(client, doc["id"]) == doc


def test_patch_needs_expected_revision(kernel: Kernel) -> None:
    doc = create(kernel.client)
    body = assert_error(
        kernel.client.patch(f"/canvases/{doc['id']}", json={"title": "x"}), 400, "bad_request"
    )
    assert "expected_revision" in body["message"]
    assert get(kernel.client, doc["id"]) == doc


# ------------------------------------------------------------------------------ conflicts


def edit_after(
    barrier: threading.Barrier, doc: dict[str, Any], title: str
) -> Callable[[httpx.Client], httpx.Response]:
    """A PATCH of `doc`'s title made against its revision once both clients are ready."""

    def call(client: httpx.Client) -> httpx.Response:
        barrier.wait(BOUND)
        body = {"expected_revision": doc["revision"], "title": title}
        return client.patch(f"/canvases/{doc['id']}", json=body)

    return call


def test_concurrent_edits_one_wins_the_other_gets_409_and_the_current_document(
    kernel: Kernel,
) -> None:
    doc = create(kernel.client, title="contested")
    for round_ in range(5):
        barrier = threading.Barrier(2)
        first = Background(kernel.served, edit_after(barrier, doc, f"first {round_}"))
        second = Background(kernel.served, edit_after(barrier, doc, f"second {round_}"))
        won, lost = sorted([first.result(), second.result()], key=lambda r: r.status_code)
        assert (won.status_code, lost.status_code) == (200, 409), (won.text, lost.text)
        current = won.json()
        assert current["revision"] == doc["revision"] + 1
        conflict = lost.json()
        assert conflict.pop("code") == "canvas_revision_conflict"
        assert conflict.pop("message")
        assert conflict == current  # the loser gets the document that won
        assert get(kernel.client, doc["id"]) == current
        doc = current


# ------------------------------------------------------------------------------- the stream


def test_the_stream_sends_each_new_document_and_resumes_from_a_revision(kernel: Kernel) -> None:
    client = kernel.client
    doc = create(client, title="streamed")
    assert_error(client.get("/canvases/nope/events"), 404, "canvas_not_found")
    with events(client, doc["id"]) as stream:  # no cursor: live only, as Foya's
        answers = [doc := patch(client, doc, title=f"v{n}") for n in range(3)]
        frames = [next_frame(stream) for _ in answers]
    for frame, answer in zip(frames, answers, strict=True):
        assert frame.event == "canvas_updated"
        assert frame.id == str(answer["revision"])
        assert set(frame.data) == ENVELOPE
        assert frame.data["seq"] == answer["revision"]
        assert frame.data["session"] == doc["id"]
        assert frame.data["payload"] == answer

    # A client that has revision 2 is sent the current document first, then live ones.
    with events(client, doc["id"], last_event_id=2) as stream:
        first = next_frame(stream)
        assert (first.event, first.data["payload"]) == ("canvas_updated", doc)
        newer = patch(client, doc, title="after the reconnect")
        assert next_frame(stream).data["payload"] == newer
    # Up to date (or claiming a revision the canvas never had): nothing is replayed; the next
    # change comes live.
    with events(client, doc["id"], after=newer["revision"] + 50) as stream:
        newest = patch(client, newer, title="live")
        assert next_frame(stream).data["payload"] == newest
        assert client.delete(f"/canvases/{doc['id']}").status_code == 204
        gone = next_frame(stream)
        assert gone.event == "canvas_deleted"
        assert gone.data["seq"] == newest["revision"] + 1
        assert stream.next_frame(deadline=_deadline()) is None  # the stream ends


# ---------------------------------------------------------------------------------- assets


def test_asset_upload_and_download_round_trip(kernel: Kernel) -> None:
    client = kernel.client
    doc = create(client, title="assets")
    original = png(64, 48)
    response = upload(client, doc["id"], original, "holiday.png")
    assert response.status_code == 201, response.text
    created = response.json()
    asset, canvas = created["asset"], created["canvas"]
    assert set(created) == {"asset", "canvas"}
    assert asset["kind"] == "image" and asset["media_type"] == "image/png"
    assert (asset["width"], asset["height"], asset["name"]) == (64, 48, "holiday.png")
    assert canvas["revision"] == doc["revision"] + 1
    assert canvas["assets"] == [asset]
    assert get(client, doc["id"]) == canvas

    response = client.get(f"/canvases/{doc['id']}/assets/{asset['id']}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.headers["cache-control"] == "private, max-age=31536000, immutable"
    assert response.headers["etag"] == f'"{asset["sha256"]}"'
    assert hashlib.sha256(response.content).hexdigest() == asset["sha256"]
    assert len(response.content) == asset["bytes"]
    assert size_of(response.content) == (64, 48)
    cached = client.get(
        f"/canvases/{doc['id']}/assets/{asset['id']}",
        headers={"If-None-Match": response.headers["etag"]},
    )
    assert (cached.status_code, cached.content) == (304, b"")

    folder = kernel.data_dir / "canvas-assets" / doc["id"]
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / f"{asset['id']}.png").stat().st_mode) == 0o600
    # Nodes may show the canvas's own assets.
    shown = patch(client, canvas, nodes=[node("pic", "image", asset_id=asset["id"])])
    assert by_id(shown, "pic")["asset_id"] == asset["id"]

    assert client.delete(f"/canvases/{doc['id']}").status_code == 204
    assert not folder.exists()


def test_what_is_not_an_image_is_refused_and_changes_nothing(kernel: Kernel) -> None:
    client = kernel.client
    doc = create(client, title="refusals")
    response = upload(client, doc["id"], b"\x89PNG\r\n\x1a\n but not really", "fake.png")
    assert_error(response, 415, "unsupported_canvas_media")
    response = client.post(f"/canvases/{doc['id']}/assets", files={"other": ("a.png", png())})
    assert_error(response, 400, "missing_asset")
    response = client.post(f"/canvases/{doc['id']}/assets", content=png())
    assert_error(response, 400, "bad_request")
    assert_error(upload(client, "0" * 32, png()), 404, "canvas_not_found")
    assert get(client, doc["id"]) == doc
    assert not (kernel.data_dir / "canvas-assets" / doc["id"]).exists() or not any(
        (kernel.data_dir / "canvas-assets" / doc["id"]).iterdir()
    )


def test_uploads_may_pass_the_request_cap_up_to_the_image_limit(kernel: Kernel) -> None:
    client = kernel.client
    doc = create(client, title="large")
    noise = Image.frombytes("RGB", (2100, 1500), os.urandom(2100 * 1500 * 3))
    out = io.BytesIO()
    noise.save(out, "PNG", compress_level=0)
    large = out.getvalue()
    assert 8 * 1024 * 1024 < len(large) < 20 * 1024 * 1024  # beyond the 8 MiB request cap
    response = upload(client, doc["id"], large, "noise.png")
    assert response.status_code == 201, response.text[:300]
    assert (response.json()["asset"]["width"], response.json()["asset"]["height"]) == (2100, 1500)

    too_large = upload(client, doc["id"], b"\0" * (21 * 1024 * 1024), "huge.png")
    assert_error(too_large, 413, "canvas_asset_too_large")
    assert get(client, doc["id"])["revision"] == response.json()["canvas"]["revision"]


@pytest.mark.parametrize(
    "asset_path",
    [
        "../../canvases.json",
        "..%2F..%2Fcanvases.json",
        "%2e%2e",
        "..",
        "0123456789abcdef0123456789abcdef",  # well formed, not this canvas's
        "x" * 300,
    ],
)
def test_path_tricks_in_asset_ids_are_refused(kernel: Kernel, asset_path: str) -> None:
    client = kernel.client
    doc = create(client, title="tricks")
    asset = upload(client, doc["id"], png()).json()["asset"]
    status, body = raw_get(kernel.served, f"/canvases/{doc['id']}/assets/{asset_path}")
    assert status == 404, body
    assert b"revision" not in body  # never the canvases file, never the canvas
    other = create(client, title="another canvas")
    response = client.get(f"/canvases/{other['id']}/assets/{asset['id']}")
    assert_error(response, 404, "canvas_not_found")


def test_path_tricks_in_asset_names_name_no_file(kernel: Kernel) -> None:
    client = kernel.client
    doc = create(client, title="names")
    for name in ("../../../escaped.png", "..\\..\\escaped.png", "/etc/escaped.png"):
        response = upload(client, doc["id"], png(), name)
        assert response.status_code == 201, response.text
        asset = response.json()["asset"]
        assert asset["name"] == "escaped.png"
        assert asset["id"] in {p.stem for p in (kernel.data_dir / "canvas-assets").rglob("*")}
    assert not list(kernel.data_dir.parent.rglob("escaped*"))


# ------------------------------------------------------------------------------ generation


def test_generation_stores_the_image_and_broadcasts_each_state(
    kernel: Kernel, fake: FakeProvider
) -> None:
    client = kernel.client
    model = f"img-{uuid.uuid4().hex[:8]}"
    generated = png(120, 80, (10, 120, 200))
    gate = fake.gate()
    fake.push_image(model, [wait(gate), *image(generated)])
    doc = generation_canvas(client, model, aspect_ratio="16:9", quality="high")
    before = counter(client, "foya_canvas_generations_total", outcome="success")

    with events(client, doc["id"]) as stream:
        started = Background(kernel.served, lambda c: generate(c, doc))
        running = next_frame(stream).data["payload"]
        assert running["revision"] == doc["revision"] + 1
        assert by_id(running, "gen")["status"] == by_id(running, "out")["status"] == "running"
        wait_until(lambda: len(fake.images(model)) == 1, "the images request", BOUND)
        # The generation holds nothing: other requests are answered meanwhile.
        assert get(client, doc["id"]) == running
        assert patch(client, create(client), title="meanwhile")["revision"] == 2
        gate.set()
        done = next_frame(stream).data["payload"]
    response = started.result()
    assert response.status_code == 200, response.text
    assert response.json() == done == get(client, doc["id"])
    assert done["revision"] == running["revision"] + 1
    assert by_id(done, "gen")["status"] == "success"
    out = by_id(done, "out")
    assert out["status"] == "success" and "error" not in out
    [asset] = done["assets"]
    assert out["asset_id"] == asset["id"]
    assert (asset["width"], asset["height"]) == (120, 80)
    assert (out["width"], out["height"]) == (360, 32 + 360 * 80 / 120)
    served = client.get(f"/canvases/{doc['id']}/assets/{asset['id']}")
    assert size_of(served.content) == (120, 80)

    [request] = fake.images(model)
    assert request.path == "/v1/images/generations"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.body["prompt"] == "watercolour\n\na red fox in snow"
    assert (request.body["size"], request.body["quality"], request.body["n"]) == (
        "1536x1024",
        "high",
        1,
    )
    after = counter(client, "foya_canvas_generations_total", outcome="success")
    assert after == before + 1


def test_the_image_default_connection_and_model_serve_a_bare_generation_node(
    kernel: Kernel, fake: FakeProvider
) -> None:
    fake.push_image("img-default", image(png(16, 16)))
    doc = generation_canvas(kernel.client, "")  # no model in the node, no connection_id
    assert "model" not in by_id(doc, "gen")["generation"]
    response = generate(kernel.client, doc)
    assert response.status_code == 200, response.text
    assert by_id(response.json(), "out")["status"] == "success"
    [request] = fake.images("img-default")
    assert request.headers["authorization"] == f"Bearer {API_KEY}"


def test_reference_images_are_edited_and_a_linked_result_is_downloaded(
    kernel: Kernel, fake: FakeProvider
) -> None:
    client = kernel.client
    model = f"img-{uuid.uuid4().hex[:8]}"
    fake.push_image(model, image(png(30, 60), url=True))
    doc = generation_canvas(client, model)
    reference = upload(client, doc["id"], png(40, 40, (0, 255, 0))).json()
    doc = reference["canvas"]
    nodes = [*doc["nodes"], node("ref", "image", asset_id=reference["asset"]["id"])]
    edges = [*doc["edges"], {"id": "e3", "from_node_id": "ref", "to_node_id": "gen"}]
    doc = patch(client, doc, nodes=nodes, edges=edges)

    response = generate(client, doc)
    assert response.status_code == 200, response.text
    done = response.json()
    out = by_id(done, "out")
    generated = next(a for a in done["assets"] if a["id"] == out["asset_id"])
    assert (generated["width"], generated["height"]) == (30, 60)
    [request] = fake.images(model)
    assert request.path == "/v1/images/edits"
    assert request.body["prompt"] == "watercolour\n\na red fox in snow"
    stored = client.get(f"/canvases/{doc['id']}/assets/{reference['asset']['id']}").content
    assert request.body["image"] == [stored]


def test_a_provider_failure_marks_both_nodes_error(kernel: Kernel, fake: FakeProvider) -> None:
    client = kernel.client
    model = f"img-{uuid.uuid4().hex[:8]}"
    fake.push_image(model, http_error(400, "your prompt was rejected by the safety system"))
    doc = generation_canvas(client, model)
    before = counter(client, "foya_canvas_generations_total", outcome="error")
    with events(client, doc["id"]) as stream:
        response = generate(client, doc)
        body = assert_error(response, 502, "generation_provider_failed")
        running, failed = next_frame(stream), next_frame(stream)
    assert by_id(running.data["payload"], "out")["status"] == "running"
    message = body["message"]
    assert f"127.0.0.1:{fake.port}" in message and "HTTP 400" in message
    assert "rejected by the safety system" in message and API_KEY not in message
    current = get(client, doc["id"])
    assert failed.data["payload"] == current
    for node_id in ("gen", "out"):
        assert by_id(current, node_id)["status"] == "error"
        assert by_id(current, node_id)["error"] == message
    assert current["assets"] == []
    assert counter(client, "foya_canvas_generations_total", outcome="error") == before + 1


def test_a_result_that_is_not_an_image_fails_the_generation(
    kernel: Kernel, fake: FakeProvider
) -> None:
    model = f"img-{uuid.uuid4().hex[:8]}"
    fake.push_image(model, image(b"GIF89a but nothing else"))
    doc = generation_canvas(kernel.client, model)
    body = assert_error(generate(kernel.client, doc), 502, "generation_provider_failed")
    assert "cannot be used" in body["message"]
    assert by_id(get(kernel.client, doc["id"]), "out")["status"] == "error"


def test_generation_requests_are_checked_first(kernel: Kernel, fake: FakeProvider) -> None:
    client = kernel.client
    model = f"img-{uuid.uuid4().hex[:8]}"
    doc = generation_canvas(client, model)
    stale = {**doc, "revision": doc["revision"] - 1}
    conflict = assert_error(generate(client, stale), 409, "canvas_revision_conflict")
    assert conflict["revision"] == doc["revision"] and conflict["nodes"] == doc["nodes"]
    response = generate(client, doc, config_node_id="prompt")
    assert_error(response, 400, "canvas_failed")
    response = generate(client, doc, output_node_id="missing")
    assert_error(response, 400, "canvas_failed")
    assert get(client, doc["id"]) == doc  # nothing changed so far

    # A connection that cannot generate images fails both nodes, as Foya does.
    language = client.post("/connections", json={"name": "chat", "base_url": fake.base_url})
    body = assert_error(
        generate(client, doc, connection_id=language.json()["id"]), 400, "canvas_failed"
    )
    assert "image connection" in body["message"]
    failed = get(client, doc["id"])
    assert by_id(failed, "out") == {
        **by_id(doc, "out"),
        "status": "error",
        "error": body["message"],
    }
    assert fake.images(model) == []
    assert_error(generate(client, {**doc, "id": "0" * 32}), 404, "canvas_not_found")


def test_generate_video_checks_its_nodes(kernel: Kernel) -> None:
    # Video generation itself is tested in tests/test_canvas_video.py.
    doc = create(kernel.client, title="video")
    body = {"expected_revision": 1, "config_node_id": "gen", "output_node_id": "out"}
    response = kernel.client.post(f"/canvases/{doc['id']}/generate-video", json=body)
    assert_error(response, 400, "canvas_failed")
    response = kernel.client.post(f"/canvases/{'0' * 32}/generate-video", json=body)
    assert_error(response, 404, "canvas_not_found")
    assert get(kernel.client, doc["id"]) == doc


def test_deleting_the_canvas_stops_its_generation(kernel: Kernel, fake: FakeProvider) -> None:
    client = kernel.client
    model = f"img-{uuid.uuid4().hex[:8]}"
    gate = fake.gate()
    fake.push_image(model, [wait(gate), *image(png())])
    doc = generation_canvas(client, model)
    before = counter(client, "foya_canvas_generations_total", outcome="interrupted")
    pending = Background(kernel.served, lambda c: generate(c, doc))
    wait_until(lambda: len(fake.images(model)) == 1, "the images request", BOUND)
    assert client.delete(f"/canvases/{doc['id']}").status_code == 204
    assert_error(pending.result(), 404, "canvas_not_found")
    wait_until(lambda: fake.images(model)[0].disconnected, "the provider call to end", BOUND)
    gate.set()
    assert counter(client, "foya_canvas_generations_total", outcome="interrupted") == before + 1
    assert not (kernel.data_dir / "canvas-assets" / doc["id"]).exists()


def test_a_client_that_hangs_up_does_not_stop_the_generation(
    kernel: Kernel, fake: FakeProvider
) -> None:
    model = f"img-{uuid.uuid4().hex[:8]}"
    gate = fake.gate()
    fake.push_image(model, [wait(gate), *image(png(50, 50))])
    doc = generation_canvas(kernel.client, model)
    body = json.dumps(
        {"expected_revision": doc["revision"], "config_node_id": "gen", "output_node_id": "out"}
    )
    assert kernel.served.kernel.uds is not None
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(kernel.served.kernel.uds))
        sock.sendall(
            f"POST /canvases/{doc['id']}/generate-image HTTP/1.1\r\nHost: foya\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
        )
        wait_until(lambda: len(fake.images(model)) == 1, "the images request", BOUND)
    gate.set()  # the client is gone; the generation goes on

    def done() -> bool:
        return bool(by_id(get(kernel.client, doc["id"]), "out")["status"] == "success")

    wait_until(done, "the generation to finish", BOUND)
    assert not fake.images(model)[0].disconnected


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
def test_a_generation_cut_short_by_a_stop_is_an_error_after_restart(
    tmp_path: Path, fake: FakeProvider, stop: str
) -> None:
    model = f"img-{uuid.uuid4().hex[:8]}"
    fake.push_image(model, [wait(fake.gate()), *image(png())])  # held until the fake stops
    launcher = Launcher(tmp_path / "procs")
    with short_tmpdir() as root:
        try:
            served = start(launcher, root, "r")
            with served.client() as client:
                image_connection(client, fake)
                doc = generation_canvas(client, model)
                pending = Background(served, lambda c: generate(c, doc))
                wait_until(lambda: len(fake.images(model)) == 1, "the images request", BOUND)
                running = get(client, doc["id"])
                assert by_id(running, "out")["status"] == "running"
            if stop == "SIGKILL":  # by PID, mid-generation
                served.kernel.proc.kill()
                served.kernel.proc.wait(BOUND)
            else:
                assert served.kernel.stop(signal.SIGTERM) == 0, served.kernel.describe()
                logs = served.kernel.logs()
                assert not [line for line in logs if line.get("level") in ("error", "critical")]
            pending.thread.join(BOUND)
            assert not pending.thread.is_alive()
            if pending.response is not None:  # a graceful stop may still answer
                assert_error(pending.response, 503, "unavailable")

            again = start(launcher, root, "r")  # same data directory
            with again.client() as client:
                after = get(client, doc["id"])
        finally:
            launcher.close()
    assert after["revision"] == running["revision"] + 1
    for node_id in ("gen", "out"):
        assert by_id(after, node_id)["status"] == "error"
        assert (
            by_id(after, node_id)["error"] == "Generation was interrupted by an application restart"
        )
    assert by_id(after, "prompt") == by_id(running, "prompt")


def test_an_unreadable_canvases_file_is_kept_aside(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path / "procs")
    with short_tmpdir() as root:
        data_dir = root / "u"
        data_dir.mkdir(mode=0o700)
        good = {
            "id": "a" * 32,
            "title": "kept",
            "revision": 3,
            "nodes": [],
            "edges": [],
            "assets": [],
            "viewport": {"x": 0, "y": 0, "zoom": 1},
            "background": "dots",
            "created_at": "2026-01-02T03:04:05.123456789+08:00",
            "updated_at": "2026-01-02T03:04:05.123456789+08:00",
        }
        original = json.dumps([good, {"id": "b" * 32, "title": 5}]).encode()
        (data_dir / "canvases.json").write_bytes(original)
        try:
            served = start(launcher, root, "u")
            with served.client() as client:
                listed = client.get("/canvases").json()
        finally:
            launcher.close()
        [aside] = data_dir.glob("canvases.json.unreadable-*")
        assert aside.read_bytes() == original
        assert stat.S_IMODE(aside.stat().st_mode) == 0o600
    assert [(d["id"], d["title"], d["revision"]) for d in listed] == [("a" * 32, "kept", 3)]
