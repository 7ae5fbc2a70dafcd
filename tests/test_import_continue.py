"""An imported session made on a kernel without connections can be continued once one exists
(`app.kernel.binding`), through a real `foya serve` and a real import.

A ChatBuddy backup imported without keys leaves its sessions without a connection. Their next
input is refused while the kernel has no language connection at all, 400 `connection_not_found`,
with a message naming the fix (`POST /connections`, or `PATCH /sessions/{id}`), and nothing is
stored. Once a connection exists the next turn binds the session to the default language model,
stored with `session_updated` before the turn's first fact, and runs on it. A session whose
connection was deleted, or whose row names one this kernel never had, is bound the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.chatbuddy_fixtures import sample_payload, v2_zip
from support.fake_provider import API_KEY, TERMINAL, FakeProvider, answer, payloads
from support.helpers import Launcher, base_env, short_tmpdir
from support.streams_helpers import (
    Served,
    assert_error,
    open_events,
    seed_store,
    session_row,
    unix_kernel,
)

from app.store import Store


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as running:
        yield running


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Served]:
    """A fresh kernel with a HOME of its own and no connection."""
    with short_tmpdir() as root:
        launcher = Launcher(tmp_path / "procs")
        try:
            home = tmp_path / "home"
            home.mkdir()
            yield unix_kernel(launcher, root, "k", env=base_env(HOME=str(home)))
        finally:
            launcher.close()


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def imported(client: httpx.Client) -> list[dict[str, Any]]:
    """Import the sample ChatBuddy backup (no keys); its sessions, oldest first."""
    files = {"file": ("backup.zip", v2_zip(sample_payload()), "application/zip")}
    summary = ok(client.post("/imports", files=files, data={"source": "chatbuddy"}))
    assert summary["sessions_created"] == 3
    sessions = ok(client.get("/sessions"))
    assert all(s["connection_id"] == "" for s in sessions)
    return sorted(sessions, key=lambda s: s["created_at"])


def connect(client: httpx.Client, fake: FakeProvider, *models: str) -> str:
    body = {"name": "fake", "base_url": fake.base_url, "api_key": API_KEY, "models": list(models)}
    return str(ok(client.post("/connections", json=body), 201)["id"])


def run_turn(client: httpx.Client, sid: str, message: str) -> list[Any]:
    """Submit a turn and return the session's frames up to its `turn_complete`."""
    with open_events(client, sid) as stream:
        ok(client.post(f"/sessions/{sid}/turns", json={"message": message}))
        return stream.frames_until(lambda f: f.event == TERMINAL)


def test_refused_without_any_connection_then_bound_once_one_exists(
    kernel: Served, fake: FakeProvider
) -> None:
    with kernel.client() as client:
        first, *_ = imported(client)
        sid = first["id"]
        before = ok(client.get(f"/sessions/{sid}/history"))
        for route, body in (("turns", {"message": "go on"}), ("queue", {"message": "later"})):
            refused = client.post(f"/sessions/{sid}/{route}", json=body)
            error = assert_error(refused, 400, "connection_not_found")
            assert f"PATCH /sessions/{sid}" in error["message"], error
            assert "POST /connections" in error["message"], error
        assert ok(client.get(f"/sessions/{sid}/history")) == before
        assert ok(client.get(f"/sessions/{sid}/queue")) == []
        assert ok(client.get("/sessions")) and fake.chats("imp-a") == []

        cid = connect(client, fake, "imp-a", "imp-b")
        fake.push("imp-a", answer("Picking up where we left off."))
        frames = run_turn(client, sid, "go on")
        kinds = [f.event for f in frames]
        bound = payloads(frames, "session_updated")[0]
        assert (bound["connection_id"], bound["model"]) == (cid, "imp-a")
        assert kinds.index("session_updated") < kinds.index("turn_started")
        assert payloads(frames, "turn_complete")[-1]["status"] == "completed"
        row = next(s for s in ok(client.get("/sessions")) if s["id"] == sid)
        assert (row["connection_id"], row["model"]) == (cid, "imp-a")
        [request] = fake.chats("imp-a")
        sent = [m["content"] for m in request.messages if m["role"] == "user"]
        assert sent[-1] == "go on" and len(sent) > 1  # the imported history came along
        # Bound once: the next turn's updates are only its phase changes.
        fake.push("imp-a", answer("Again."))
        again = run_turn(client, sid, "and again")
        updates = payloads(again, "session_updated")
        assert [u["phase"] for u in updates] == ["turn"]
        assert {(u["connection_id"], u["model"]) for u in updates} == {(cid, "imp-a")}


def test_a_model_set_before_is_kept_and_a_deleted_connection_rebinds(
    kernel: Served, fake: FakeProvider
) -> None:
    with kernel.client() as client:
        _, second, third = imported(client)
        ok(client.patch(f"/sessions/{second['id']}", json={"model": "imp-d"}))
        connect(client, fake, "imp-c", "imp-d")
        fake.push("imp-d", answer("Kept."))
        frames = run_turn(client, second["id"], "continue")
        assert payloads(frames, "session_updated")[0]["model"] == "imp-d"
        assert len(fake.chats("imp-d")) == 1

        # Its connection deleted, the third session (bound to it) moves to the new default.
        gone = connect(client, fake, "imp-e")
        ok(client.patch(f"/sessions/{third['id']}", json={"connection_id": gone, "model": "imp-e"}))
        assert client.delete(f"/connections/{gone}").status_code == 204
        models = {"language": {"connection_id": connect(client, fake, "imp-f"), "model": "imp-f"}}
        ok(client.put("/settings/default-models", json=models))
        fake.push("imp-f", answer("Moved."))
        frames = run_turn(client, third["id"], "continue")
        assert payloads(frames, "session_updated")[0]["model"] == "imp-f"
        assert payloads(frames, "turn_complete")[-1]["status"] == "completed"


def test_a_row_naming_an_unknown_connection_is_bound_too(
    tmp_path: Path, fake: FakeProvider
) -> None:
    """A session whose stored connection this kernel never had (a data dir moved between
    kernels): refused with a message saying so, then bound like an imported one."""

    async def fill(store: Store) -> None:
        await store.create_session(session_row("s-far", connection_id="elsewhere", model="x"))

    with short_tmpdir() as root:
        seed_store(root / "k", fill)
        launcher = Launcher(tmp_path / "procs")
        try:
            served = unix_kernel(launcher, root, "k", env=base_env(HOME=str(tmp_path)))
            with served.client() as client:
                refused = client.post("/sessions/s-far/turns", json={"message": "hi"})
                error = assert_error(refused, 400, "connection_not_found")
                assert "elsewhere" in error["message"], error
                cid = connect(client, fake, "imp-g")
                fake.push("imp-g", answer("Hello."))
                frames = run_turn(client, "s-far", "hi")
                bound = payloads(frames, "session_updated")[0]
                assert (bound["connection_id"], bound["model"]) == (cid, "imp-g")
        finally:
            launcher.close()
