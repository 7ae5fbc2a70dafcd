"""Sessions REST (usage) against real `foya serve` kernels.

Two kernels for the module, started side by side on Unix sockets:

- `plain`: an empty data directory (no connections, no projects).
- `seeded`: a data directory prepared before start with the real store and connection files:
  language/image connections, sessions with stored messages and a child session. That is the
  only way to get messages and children before turns and sub-agents exist.

Not covered here (they need a running turn or a queue): fork's 409 `session_busy`; the 3 s turn
grace of DELETE. They belong with the turns work.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from support.helpers import short_tmpdir
from support.streams_helpers import (
    Served,
    assert_error,
    module_kernels,
    new_session,
    open_events,
    patch,
    seed_store,
    session_row,
)

from app.events import MESSAGE_END, EventDraft, Message
from app.store import Store

ISO = "%Y-%m-%dT%H:%M:%S.%fZ"
SESSION_KEYS = {
    "id",
    "phase",
    "connection_id",
    "model",
    "approval_mode",
    "pinned",
    "created_at",
    "updated_at",
}
USAGE_KEYS = {
    "range_days",
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "session_count",
    "message_count",
    "active_days",
    "current_streak",
    "most_used_model_share",
    "activity",
    "model_usage",
}

# ------------------------------------------------------------------------- the seeded data dir

PARENT, CHILD = "seedparent000000000000aa", "seedchild0000000000000aa"
DOOMED, DOOMED_CHILD = "seeddoomed00000000000000", "seeddoomedchild000000000"
ODD = "seedodd00000000000000000"
#: Stored by another version or imported from elsewhere: a role and fields this one never writes.
ODD_MESSAGE = {
    "role": "developer",
    "content": [{"type": "text", "text": "be brief"}],
    "browser_elements": [{"tag": "a", "selector": "#b", "legacy_rect": [1, 2, 3, 4]}],
    "vendor": {"trace": [1, 2]},
    "turn_reason": None,
}
CONNECTIONS = [
    {
        "id": "lang1",
        "name": "Language",
        "type": "language",
        "kind": "openai",
        "auth_kind": "api_key",
        "base_url": "https://llm.invalid/v1",
        "api_key": "sk-test",
        "models": ["m-first", "m-second"],
        "sort_order": 0,
        "model_settings": {},
    },
    {
        "id": "img1",
        "name": "Images",
        "type": "image",
        "kind": "openai",
        "auth_kind": "api_key",
        "base_url": "https://img.invalid/v1",
        "api_key": "sk-test",
        "models": ["i-first"],
        "sort_order": 1,
        "model_settings": {},
    },
]
CONVERSATION: list[Message] = [
    {"role": "user", "content": "hello"},
    {"role": "assistant", "content": "hi there"},
    {"role": "user", "content": "and again"},
    {"role": "assistant", "content": "done"},
]


def prepare_seeded(data_dir: Path) -> None:
    async def fill(store: Store) -> None:
        bound = {"connection_id": "lang1", "model": "m-first"}
        await store.create_session(
            session_row(PARENT, workspace=str(data_dir / "workspaces" / PARENT), **bound)
        )
        await store.create_session(session_row(CHILD, parent_id=PARENT, **bound))
        await store.create_session(session_row(DOOMED, **bound))
        await store.create_session(session_row(DOOMED_CHILD, parent_id=DOOMED, **bound))
        for message in CONVERSATION:
            await store.append(EventDraft(PARENT, MESSAGE_END, message))
        await store.append(EventDraft(CHILD, MESSAGE_END, {"role": "user", "content": "sub"}))
        await store.create_session(session_row(ODD, **bound))
        # Cast: a message of another version, with a field no `Message` has.
        await store.append(EventDraft(ODD, MESSAGE_END, cast(Message, ODD_MESSAGE)))

    seed_store(data_dir, fill)
    (data_dir / "connections.json").write_text(json.dumps(CONNECTIONS))
    (data_dir / "connections.json").chmod(0o600)
    for sid in (PARENT, DOOMED, DOOMED_CHILD):
        (data_dir / "workspaces" / sid).mkdir(parents=True)


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    with short_tmpdir() as root:
        prepare_seeded(root / "seeded")
        with module_kernels(tmp_path_factory.mktemp("sessions"), root, "plain", "seeded") as k:
            yield k


@pytest.fixture(scope="module")
def plain(kernels: dict[str, Served]) -> Served:
    return kernels["plain"]


@pytest.fixture(scope="module")
def seeded(kernels: dict[str, Served]) -> Served:
    return kernels["seeded"]


@pytest.fixture(scope="module")
def client(plain: Served) -> Iterator[httpx.Client]:
    with plain.client() as c:
        yield c


@pytest.fixture(scope="module")
def sclient(seeded: Served) -> Iterator[httpx.Client]:
    with seeded.client() as c:
        yield c


def listed(client: httpx.Client) -> list[dict[str, Any]]:
    response = client.get("/sessions")
    assert response.status_code == 200, response.text
    return list(response.json())


def listed_ids(client: httpx.Client) -> list[str]:
    return [s["id"] for s in listed(client)]


def project(client: httpx.Client, path: Path) -> dict[str, Any]:
    path.mkdir(parents=True, exist_ok=True)
    response = client.post("/projects", json={"path": str(path)})
    assert response.status_code == 201, response.text
    return dict(response.json())


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.strptime(value, ISO)


# ------------------------------------------------------------------------------------ create


@pytest.mark.parametrize(
    "send",
    [
        pytest.param({}, id="no-body"),
        pytest.param({"json": {}}, id="empty-object"),
        pytest.param({"content": b"", "headers": {"content-type": "application/json"}}, id="empty"),
    ],
)
def test_create_with_empty_body_uses_defaults(
    client: httpx.Client, plain: Served, send: dict[str, Any]
) -> None:
    response = client.post("/sessions", **send)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == SESSION_KEYS, body
    assert body["approval_mode"] == "manual"
    assert body["phase"] == "idle"
    assert body["pinned"] is False
    # no connection configured: no connection and no model, but both fields are present
    assert body["connection_id"] == ""
    assert body["model"] == ""
    assert body["created_at"] == body["updated_at"]
    parse_time(body["created_at"])
    assert body["id"] in listed_ids(client)
    workspace = plain.workspaces / body["id"]
    assert workspace.is_dir()
    assert stat.S_IMODE(workspace.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("approval_mode", "manual"),
        ("approval_mode", "auto"),
        ("approval_mode", "full_access"),
        ("reasoning_effort", "high"),
        ("reasoning_effort", "medium"),
        ("reasoning_effort", "low"),
        ("reasoning_effort", ""),
        ("model", "some-model"),
    ],
)
def test_create_accepts_valid_settings(client: httpx.Client, field: str, value: str) -> None:
    body = new_session(client, **{field: value})
    assert body[field] == value


SEND_JSON = "application/json"
CREATE_ERRORS = [
    pytest.param({"json": {"approval_mode": "ask"}}, 400, "invalid_approval_mode", id="ask"),
    pytest.param({"json": {"approval_mode": ""}}, 400, "invalid_approval_mode", id="empty-mode"),
    pytest.param(
        {"json": {"reasoning_effort": "maximum"}}, 400, "invalid_reasoning_effort", id="maximum"
    ),
    pytest.param({"json": {"connection_id": "nope"}}, 400, "connection_not_found", id="conn"),
    pytest.param({"json": {"project_id": "nope"}}, 400, "project_not_found", id="project"),
    pytest.param({"json": {"workspace": "/tmp"}}, 400, "bad_request", id="unknown-field"),
    pytest.param(
        {"content": b'{"model": ', "headers": {"content-type": SEND_JSON}},
        400,
        "bad_request",
        id="malformed-json",
    ),
    pytest.param({"json": ["model"]}, 400, "bad_request", id="array"),
    pytest.param({"json": {"approval_mode": 3}}, 400, "bad_request", id="wrong-type"),
]


@pytest.mark.parametrize(("send", "status", "code"), CREATE_ERRORS)
def test_create_errors_create_nothing(
    client: httpx.Client, plain: Served, send: dict[str, Any], status: int, code: str
) -> None:
    before = listed_ids(client)
    workspaces = set(plain.workspaces.iterdir())
    assert_error(client.post("/sessions", **send), status, code)
    assert listed_ids(client) == before
    assert set(plain.workspaces.iterdir()) == workspaces


def test_create_in_a_project_has_no_managed_workspace(
    client: httpx.Client, plain: Served, tmp_path: Path
) -> None:
    p = project(client, tmp_path / "proj")
    body = new_session(client, project_id=p["id"])
    assert body["project_id"] == p["id"]
    assert not (plain.workspaces / body["id"]).exists()


def test_create_binds_the_first_language_connection(sclient: httpx.Client) -> None:
    body = new_session(sclient)
    assert (body["connection_id"], body["model"]) == ("lang1", "m-first")
    given = new_session(sclient, connection_id="lang1")
    assert (given["connection_id"], given["model"]) == ("lang1", "m-first")
    chosen = new_session(sclient, connection_id="lang1", model="m-second")
    assert chosen["model"] == "m-second"


def test_create_refuses_a_connection_that_is_not_a_language_one(sclient: httpx.Client) -> None:
    before = listed_ids(sclient)
    response = sclient.post("/sessions", json={"connection_id": "img1"})
    assert response.status_code == 400, response.text
    assert set(response.json()) >= {"code", "message"}
    assert listed_ids(sclient) == before


# -------------------------------------------------------------------------------------- list


def test_list_is_top_level_only_newest_first(sclient: httpx.Client) -> None:
    ids = listed_ids(sclient)
    assert PARENT in ids
    assert CHILD not in ids
    assert DOOMED_CHILD not in ids
    made = [new_session(sclient)["id"] for _ in range(3)]
    ids = listed_ids(sclient)
    assert [i for i in ids if i in made] == made[::-1]
    assert all("parent_id" not in s for s in listed(sclient))


def test_children(sclient: httpx.Client, client: httpx.Client) -> None:
    response = sclient.get(f"/sessions/{PARENT}/children")
    assert response.status_code == 200, response.text
    children = response.json()
    assert [c["id"] for c in children] == [CHILD]
    assert children[0]["parent_id"] == PARENT
    assert client.get(f"/sessions/{new_session(client)['id']}/children").json() == []
    assert_error(client.get("/sessions/nope/children"), 404, "not_found")


# ------------------------------------------------------------------------------------- patch


def test_patch_title_becomes_manual(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    before = listed(client)
    body = patch(client, sid, title="  Trip plans  ")
    assert body["title"] == "Trip plans"
    assert body["title_is_manual"] is True
    assert parse_time(body["updated_at"]) >= parse_time(body["created_at"])
    stored = next(s for s in listed(client) if s["id"] == sid)
    assert stored == body
    assert len(listed(client)) == len(before)


def test_patch_pinned_sets_and_clears_pinned_at(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    pinned = patch(client, sid, pinned=True)
    assert pinned["pinned"] is True
    assert parse_time(pinned["pinned_at"]) >= parse_time(pinned["created_at"])
    unpinned = patch(client, sid, pinned=False)
    assert unpinned["pinned"] is False
    assert "pinned_at" not in unpinned
    assert next(s for s in listed(client) if s["id"] == sid) == unpinned


def test_patch_settings(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    body = patch(client, sid, approval_mode="full_access", reasoning_effort="low", model="x")
    assert (body["approval_mode"], body["reasoning_effort"], body["model"]) == (
        "full_access",
        "low",
        "x",
    )
    assert "title" not in body


@pytest.mark.parametrize(
    ("fields", "status", "code"),
    [
        ({"approval_mode": "ask"}, 400, "invalid_approval_mode"),
        ({"reasoning_effort": "maximum"}, 400, "invalid_reasoning_effort"),
        ({"connection_id": "nope"}, 400, "connection_not_found"),
        ({"project_id": "nope"}, 400, "project_not_found"),
        ({"workspace": "/tmp"}, 400, "bad_request"),
        ({"pinned": "yes please"}, 400, "bad_request"),
    ],
)
def test_patch_errors_change_nothing(
    client: httpx.Client, fields: dict[str, Any], status: int, code: str
) -> None:
    sid = new_session(client)["id"]
    before = next(s for s in listed(client) if s["id"] == sid)
    assert_error(client.patch(f"/sessions/{sid}", json=fields), status, code)
    assert next(s for s in listed(client) if s["id"] == sid) == before


def test_patch_unknown_session_is_404(client: httpx.Client) -> None:
    assert_error(client.patch("/sessions/nope", json={"title": "x"}), 404, "not_found")


def test_patch_project_is_locked_once_set(client: httpx.Client, tmp_path: Path) -> None:
    first, second = project(client, tmp_path / "a"), project(client, tmp_path / "b")
    sid = new_session(client)["id"]
    assert patch(client, sid, project_id=first["id"])["project_id"] == first["id"]
    assert patch(client, sid, project_id=first["id"])["project_id"] == first["id"]  # same: fine
    assert_error(
        client.patch(f"/sessions/{sid}", json={"project_id": second["id"]}), 409, "project_locked"
    )
    born = new_session(client, project_id=first["id"])["id"]
    assert_error(
        client.patch(f"/sessions/{born}", json={"project_id": second["id"]}), 409, "project_locked"
    )
    assert next(s for s in listed(client) if s["id"] == born)["project_id"] == first["id"]


# ------------------------------------------------------------------------------------ delete


def test_delete_removes_session_data_and_workspace(client: httpx.Client, plain: Served) -> None:
    sid = new_session(client)["id"]
    workspace = plain.workspaces / sid
    (workspace / "notes.txt").write_text("scratch")
    patch(client, sid, title="soon gone")
    response = client.delete(f"/sessions/{sid}")
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert sid not in listed_ids(client)
    for path in ("history", "children", "usage"):
        assert_error(client.get(f"/sessions/{sid}/{path}"), 404, "not_found")
    assert_error(client.patch(f"/sessions/{sid}", json={"title": "x"}), 404, "not_found")
    assert_error(client.post(f"/sessions/{sid}/fork"), 404, "not_found")
    assert_error(client.get(f"/sessions/{sid}/events"), 404, "not_found")
    assert_error(client.delete(f"/sessions/{sid}"), 404, "not_found")
    assert not workspace.exists()


def test_delete_unknown_session_is_404(client: httpx.Client) -> None:
    assert_error(client.delete("/sessions/nope"), 404, "not_found")


def test_delete_removes_children(sclient: httpx.Client, seeded: Served) -> None:
    assert sclient.delete(f"/sessions/{DOOMED}").status_code == 204
    for sid in (DOOMED, DOOMED_CHILD):
        assert_error(sclient.get(f"/sessions/{sid}/history"), 404, "not_found")
        assert not (seeded.workspaces / sid).exists()
    assert DOOMED not in listed_ids(sclient)


def test_delete_removes_the_managed_workspace_after_a_project_was_set(
    client: httpx.Client, plain: Served, tmp_path: Path
) -> None:
    """A session created without a project gets `<data-dir>/workspaces/<id>`; setting a project
    later (allowed while none is set) must not make DELETE forget that directory."""
    sid = new_session(client)["id"]
    workspace = plain.workspaces / sid
    assert workspace.is_dir()
    proj = project(client, tmp_path / "later")
    patch(client, sid, project_id=proj["id"])
    assert client.delete(f"/sessions/{sid}").status_code == 204
    assert (tmp_path / "later").is_dir()  # the project's directory is never touched
    assert not workspace.exists(), f"{workspace} left behind after DELETE /sessions/{sid}"


# -------------------------------------------------------------------------------------- fork


def test_fork_defaults(client: httpx.Client, plain: Served) -> None:
    source = new_session(client, approval_mode="auto", reasoning_effort="high", model="m")
    patch(client, source["id"], title="Original", pinned=True)
    (plain.workspaces / source["id"] / "draft.md").write_text("v1")
    response = client.post(f"/sessions/{source['id']}/fork")
    assert response.status_code == 200, response.text
    fork = response.json()
    assert fork["id"] != source["id"]
    assert fork["title"] == "Original copy"  # the source's title, marked as a copy
    assert fork["title_is_manual"] is True
    assert fork["phase"] == "idle"
    assert fork["pinned"] is False
    assert "parent_id" not in fork
    for key in ("approval_mode", "reasoning_effort", "model", "connection_id"):
        assert fork[key] == source[key], key
    assert fork["id"] in listed_ids(client)  # a new top-level session
    # the project-less workspace is copied, and the copy is independent
    copied = plain.workspaces / fork["id"] / "draft.md"
    assert copied.read_text() == "v1"
    copied.write_text("v2")
    assert (plain.workspaces / source["id"] / "draft.md").read_text() == "v1"
    assert client.get(f"/sessions/{fork['id']}/history").json() == []


def test_fork_with_title_and_empty_body(client: httpx.Client) -> None:
    sid = new_session(client)["id"]
    titled = client.post(f"/sessions/{sid}/fork", json={"title": "Plan B"})
    assert titled.status_code == 200, titled.text
    assert titled.json()["title"] == "Plan B"  # a given title is taken as it is
    # Without one: `<source title> copy`, and "New chat copy" only for an untitled source.
    empty = client.post(f"/sessions/{sid}/fork", json={})
    assert empty.status_code == 200, empty.text
    assert empty.json()["title"] == "New chat copy"
    again = client.post(f"/sessions/{titled.json()['id']}/fork", json={})
    assert again.json()["title"] == "Plan B copy"


def test_fork_keeps_the_project(client: httpx.Client, plain: Served, tmp_path: Path) -> None:
    proj = project(client, tmp_path / "p")
    sid = new_session(client, project_id=proj["id"])["id"]
    fork = client.post(f"/sessions/{sid}/fork").json()
    assert fork["project_id"] == proj["id"]
    assert not (plain.workspaces / fork["id"]).exists()


@pytest.mark.parametrize(
    ("session", "body", "status", "code"),
    [
        ("new", {"through_seq": 999_999_999}, 404, "message_not_found"),
        ("new", {"workspace": "/tmp"}, 400, "bad_request"),
        ("new", {"through_seq": "last"}, 400, "bad_request"),
        ("nope", {}, 404, "not_found"),
    ],
)
def test_fork_errors(
    client: httpx.Client, session: str, body: dict[str, Any], status: int, code: str
) -> None:
    sid = new_session(client)["id"] if session == "new" else session
    before = listed_ids(client)
    assert_error(client.post(f"/sessions/{sid}/fork", json=body), status, code)
    assert listed_ids(client) == before


def history(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    response = client.get(f"/sessions/{sid}/history")
    assert response.status_code == 200, response.text
    return list(response.json())


def test_history_lists_active_messages(sclient: httpx.Client) -> None:
    messages = history(sclient, PARENT)
    assert [(m["role"], m["content"]) for m in messages] == [
        (m["role"], m["content"]) for m in CONVERSATION
    ]
    seqs = [m["event_seq"] for m in messages]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)


def test_history_pages_backwards_from_its_end(sclient: httpx.Client) -> None:
    """`limit` alone: the last messages; with `before`: the ones before that seq; the pages
    join up to the whole history. Bad bounds are 400s (the web client's paging)."""
    whole = history(sclient, PARENT)
    last = sclient.get(f"/sessions/{PARENT}/history", params={"limit": 3})
    assert last.status_code == 200, last.text
    assert last.json() == whole[-3:]
    older = sclient.get(
        f"/sessions/{PARENT}/history", params={"limit": 3, "before": whole[-3]["event_seq"]}
    )
    assert older.status_code == 200, older.text
    assert older.json() + last.json() == whole
    unlimited = sclient.get(f"/sessions/{PARENT}/history", params={"before": whole[2]["event_seq"]})
    assert unlimited.json() == whole[:2]
    assert sclient.get(f"/sessions/{PARENT}/history", params={"before": 0}).json() == []
    for bad in ({"limit": 0}, {"limit": 1001}, {"before": -1}, {"limit": "x"}):
        assert_error(sclient.get(f"/sessions/{PARENT}/history", params=bad), 400, "bad_request")


def test_history_serves_stored_messages_as_stored(sclient: httpx.Client) -> None:
    (message,) = history(sclient, ODD)
    assert isinstance(message.pop("event_seq"), int)
    # As stored, but for a JSON null, left out: the client's optional fields are strings.
    assert message == {k: v for k, v in ODD_MESSAGE.items() if v is not None}


def test_fork_copies_the_history(sclient: httpx.Client, seeded: Served) -> None:
    source = history(sclient, PARENT)
    fork = sclient.post(f"/sessions/{PARENT}/fork").json()
    copied = history(sclient, fork["id"])
    assert [(m["role"], m["content"]) for m in copied] == [
        (m["role"], m["content"]) for m in source
    ]
    # copies are new facts of the fork, with their own seqs
    assert not {m["event_seq"] for m in copied} & {m["event_seq"] for m in source}
    assert (fork["connection_id"], fork["model"]) == ("lang1", "m-first")
    # stored as session_forked, then one message_imported per message
    with open_events(sclient, fork["id"], after=0) as stream:
        frames = [stream.next_frame() for _ in range(1 + len(source))]
    kinds = [f.event for f in frames if f]
    assert kinds == ["session_forked"] + ["message_imported"] * len(source)
    forked = frames[0].data["payload"] if frames[0] else {}
    assert forked["source_session_id"] == PARENT
    assert forked["through_seq"] == source[-1]["event_seq"]
    assert forked["message_count"] == len(source)
    # forking leaves the source as it was
    assert history(sclient, PARENT) == source


def test_fork_through_an_assistant_message(sclient: httpx.Client) -> None:
    source = history(sclient, PARENT)
    through = source[1]["event_seq"]  # the first assistant reply
    response = sclient.post(f"/sessions/{PARENT}/fork", json={"through_seq": through})
    assert response.status_code == 200, response.text
    copied = history(sclient, response.json()["id"])
    assert [m["content"] for m in copied] == ["hello", "hi there"]


def test_fork_through_a_user_message_is_refused(sclient: httpx.Client) -> None:
    before = listed_ids(sclient)
    user_seq = history(sclient, PARENT)[2]["event_seq"]
    response = sclient.post(f"/sessions/{PARENT}/fork", json={"through_seq": user_seq})
    assert_error(response, 400, "invalid_fork_boundary")
    child_seq = history(sclient, CHILD)[0]["event_seq"]  # a message of another session
    response = sclient.post(f"/sessions/{PARENT}/fork", json={"through_seq": child_seq})
    assert_error(response, 404, "message_not_found")
    assert listed_ids(sclient) == before


# ------------------------------------------------------------------------------------- reads


def test_history_of_new_and_unknown_sessions(client: httpx.Client) -> None:
    assert history(client, new_session(client)["id"]) == []
    assert_error(client.get("/sessions/nope/history"), 404, "not_found")


def test_session_usage_without_requests_is_zero(
    client: httpx.Client, sclient: httpx.Client
) -> None:
    sid = new_session(client, model="gpt-x")["id"]
    response = client.get(f"/sessions/{sid}/usage")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "model": "gpt-x",
        "input_tokens": 0,
        "output_tokens": 0,
        "total_tokens": 0,
        "cached_tokens": 0,
    }
    assert sclient.get(f"/sessions/{PARENT}/usage").json()["model"] == "m-first"
    assert_error(client.get("/sessions/nope/usage"), 404, "not_found")


