"""The request boundary: no input yields a 500, and bad input is never stored.

Lone UTF-16 surrogates, integers past SQLite's range, oversized bodies, query strings that are not
UTF-8, the open `HEAD /healthz` probe, one log line per unexpected error, and a full disk (507).
Real kernels on a Unix socket (one for the module) or loopback TCP; a real tmpfs for the disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.helpers import REPO, Kernel, Launcher, base_env, free_port, sha256_hex, short_tmpdir
from support.streams_helpers import Served, assert_error, module_kernels, unix_kernel

from app.errors import InsufficientStorage
from app.store.db import Database

MiB = 1024 * 1024
BIG = 2**63  # one past SQLite's largest INTEGER
JSON = {"content-type": "application/json"}
LONE = '"\\ud800"'  # a JSON string holding a lone high surrogate, as a client would send it


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with short_tmpdir() as root, module_kernels(tmp_path_factory.mktemp("b"), root, "k") as ks:
        yield ks["k"]


@pytest.fixture
def client(served: Served) -> Iterator[httpx.Client]:
    with served.client() as client:
        yield client


def raw_json(client: httpx.Client, method: str, path: str, body: str) -> httpx.Response:
    """Send `body` byte for byte (httpx's `json=` would refuse to encode a lone surrogate)."""
    return client.request(method, path, content=body.encode(), headers=JSON)


def new_session(client: httpx.Client) -> str:
    response = client.post("/sessions", json={})
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def new_project(client: httpx.Client, path: Path) -> str:
    response = client.post("/projects", json={"path": str(path), "name": "p"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


# ------------------------------------------------------------------------- lone surrogates


def surrogate_requests(session: str, project: str) -> list[tuple[str, str, str]]:
    return [
        ("POST", "/connections", f'{{"name": {LONE}}}'),
        ("POST", "/connections", f'{{"models": ["ok", {LONE}]}}'),
        ("POST", "/connections", f'{{"model_settings": {{{LONE}: {{}}}}}}'),
        ("POST", "/projects", f'{{"path": "/tmp", "name": {LONE}}}'),
        ("PATCH", f"/projects/{project}", f'{{"name": {LONE}}}'),
        ("POST", "/sessions", f'{{"model": {LONE}}}'),
        ("PATCH", f"/sessions/{session}", '{"title": "a\\udfffb"}'),
        ("POST", f"/sessions/{session}/fork", f'{{"title": {LONE}}}'),
        ("POST", f"/sessions/{session}/turns", f'{{"message": {LONE}}}'),
        ("POST", f"/sessions/{session}/queue", f'{{"message": "x", "extra": [{LONE}]}}'),
        ("PUT", "/settings/default-models", f'{{"language": {{"model": {LONE}}}}}'),
    ]


def test_lone_surrogates_are_400_and_never_stored(served: Served, client: httpx.Client) -> None:
    """Anywhere in a JSON body: 400 at the boundary (they were 500s, and stored ones broke every
    later listing)."""
    session, project = new_session(client), new_project(client, served.data_dir)
    before = {p: client.get(p).json() for p in ("/connections", "/projects", "/sessions")}
    for method, path, body in surrogate_requests(session, project):
        response = raw_json(client, method, path, body)
        body_error = assert_error(response, 400, "bad_request")
        assert "surrogate" in body_error["message"], (method, path)
    for path, listing in before.items():
        assert client.get(path).json() == listing, path
    assert client.get(f"/sessions/{session}/queue").json() == []


def test_valid_surrogate_pairs_and_escapes_pass(client: httpx.Client) -> None:
    """An escaped pair is one character (an emoji), and an escaped backslash before `ud800` is
    plain text: neither is refused."""
    response = raw_json(client, "POST", "/connections", '{"name": "\\ud83d\\ude00 \\\\ud800"}')
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "\U0001f600 \\ud800"
    client.delete(f"/connections/{response.json()['id']}")


def test_a_query_string_that_is_not_utf8_is_400(client: httpx.Client) -> None:
    for query in ("x=%ED%A0%80", "refresh=%FF", "%C3=1"):
        response = client.get(f"/connections?{query}")
        assert_error(response, 400, "bad_request")
    assert client.get("/connections?x=%C3%A9t%C3%A9&=").status_code == 200


def test_a_stored_bad_project_name_does_not_break_the_listing(
    spawn: Launcher, short_dir: Path
) -> None:
    """A hand-edited projects.json with a lone surrogate, or a record of the wrong shape."""
    data_dir = short_dir / "k"
    data_dir.mkdir(mode=0o700)
    stamp = "2026-01-01T00:00:00Z"
    good = {"id": "good", "name": "\ud800", "path": "/tmp", "created_at": stamp}
    records = [{**good, "updated_at": stamp}, {"id": "broken", "name": 5}]
    (data_dir / "projects.json").write_text(json.dumps(records))
    served = unix_kernel(spawn, short_dir, "k")
    with served.client() as client:
        response = client.get("/projects")
        assert response.status_code == 200, response.text
        assert [(p["id"], p["name"]) for p in response.json()] == [("good", "\ufffd")]
    assert any("skipped" in line.get("event", "") for line in served.kernel.logs())


# ------------------------------------------------------------------------- integer bounds


def test_integers_past_sqlite_range_are_400(served: Served, client: httpx.Client) -> None:
    """Every integer a client sends is bounded (they were OverflowError 500s)."""
    session = new_session(client)
    # A message seq out of range is Foya's `invalid_message_seq`, like 0 or -1.
    assert_error(client.post(f"/sessions/{session}/turns/{BIG}/rewind"), 400, "invalid_message_seq")
    refused = [
        client.post(f"/sessions/{session}/turns/1/rewind", json={"expected_head_seq": BIG}),
        client.post(f"/sessions/{session}/fork", json={"through_seq": BIG}),
        client.get(f"/sessions/{session}/events", params={"after": BIG}),
        client.get(f"/sessions/{session}/events", headers={"Last-Event-ID": str(BIG)}),
        client.patch(f"/sessions/{session}/queue/x", json={"position": BIG}),
        client.post(
            f"/sessions/{session}/file-review",
            json={"action": "keep", "expected_through_seq": BIG, "expected_file_state": ""},
        ),
        client.post("/connections", json={"sort_order": BIG}),
        client.post("/connections", json={"sort_order": -BIG - 1}),
    ]
    for response in refused:
        assert_error(response, 400, "bad_request")
    # The largest valid values reach the kernel and get its own answers.
    largest = BIG - 1
    response = client.post(f"/sessions/{session}/turns/{largest}/rewind")
    assert_error(response, 404, "message_not_found")
    response = client.post(f"/sessions/{session}/fork", json={"through_seq": largest})
    assert_error(response, 404, "message_not_found")


# ---------------------------------------------------------------------------- body size


def test_a_body_over_8_mib_is_413(client: httpx.Client) -> None:
    """Refused by its declared length, and while streaming when no length is declared."""
    big = b'{"name": "' + b"a" * (8 * MiB) + b'"}'
    response = client.post(
        "/connections", content=big, headers={"content-type": "application/json"}
    )
    assert_error(response, 413, "payload_too_large")

    def chunks() -> Iterator[bytes]:  # chunked transfer: no Content-Length to trust
        yield b'{"message": "'
        for _ in range(9):
            yield b"a" * MiB
        yield b'"}'

    response = client.post("/sessions/x/queue", content=chunks())
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "payload_too_large")
    # Just under the limit is parsed as usual (an unknown session here).
    fits = b'{"message": "' + b"a" * (8 * MiB - 64) + b'"}'
    response = client.post("/sessions/x/queue", content=fits, headers=JSON)
    assert_error(response, 404, "not_found")


def test_the_artifact_upload_keeps_its_own_limit(client: httpx.Client) -> None:
    session = new_session(client)
    files = {"file": ("big.png", b"\0" * (9 * MiB), "image/png")}
    response = client.post(f"/sessions/{session}/artifacts", files=files)
    assert response.status_code in (413, 415), response.text
    assert response.json()["code"] != "payload_too_large"


# ------------------------------------------------------------------------------- healthz


def test_head_healthz_on_the_unix_socket(client: httpx.Client) -> None:
    response = client.head("/healthz")
    assert response.status_code == 200 and response.content == b""


# --------------------------------------------------------------- one log line per error


def test_an_unexpected_error_is_logged_once_and_answered_500(
    spawn: Launcher, short_dir: Path
) -> None:
    """A session row that no longer fits its shape (written behind the kernel's back) makes
    GET /sessions fail inside the route: one `unhandled error` line with the traceback, nothing
    from hypercorn (it logged "Error in ASGI Framework" too)."""
    served = unix_kernel(spawn, short_dir, "k")
    with served.client() as client:
        new_session(client)
        with sqlite3.connect(served.data_dir / "foya.db") as db:
            db.execute("UPDATE sessions SET created_at_ns = 'garbage'")
        response = client.get("/sessions")
    assert_error(response, 500, "internal_error")
    assert served.kernel.stop() == 0
    lines = served.kernel.logs()
    errors = [line for line in lines if line.get("level") in ("error", "critical")]
    assert [line["event"] for line in errors] == ["unhandled error"], errors
    assert "Traceback" in errors[0]["exception"]
    assert "Traceback" not in served.kernel.stderr()


# ------------------------------------------------------------------------------ disk full


def test_sqlite_full_is_insufficient_storage(tmp_path: Path) -> None:
    """SQLITE_FULL from the real database (capped with max_page_count) becomes the typed 507
    error, alone and in a group commit."""
    db = Database(tmp_path / "full.db")

    def init(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS t(x BLOB)")

    db.start(init)
    try:
        pages = db.call(lambda c: c.execute("PRAGMA page_count").fetchone()[0], write=False)
        db.call(lambda c: c.execute(f"PRAGMA max_page_count={pages + 2}"), write=False)

        def fill(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t VALUES (randomblob(200000))")

        with pytest.raises(InsufficientStorage) as caught:
            db.call(fill)
        assert caught.value.status == 507 and caught.value.code == "insufficient_storage"

        async def together() -> list[BaseException | None]:
            results = await asyncio.gather(
                *(db.write(fill) for _ in range(4)), return_exceptions=True
            )
            return [r if isinstance(r, BaseException) else None for r in results]

        assert all(isinstance(r, InsufficientStorage) for r in asyncio.run(together()))
        db.call(lambda c: c.execute("INSERT INTO t VALUES (x'00')"))  # small writes still fit
    finally:
        db.close()


TOKEN = "t" * 40


@pytest.fixture
def tiny_disk_kernel(tmp_path: Path) -> Iterator[Kernel]:
    """A TCP kernel whose data directory is a 4 MiB tmpfs, mounted in a private mount namespace
    (`unshare --mount`, root only); `exec` keeps the PID, so it is stopped by PID."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    port = free_port()
    script = 'mount -t tmpfs -o size=4m foya-test "$1" && shift && exec "$@"'
    kernel = Kernel.__new__(Kernel)
    workdir = tmp_path / "proc"
    workdir.mkdir()
    kernel.args = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]
    kernel.url, kernel.uds, kernel.tls = f"http://127.0.0.1:{port}", None, None
    kernel.port = port
    kernel.stdout_path, kernel.stderr_path = workdir / "stdout.log", workdir / "stderr.log"
    serve = [sys.executable, "-m", "app", "serve", "--listen", f"127.0.0.1:{port}"]
    serve += ["--allow-plaintext", "--data-dir", str(mount_point / "data")]
    env = base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(TOKEN))
    with kernel.stdout_path.open("wb") as out, kernel.stderr_path.open("wb") as err:
        kernel.proc = subprocess.Popen(
            [*kernel.args, "sh", str(mount_point), *serve],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    try:
        kernel.wait_ready()
        yield kernel
    finally:
        kernel.stop(signal.SIGTERM)


def test_a_full_disk_answers_507(tiny_disk_kernel: Kernel) -> None:
    """Both ways a write meets a full disk: SQLite (a session title bigger than the disk) and a
    JSON file (a connection name bigger than the disk). Nothing half-done is kept."""
    assert os.geteuid() == 0, "mounting a tmpfs needs root (CI runs as root)"
    with tiny_disk_kernel.client(TOKEN) as client:
        session = new_session(client)
        huge = "x" * (5 * MiB)
        body = assert_error(
            client.patch(f"/sessions/{session}", json={"title": huge}), 507, "insufficient_storage"
        )
        assert "full" in body["message"]
        listed = {s["id"]: s for s in client.get("/sessions").json()}
        assert listed[session].get("title") in (None, "")

        body = assert_error(
            client.post("/connections", json={"name": huge}), 507, "insufficient_storage"
        )
        assert "full" in body["message"]
        assert client.get("/connections").json() == []
        # Small writes still work once the failed ones are gone.
        assert client.patch(f"/sessions/{session}", json={"title": "ok"}).status_code == 200
    lines = [line for line in tiny_disk_kernel.logs() if line.get("level") == "error"]
    assert lines == [], lines
