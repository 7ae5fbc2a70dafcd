"""Artifacts over HTTP and through turns (POST /turns `attachments`).

A real kernel on a Unix socket talks to the fake provider. Images are made with Pillow in the
test, uploaded as multipart, read back, attached to turns, forked and deleted with their session.
What reaches the model is read from the fake's recorded request (`data:` URLs of the stored
bytes); what the kernel keeps is checked on disk, under `<data-dir>/artifacts/<session>/`.
The store's format matrix (normalization, metadata stripping, limits per format) is unit-tested
in tests/test_artifacts.py and not repeated here.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import secrets
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpcore
import httpx
import pytest
from PIL import Image
from support.fake_provider import Agent, Session, agent_kernel, answer, connect, only
from support.helpers import wait_until
from support.streams_helpers import assert_error

MIB = 1024 * 1024
IMMUTABLE = "private, max-age=31536000, immutable"
MEDIA = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("artifact-routes")) as agent:
        yield agent


@pytest.fixture
def s(agent: Agent) -> Session:
    return agent.session("full_access")


# ------------------------------------------------------------------------------------ helpers


def image(fmt: str = "PNG", size: tuple[int, int] = (12, 8), mode: str = "RGB") -> bytes:
    """A small picture, left half red and right half blue, encoded as `fmt`."""
    im = Image.new(mode, size, "red")
    if mode == "RGB":
        im.paste("blue", (size[0] // 2, 0, size[0], size[1]))
    out = io.BytesIO()
    im.save(out, fmt)
    return out.getvalue()


# A refusal sent before the request body is read can end the connection unannounced (see
# test_an_early_refusal_keeps_or_closes_the_connection_cleanly); requests expecting one say
# `Connection: close`, so the pooled client never reuses such a connection.
CLOSE = {"connection": "close"}


def upload(
    s: Session,
    data: bytes,
    name: str = "shot.png",
    media_type: str = "image/png",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    files = {"file": (name, data, media_type)}
    return s.client.post(f"/sessions/{s.id}/artifacts", files=files, headers=headers)


def added(s: Session, data: bytes | None = None, name: str = "shot.png") -> dict[str, Any]:
    """Upload `data` (a PNG by default); its AttachmentRef."""
    response = upload(s, image() if data is None else data, name)
    assert response.status_code == 201, response.text
    return dict(response.json()["attachment"])


def url(s: Session, artifact_id: str) -> str:
    return f"/sessions/{s.id}/artifacts/{artifact_id}"


def stored(agent: Agent, session: str) -> list[str]:
    """The files under `<data-dir>/artifacts/<session>` (empty if the folder is absent)."""
    folder = agent.data_dir / "artifacts" / session
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def user_parts(s: Session, request: int = 0) -> list[dict[str, Any]]:
    """The content parts of the last user message of the `request`-th chat request."""
    messages = s.chats(streaming=True)[request].messages
    content = [m for m in messages if m["role"] == "user"][-1]["content"]
    assert isinstance(content, list), content
    return list(content)


def data_url(part: dict[str, Any]) -> tuple[str, bytes]:
    """(media type, bytes) of an `image_url` part carrying a base64 data URL."""
    assert part["type"] == "image_url", part
    head, _, encoded = part["image_url"]["url"].partition(",")
    assert head.startswith("data:") and head.endswith(";base64"), head
    return head[len("data:") : -len(";base64")], base64.b64decode(encoded, validate=True)


def turn_with(s: Session, ids: list[str], message: str = "look at this") -> list[Any]:
    """A completed turn whose input attaches `ids`; its frames."""
    s.push(answer("I see it."))
    with s.events() as events:
        body = s.submit(message, attachments=[{"id": i} for i in ids])
        assert body["status"] == "started", body
        frames = events.until_kind("turn_complete")
    assert only(frames, "turn_complete")["status"] == "completed"
    return frames


def raw_request(agent: Agent, method: str, target: str) -> httpcore.Response:
    """A request whose target goes out byte for byte (httpx would resolve `..` segments)."""
    uds = agent.served.kernel.uds
    assert uds is not None
    with httpcore.ConnectionPool(uds=str(uds)) as pool:
        response = pool.request(
            method, httpcore.URL(scheme=b"http", host=b"foya", port=None, target=target.encode())
        )
        response.read()
        return response


def no_turn(s: Session) -> None:
    """Nothing reached the model or the log, and the session is idle."""
    assert s.chats() == []
    assert s.history() == []
    assert s.get()["phase"] == "idle"


# ------------------------------------------------------------------------------------- upload


def test_png_round_trips_as_image_png(agent: Agent, s: Session) -> None:
    data = image("PNG", (12, 8))
    response = upload(s, data, name="../../evil/shot.png")
    assert response.status_code == 201, response.text
    ref = response.json()["attachment"]
    assert set(ref) == {"id", "name", "kind", "media_type", "bytes", "width", "height", "sha256"}
    assert len(ref["id"]) == 32 and int(ref["id"], 16) >= 0
    assert ref["name"] == "shot.png"  # the base name only, never a path
    assert (ref["kind"], ref["media_type"], ref["width"], ref["height"]) == (
        "image",
        "image/png",
        12,
        8,
    )

    got = s.client.get(url(s, ref["id"]))
    assert got.status_code == 200
    assert got.headers["content-type"] == "image/png"
    assert got.headers["cache-control"] == IMMUTABLE
    assert len(got.content) == ref["bytes"] and sha(got.content) == ref["sha256"]
    with Image.open(io.BytesIO(got.content)) as im:
        assert (im.format, im.size) == ("PNG", (12, 8))
        rgb = im.convert("RGB")
        assert rgb.getpixel((0, 0)) == (255, 0, 0) and rgb.getpixel((11, 7)) == (0, 0, 255)

    assert stored(agent, s.id) == sorted([f"{ref['id']}.json", f"{ref['id']}.png"])
    assert not (agent.data_dir / "artifacts" / "evil").exists()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_media_type_comes_from_the_content(s: Session, fmt: str) -> None:
    # The client claims a JPEG named .jpg every time: only the bytes decide.
    response = upload(s, image(fmt), name="photo.jpg", media_type="image/jpeg")
    assert response.status_code == 201, response.text
    ref = response.json()["attachment"]
    assert ref["media_type"] == MEDIA[fmt]
    got = s.client.get(url(s, ref["id"]))
    assert got.headers["content-type"] == MEDIA[fmt]
    with Image.open(io.BytesIO(got.content)) as im:
        assert im.format == fmt and im.size == (12, 8)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("notes.png", b"just some text, not a picture\n"),
        ("pic.bmp", image("BMP")),
        ("pic.tiff", image("TIFF")),
        ("cut.png", image("PNG", (64, 64))[:60]),
        ("empty.png", b""),
    ],
)
def test_non_images_are_415_and_store_nothing(
    agent: Agent, s: Session, name: str, data: bytes
) -> None:
    assert_error(upload(s, data, name=name), 415, "unsupported_image")
    assert stored(agent, s.id) == []


@pytest.mark.parametrize(
    "size",
    [(8193, 1), (1, 8193), (6400, 6400)],  # a side over 8192; 40.96 MP with both sides allowed
)
def test_too_many_pixels_is_413(agent: Agent, s: Session, size: tuple[int, int]) -> None:
    data = image("PNG", size, mode="1")  # one bit per pixel: a few KiB on the wire
    assert len(data) < MIB
    assert_error(upload(s, data, name="big.png"), 413, "image_too_large")
    assert stored(agent, s.id) == []


@pytest.mark.parametrize("total", [20 * MIB + 1, 21 * MIB])
def test_a_file_over_20_mib_is_413(agent: Agent, s: Session, total: int) -> None:
    png = image()
    data = png + secrets.token_bytes(total - len(png))  # a PNG with trailing junk
    assert_error(upload(s, data, name="huge.png", headers=CLOSE), 413, "image_too_large")
    assert stored(agent, s.id) == []


def test_a_file_of_exactly_20_mib_is_accepted(s: Session) -> None:
    png = image()
    ref = added(s, png + b"\0" * (20 * MIB - len(png)))  # Pillow stops reading at IEND
    assert ref["media_type"] == "image/png" and ref["bytes"] < MIB  # stored re-encoded


def test_an_endless_chunked_body_is_refused_while_streaming(agent: Agent, s: Session) -> None:
    """21 MiB in chunks and no final chunk: only a server that counts as it reads can answer."""
    uds = agent.served.kernel.uds
    assert uds is not None
    boundary = "b" + secrets.token_hex(8)
    head = (
        f"POST /sessions/{s.id}/artifacts HTTP/1.1\r\nHost: foya\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    part = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.png"\r\n'
        "Content-Type: image/png\r\n\r\n"
    ).encode() + image()
    piece = b"\0" * (256 * 1024)

    def chunk(data: bytes) -> bytes:
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(15)
        sock.connect(str(uds))

        def send() -> None:
            try:
                sock.sendall(head + chunk(part))
                for _ in range(21 * MIB // len(piece)):
                    sock.sendall(chunk(piece))
            except OSError:
                pass  # the server may stop reading once it has answered

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        reply_head = b""
        while b"\r\n\r\n" not in reply_head:
            got = sock.recv(65536)
            assert got, f"connection closed without an answer: {reply_head!r}"
            reply_head += got
        sock.shutdown(socket.SHUT_WR)
        sender.join(15)
    assert reply_head.startswith(b"HTTP/1.1 413"), reply_head[:200]
    assert stored(agent, s.id) == []


def test_not_multipart_is_400(agent: Agent, s: Session) -> None:
    path = f"/sessions/{s.id}/artifacts"
    raw = s.client.post(path, content=image(), headers={"content-type": "image/png", **CLOSE})
    assert_error(raw, 400, "bad_request")
    assert_error(s.client.post(path, json={"file": "x"}, headers=CLOSE), 400, "bad_request")
    assert_error(s.client.post(path), 400, "bad_request")
    assert stored(agent, s.id) == []


@pytest.mark.parametrize(
    ("content_type", "size", "status"),
    [
        pytest.param("image/png", 100, 400, id="not-multipart"),
        pytest.param("multipart/form-data; boundary=x", 21 * MIB, 413, id="declared-21MiB"),
    ],
)
def test_an_early_refusal_keeps_or_closes_the_connection_cleanly(
    agent: Agent, s: Session, content_type: str, size: int, status: int
) -> None:
    """A server that answers before reading the body must either still read that body and
    serve the next request on the connection, or announce `Connection: close` (RFC 9112 §9.6).
    Otherwise a keep-alive client reuses a connection the server has dropped and its next,
    unrelated request fails."""
    uds = agent.served.kernel.uds
    assert uds is not None
    head = (
        f"POST /sessions/{s.id}/artifacts HTTP/1.1\r\nHost: foya\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {size}\r\n\r\n"
    ).encode()
    follow_up = b"GET /healthz HTTP/1.1\r\nHost: foya\r\n\r\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(uds))
        sock.sendall(head)  # the body is held back until the server has answered or waited
        sock.settimeout(2)
        received = b""
        with contextlib.suppress(TimeoutError):
            while b"\r\n\r\n" not in received and (got := sock.recv(65536)):
                received += got
        sock.settimeout(10)
        first, _, _ = received.partition(b"\r\n\r\n")
        if first:
            assert first.startswith(f"HTTP/1.1 {status}".encode()), first
            if b"\r\nconnection: close" in first.lower():
                return  # announced: the client will not reuse the connection
        with contextlib.suppress(OSError):
            sock.sendall(b"\0" * size + follow_up)
        while received.count(b"HTTP/1.1 ") < 2 and (got := sock.recv(65536)):
            received += got
    assert received.count(b"HTTP/1.1 ") == 2, f"dropped without Connection: close: {received!r}"
    assert b"HTTP/1.1 200" in received.split(b"\r\n\r\n", 1)[1], received


def test_a_multipart_body_without_file_is_400(agent: Agent, s: Session) -> None:
    path = f"/sessions/{s.id}/artifacts"
    other_field = s.client.post(path, files={"image": ("x.png", image(), "image/png")})
    assert_error(other_field, 400, "bad_request")
    plain_field = s.client.post(path, data={"file": "not an upload"}, files={"x": ("", b"")})
    assert_error(plain_field, 400, "bad_request")
    assert stored(agent, s.id) == []


def test_unknown_session_is_404(agent: Agent) -> None:
    client = agent.client
    sent = client.post("/sessions/nope/artifacts", files={"file": ("a.png", image(), "image/png")})
    assert_error(sent, 404, "not_found")
    assert_error(client.get(f"/sessions/nope/artifacts/{'0' * 32}"), 404, "not_found")
    assert_error(client.delete(f"/sessions/nope/artifacts/{'0' * 32}"), 404, "not_found")
    assert not (agent.data_dir / "artifacts" / "nope").exists()


# --------------------------------------------------------------------------------- read, ids


def test_unknown_artifact_is_404(s: Session) -> None:
    missing = secrets.token_hex(16)
    assert_error(s.client.get(url(s, missing)), 404, "artifact_not_found")
    assert_error(s.client.delete(url(s, missing)), 404, "artifact_not_found")


def test_artifacts_belong_to_their_session(agent: Agent, s: Session) -> None:
    ref = added(s)
    other = agent.session()
    assert_error(other.client.get(url(other, ref["id"])), 404, "artifact_not_found")
    assert_error(other.client.delete(url(other, ref["id"])), 404, "artifact_not_found")
    # Nor can another session's turn use it.
    body = {"message": "steal", "attachments": [{"id": ref["id"]}]}
    assert_error(
        other.client.post(f"/sessions/{other.id}/turns", json=body), 404, "artifact_not_found"
    )
    no_turn(other)
    assert s.client.delete(url(s, ref["id"])).status_code == 204  # still its own, uncommitted


@pytest.mark.parametrize(
    "bad",
    [
        "..",
        "%2e%2e",
        "%2E%2E",
        "a.b",
        "A" * 32,
        "0" * 31,
        "0" * 33,
        "0" * 31 + "g",
        "0" * 31 + "%00",
    ],
)
def test_malformed_ids_are_400(agent: Agent, s: Session, bad: str) -> None:
    ref = added(s)
    for method in ("GET", "DELETE"):
        response = raw_request(agent, method, f"/sessions/{s.id}/artifacts/{bad}")
        assert response.status == 400, (method, bad, response.status, response.content)
        assert b'"invalid_artifact_id"' in response.content, response.content
    assert s.client.get(url(s, ref["id"])).status_code == 200  # nothing was deleted


def test_path_like_ids_serve_nothing(agent: Agent, s: Session) -> None:
    victim = agent.session()
    ref = added(victim)
    secret = victim.client.get(url(victim, ref["id"])).content
    targets = [
        f"/sessions/{s.id}/artifacts/../{victim.id}/{ref['id']}",
        f"/sessions/{s.id}/artifacts/..%2F{victim.id}%2F{ref['id']}",
        f"/sessions/{s.id}/artifacts/..%2f..%2fartifacts%2f{victim.id}%2f{ref['id']}.png",
        f"/sessions/{s.id}/artifacts/{ref['id']}%2F..%2F..%2F{victim.id}%2F{ref['id']}",
        f"/sessions/{s.id}/artifacts/%2Fetc%2Fpasswd",
    ]
    for target in targets:
        response = raw_request(agent, "GET", target)
        assert response.status != 200, (target, response.content[:200])
        assert secret not in response.content and b"root:" not in response.content
        assert raw_request(agent, "DELETE", target).status != 204, target
    assert victim.client.get(url(victim, ref["id"])).content == secret


# ------------------------------------------------------------------------------------- delete


def test_a_staged_artifact_is_deleted(agent: Agent, s: Session) -> None:
    ref = added(s)
    keep = added(s, image("GIF"), name="keep.gif")
    assert s.client.delete(url(s, ref["id"])).status_code == 204
    assert_error(s.client.get(url(s, ref["id"])), 404, "artifact_not_found")
    assert_error(s.client.delete(url(s, ref["id"])), 404, "artifact_not_found")
    assert stored(agent, s.id) == sorted([f"{keep['id']}.json", f"{keep['id']}.gif"])
    assert s.client.get(url(s, keep["id"])).status_code == 200


def test_a_committed_artifact_is_409_and_stays_readable(s: Session) -> None:
    ref = added(s)
    before = s.client.get(url(s, ref["id"])).content
    turn_with(s, [ref["id"]])
    assert_error(s.client.delete(url(s, ref["id"])), 409, "artifact_committed")
    got = s.client.get(url(s, ref["id"]))
    assert got.status_code == 200 and got.content == before


def test_queued_input_commits_its_attachments(s: Session) -> None:
    ref = added(s)
    body = {"message": "later", "attachments": [{"id": ref["id"]}]}
    response = s.client.post(f"/sessions/{s.id}/queue", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["attachments"] == [ref]
    assert_error(s.client.delete(url(s, ref["id"])), 409, "artifact_committed")
    assert s.client.get(url(s, ref["id"])).status_code == 200


# ------------------------------------------------------------------------------- turn input


def test_a_turn_sends_its_images_as_data_urls(s: Session) -> None:
    png = added(s, image("PNG"), name="one.png")
    jpeg = added(s, image("JPEG"), name="two.jpg")
    turn_with(s, [png["id"], jpeg["id"]], message="compare these")

    user = next(m for m in s.history() if m["role"] == "user")
    assert user["content"] == "compare these"
    assert user["attachments"] == [png, jpeg]  # full refs, in the order given

    parts = user_parts(s)
    assert parts[0] == {"type": "text", "text": "compare these"}
    assert len(parts) == 3
    for part, ref in zip(parts[1:], (png, jpeg), strict=True):
        media_type, data = data_url(part)
        assert media_type == ref["media_type"]
        assert data == s.client.get(url(s, ref["id"])).content
        assert sha(data) == ref["sha256"]


def test_an_image_without_text_is_a_turn(s: Session) -> None:
    """Foya refuses input only when text, attachments and browser elements are all empty."""
    ref = added(s)
    turn_with(s, [ref["id"]], message="")
    user = next(m for m in s.history() if m["role"] == "user")
    assert user["content"] == "" and user["attachments"] == [ref]
    media_type, data = data_url(user_parts(s)[-1])
    assert media_type == ref["media_type"] and sha(data) == ref["sha256"]
    queued = s.client.post(f"/sessions/{s.id}/queue", json={"attachments": [{"id": ref["id"]}]})
    assert queued.status_code == 201, queued.text
    assert queued.json()["text"] == ""


def test_later_requests_still_carry_the_image(s: Session) -> None:
    ref = added(s)
    turn_with(s, [ref["id"]], message="first")
    s.wait_idle()
    s.push(answer("Still there."))
    with s.events() as events:
        s.submit("second, no image")
        events.until_kind("turn_complete")
    messages = s.chats(streaming=True)[1].messages
    users = [m for m in messages if m["role"] == "user"]
    assert [u["content"] if isinstance(u["content"], str) else "parts" for u in users] == [
        "parts",
        "second, no image",
    ]
    _, data = data_url(users[0]["content"][1])
    assert sha(data) == ref["sha256"]


def test_an_unknown_attachment_starts_no_turn(agent: Agent, s: Session) -> None:
    good = added(s)
    missing = secrets.token_hex(16)
    body = {"message": "look", "attachments": [{"id": good["id"]}, {"id": missing}]}
    assert_error(s.client.post(f"/sessions/{s.id}/turns", json=body), 404, "artifact_not_found")
    no_turn(s)
    # All or none: the known one was not committed by the refused input.
    assert s.client.delete(url(s, good["id"])).status_code == 204
    assert stored(agent, s.id) == []


@pytest.mark.parametrize(
    ("attachments", "status", "code"),
    [
        ([{"id": "../etc"}], 400, "invalid_artifact_id"),
        ([{}], 400, "invalid_queue_message"),
        (["x"], 400, "bad_request"),  # a decode failure, as Foya's
        ([{"id": 7}], 400, "bad_request"),  # id must be a JSON string: a decode failure too
    ],
)
def test_malformed_attachments_start_no_turn(
    s: Session, attachments: list[Any], status: int, code: str
) -> None:
    body = {"message": "look", "attachments": attachments}
    assert_error(s.client.post(f"/sessions/{s.id}/turns", json=body), status, code)
    no_turn(s)


def test_a_model_without_image_input_is_400(agent: Agent) -> None:
    model = f"blind-{secrets.token_hex(4)}"
    settings = {model: {"image_input": False}}
    connection = connect(agent.client, agent.fake, models=[model], model_settings=settings)
    s = agent.session(connection_id=connection["id"], model=model)
    ref = added(s)
    body = {"message": "look", "attachments": [{"id": ref["id"]}]}
    turns = f"/sessions/{s.id}/turns"
    assert_error(s.client.post(turns, json=body), 400, "image_input_unsupported")
    assert_error(
        s.client.post(f"/sessions/{s.id}/queue", json=body), 400, "image_input_unsupported"
    )
    no_turn(s)
    assert s.queue() == []
    assert s.client.delete(url(s, ref["id"])).status_code == 204  # never committed

    # Text alone still works on that model.
    s.push(answer("ok"))
    with s.events() as events:
        s.submit("just text")
        assert only(events.until_kind("turn_complete"), "turn_complete")["status"] == "completed"


# ------------------------------------------------------------------------ fork and deletion


def fork(s: Session) -> str:
    """Fork `s` (waiting out the runner's wind-down after a turn); the new session's id."""
    found: list[httpx.Response] = []

    def done() -> bool:
        response = s.client.post(f"/sessions/{s.id}/fork", json={})
        found[:] = [response]
        return response.status_code != 409

    wait_until(done, "the session to accept a fork", 10)
    assert found[0].status_code == 200, found[0].text
    return str(found[0].json()["id"])


def test_fork_copies_referenced_artifacts(agent: Agent, s: Session) -> None:
    ref = added(s)
    original = s.client.get(url(s, ref["id"])).content
    turn_with(s, [ref["id"]])
    new = fork(s)
    forked = Session(agent, {**s.row, "id": new})

    # The copy has an id of its own (Foya's behaviour), and the fork's message names it.
    (message,) = [m for m in forked.history() if m["role"] == "user"]
    (copied,) = message["attachments"]
    assert copied["id"] != ref["id"] and len(copied["id"]) == 32
    assert {k: v for k, v in copied.items() if k != "id"} == {
        k: v for k, v in ref.items() if k != "id"
    }
    assert_error(forked.client.get(url(forked, ref["id"])), 404, "artifact_not_found")
    got = forked.client.get(url(forked, copied["id"]))
    assert got.status_code == 200 and got.content == original
    assert_error(forked.client.delete(url(forked, copied["id"])), 409, "artifact_committed")
    # The source's message still names the source's artifact.
    (source_message,) = [m for m in s.history() if m["role"] == "user"]
    assert source_message["attachments"][0]["id"] == ref["id"]

    assert s.client.delete(f"/sessions/{s.id}").status_code == 204
    assert not (agent.data_dir / "artifacts" / s.id).exists()
    again = forked.client.get(url(forked, copied["id"]))
    assert again.status_code == 200 and again.content == original

    # The fork's next request inlines its own copy.
    before = len(forked.chats(streaming=True))
    forked.push(answer("Yes."))
    with forked.events() as events:
        forked.submit("and now?")
        events.until_kind("turn_complete")
    messages = forked.chats(streaming=True)[before].messages
    first_user = next(m for m in messages if m["role"] == "user")
    media_type, data = data_url(first_user["content"][1])
    assert media_type == "image/png" and data == original


def test_deleting_a_session_removes_its_artifacts(agent: Agent, s: Session) -> None:
    committed = added(s)
    staged = added(s, image("WEBP"), name="s.webp")
    turn_with(s, [committed["id"]])
    folder = agent.data_dir / "artifacts" / s.id
    assert len(stored(agent, s.id)) == 4
    s.wait_idle()
    assert s.client.delete(f"/sessions/{s.id}").status_code == 204
    wait_until(lambda: not folder.exists(), "the artifacts folder to go", 5)
    for ref in (committed, staged):
        assert_error(s.client.get(url(s, ref["id"])), 404, "not_found")
    assert (agent.data_dir / "artifacts").is_dir()  # only the session's folder went


def test_deleting_one_session_keeps_anothers_artifacts(agent: Agent, s: Session) -> None:
    other = agent.session()
    ref = added(other)
    added(s)
    assert s.client.delete(f"/sessions/{s.id}").status_code == 204
    assert stored(agent, s.id) == []
    assert other.client.get(url(other, ref["id"])).status_code == 200