# ------------------------------------------------------------------------------- usage report


def usage(client: httpx.Client, **params: Any) -> tuple[dict[str, Any], set[str]]:
    """The report and the UTC days that were "today" while it was made."""
    before = dt.datetime.now(dt.UTC).date().isoformat()
    response = client.get("/usage", params=params)
    after = dt.datetime.now(dt.UTC).date().isoformat()
    assert response.status_code == 200, response.text
    return response.json(), {before, after}


@pytest.mark.parametrize(("params", "days"), [({"days": 7}, 7), ({"days": 30}, 30), ({}, 30)])
def test_usage_report_shape(client: httpx.Client, params: dict[str, Any], days: int) -> None:
    report, today = usage(client, **params)
    assert set(report) == USAGE_KEYS, report.keys()  # no usage yet: no most_used_model
    assert report["range_days"] == days
    for key in USAGE_KEYS - {"range_days", "activity", "model_usage", "most_used_model_share"}:
        assert report[key] == 0, key
    assert report["most_used_model_share"] == 0
    assert report["model_usage"] == []
    activity = report["activity"]
    assert len(activity) == 365
    assert all(set(a) == {"date", "message_count", "token_count"} for a in activity)
    dates = [dt.date.fromisoformat(a["date"]) for a in activity]
    assert all(b - a == dt.timedelta(days=1) for a, b in itertools.pairwise(dates))
    assert activity[-1]["date"] in today
    assert all(a["message_count"] == 0 and a["token_count"] == 0 for a in activity)


@pytest.mark.parametrize("days", ["14", "0", "1", "-7", "abc", "7.0", "365", "\u00b2", "\u0667"])
def test_usage_report_rejects_other_ranges(client: httpx.Client, days: str) -> None:
    assert_error(client.get("/usage", params={"days": days}), 400, "invalid_range")
