"""The answers and events Foya's desktop client reads, checked against its TypeScript contract.

Through a real `foya serve` with the fake provider scripting text, tool calls and a manual
approval, each answer and each SSE payload is checked for the fields the desktop reads, their
JSON types and the values of their unions (a field without `?` is required; a union is the
complete set). The shapes and their checker are tests/support/desktop_shapes.py's (also used by
tests/test_desktop_contract.py). Where each shape comes from (`apps/desktop/src/` of Foya's
repository):

| shape / event                       | desktop source                                      |
|-------------------------------------|-----------------------------------------------------|
| Session                             | lib/api.ts; stores/session.ts `replaceSessions`     |
| ChatMessage, ToolCallView (history) | lib/api.ts; stores/conversation.ts `normalizeHistory` |
| SubmitTurnResult, QueuedMessage     | lib/api.ts; stores/conversation.ts `send`           |
| RewindTurnResult, RewindFile        | lib/api.ts; conversation.ts `confirmHistoryRewind`  |
| FileReview                          | lib/api.ts; conversation.ts `refreshFileReview`     |
| ContextUsage                        | lib/api.ts; conversation.ts `usage_updated`         |
| ProjectInfo                         | lib/api.ts `listProjects`, `registerProject`, …     |
| message_delta … error (session SSE) | stores/conversation.ts `handleEvent`                |
| approval_request, approval_resolved | stores/interaction.ts; chat/ApprovalDialog.vue      |
| tool_update `input` as JSON text    | chat/ToolActivityGroup.vue `formatInput`            |
| SkillInfo, AgentInfo, CommandInfo   | lib/api.ts                                          |
| UsageStatistics                     | lib/api.ts                                          |

`test_facts_stored_by_an_older_version_read_in_the_desktop_shape` seeds facts in the shape an
older version stored (`tool_update` with `input` an object and status `pending`, a message with
`turn_reason: null`) and checks that they replay and read back in the client's shape.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from support.desktop_shapes import (
    AGENT,
    COMMAND,
    CONTEXT_USAGE,
    FILE_REVIEW,
    HISTORY_CHAT_MESSAGE,
    KERNEL_EVENT,
    NUM,
    PROJECT,
    REWIND_RESULT,
    SESSION,
    SESSION_EVENT_PAYLOADS,
    SKILL,
    SUBMIT_TURN_RESULT,
    TOOL_UPDATE,
    USAGE_STATISTICS,
    ArrayOf,
    Nullable,
    Type,
    check,
)
from support.fake_provider import (
    READ_TIMEOUT,
    Agent,
    FakeProvider,
    answer,
    call,
    connect,
    http_error,
    payloads,
    tools,
    wait,
)
from support.helpers import short_tmpdir
from support.streams_helpers import Frame, module_kernels, seed_store, session_row

from app import events as k
from app.events import EventDraft, ToolUpdate
from app.store import Store

# ------------------------------------------------------------------ the TypeScript contract


def conforms(shape: Type, value: Any, where: str) -> None:
    """Assert that `value` has `shape` (tests/support/desktop_shapes.py), naming every
    difference."""
    problems = check(shape, value)
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)


def check_frames(frames: list[Frame]) -> set[str]:
    """Check every frame's envelope (`KernelEvent`) and, for a kind the stores handle, its
    payload; the kinds seen. `turn_started` and `turn_complete` the store also takes as `null`:
    Foya sends the object, checked as such."""
    seen = set()
    for frame in frames:
        conforms(KERNEL_EVENT, frame.data, f"frame {frame.event}")
        assert frame.data["kind"] == frame.event
        if frame.event in SESSION_EVENT_PAYLOADS:
            shape = SESSION_EVENT_PAYLOADS[frame.event]
            if isinstance(shape, Nullable):
                shape = shape.inner
            if shape is not None:
                conforms(shape, frame.data.get("payload"), f"{frame.event}.payload")
            seen.add(frame.event)
    return seen


def arguments(view: dict[str, Any]) -> Any:
    """A tool card's `input`, parsed as the desktop's tool view parses it."""
    return json.loads(view["input"])


# ------------------------------------------------------------------------------- the kernel

LEGACY = "l" * 24
LEGACY_ARGS = {"command": "ls -la"}


async def _legacy(store: Store) -> None:
    """A session as an older version stored it."""
    await store.create_session(session_row(LEGACY, title="legacy"))
    # Cast: the card of an older version (arguments as an object, status `pending`).
    card = cast(ToolUpdate, {"id": "c1", "name": "bash", "input": LEGACY_ARGS, "status": "pending"})
    facts = [
        EventDraft(LEGACY, k.MESSAGE_END, {"role": "user", "content": "list"}),
        EventDraft(
            LEGACY,
            k.MESSAGE_END,
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "bash", "input": LEGACY_ARGS}],
            },
        ),
        EventDraft(LEGACY, k.TOOL_UPDATE, card),
        EventDraft(LEGACY, k.TOOL_END, {"id": "c1", "name": "bash", "output": "a.txt"}),
        EventDraft(
            LEGACY,
            k.MESSAGE_END,
            {"role": "tool", "tool_call_id": "c1", "name": "bash", "content": "x"},
        ),
        EventDraft(
            LEGACY,
            k.MESSAGE_END,
            {"role": "assistant", "content": "Done.", "turn_status": "failed", "turn_reason": None},
        ),
    ]
    for fact in facts:
        await store.append(fact)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    """A kernel whose data directory holds the legacy session, connected to the fake."""
    with FakeProvider.running() as fake, short_tmpdir() as root:
        seed_store(root / "k", _legacy)
        with (
            module_kernels(tmp_path_factory.mktemp("wire"), root, "k") as kernels,
            kernels["k"].client() as client,
        ):
            client.timeout = httpx.Timeout(READ_TIMEOUT)
            connection = connect(client, fake)
            yield Agent(kernels["k"], fake, client, connection["id"])


# ----------------------------------------------------------------------------------- tests


def test_a_tool_turn_and_its_history_have_the_desktop_shapes(agent: Agent) -> None:
    s = agent.session()
    conforms(SESSION, s.row, "PATCH /sessions/{id}")
    gate = agent.fake.gate()
    write = call("w", "write", {"path": "notes.txt", "content": "one\ntwo\n"})
    bash = call("b", "bash", {"command": "cat notes.txt"})
    s.push([wait(gate), *tools(write, bash, before="Writing.")], answer("All done."))
    with s.events() as events:
        started = s.submit("write it")
        conforms(SUBMIT_TURN_RESULT, started, "POST /turns (started)")
        assert started["status"] == "started"
        events.until_kind("turn_started")
        queued = s.submit("and then this")  # the turn is busy: queued
        conforms(SUBMIT_TURN_RESULT, queued, "POST /turns (queued)")
        assert queued["status"] == "queued" and queued["queued"]["text"] == "and then this"
        events.until_kind("queue_updated")
        assert s.client.delete(f"/sessions/{s.id}/queue/{queued['queued']['id']}").is_success
        gate.set()
        events.until_kind("turn_complete")
        frames = events.frames
    seen = check_frames(frames)
    assert {"message_delta", "tool_begin", "tool_update", "tool_end", "usage_updated"} <= seen
    assert {"message_end", "turn_started", "turn_complete", "queue_updated"} <= seen
    updates = payloads(frames, "tool_update")
    for call_id, args in (("w", write.arguments), ("b", bash.arguments)):
        mine = [u for u in updates if u["id"] == call_id]
        # Queued with the step, then running as it starts: the card's states, Foya's order.
        assert [u["status"] for u in mine] == ["queued", "running"], mine
        assert all(arguments(u) == args for u in mine)
    # Both calls succeed: `is_error` is there (the desktop's store reads a boolean) and false.
    assert [e["is_error"] for e in payloads(frames, "tool_end")] == [False, False]
    assert all(e["input"] == "" for e in payloads(frames, "tool_begin"))

    history = s.history()
    conforms(ArrayOf(HISTORY_CHAT_MESSAGE), history, "GET /history")
    views = [c for m in history for c in m.get("tool_calls", ())]
    assert [(c["id"], arguments(c), c["status"]) for c in views] == [
        ("w", write.arguments, "done"),
        ("b", bash.arguments, "done"),
    ]
    conforms(CONTEXT_USAGE, s.client.get(f"/sessions/{s.id}/usage").json(), "GET /usage")
    review = s.client.get(f"/sessions/{s.id}/file-review").json()
    conforms(FILE_REVIEW, review, "GET /file-review")
    listed = s.client.get("/sessions").json()
    conforms(ArrayOf(SESSION), listed, "GET /sessions")


def test_a_manual_approval_request_carries_the_arguments(agent: Agent) -> None:
    s = agent.session("manual")
    s.push(tools(call("w", "write", {"path": "plan.md", "content": "step one\n"})), answer("Ok."))
    with s.events() as events:
        s.submit()
        before = events.until_kind("approval_request")
        request = before[-1].data["payload"]
        answered = s.client.post(
            f"/sessions/{s.id}/approvals/{request['id']}", json={"decision": "approved"}
        )
        assert answered.status_code == 204, answered.text
        after = events.until_kind("turn_complete")
    assert "approval_request" in check_frames(before) and "approval_resolved" in check_frames(after)
    assert request["session"] == s.id and request["execution_session"] == s.id
    assert request["tool_name"] == "write" and request["action"] == "write"
    # What is being approved: the path (as `resource` too) and the content to write.
    assert json.loads(request["detail"]) == {"path": "plan.md", "content": "step one\n"}
    assert request["resource"] == str((s.workspace / "plan.md").resolve())
    # The card is `running` while the user is asked, as in Foya (approval inside the run).
    running = [u for u in payloads(before, "tool_update") if u["status"] == "running"]
    assert [u["id"] for u in running] == ["w"]
    assert (s.workspace / "plan.md").read_text() == "step one\n"


def test_projects_say_whether_their_directory_is_there(agent: Agent, tmp_path: Path) -> None:
    folder = tmp_path / f"project-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    created = agent.client.post("/projects", json={"path": str(folder), "name": "Here"})
    assert created.status_code == 201, created.text
    conforms(PROJECT, created.json(), "POST /projects")
    project = created.json()
    assert project["available"] is True

    def listed() -> dict[str, Any]:
        response = agent.client.get("/projects")
        assert response.status_code == 200, response.text
        conforms(ArrayOf(PROJECT), response.json(), "GET /projects")
        return next(p for p in response.json() if p["id"] == project["id"])

    assert listed()["available"] is True
    shutil.rmtree(folder)
    assert listed()["available"] is False
    folder.write_text("a file now, not a directory\n")
    patched = agent.client.patch(f"/projects/{project['id']}", json={"pinned": True})
    assert patched.status_code == 200, patched.text
    conforms(PROJECT, patched.json(), "PATCH /projects/{id}")
    assert patched.json()["available"] is False and patched.json()["pinned"] is True
    folder.unlink()
    folder.mkdir()
    assert listed()["available"] is True  # checked on every answer, never stored
    stored = json.loads((agent.data_dir / "projects.json").read_text())
    assert all("available" not in p for p in stored)


def test_a_confirmed_rewind_answers_the_desktop_result(agent: Agent) -> None:
    s = agent.session()
    s.push(tools(call("w", "write", {"path": "draft.txt", "content": "v1\n"})), answer("Ok."))
    with s.events() as events:
        s.submit("draft it")
        events.until_kind("turn_complete")
    (seq,) = [m["event_seq"] for m in s.history() if m["role"] == "user"]
    url = f"/sessions/{s.id}/turns/{seq}/rewind"
    shown = s.client.post(url).json()
    conforms(REWIND_RESULT, shown, "rewind preview")
    assert shown["status"] == "confirmation_required" and shown["file_state_token"]
    body = {
        "confirm": True,
        "expected_head_seq": shown["head_seq"],
        "expected_file_state": shown["file_state_token"],
    }
    with s.events() as events:
        done = s.client.post(url, json=body)
        rewound = events.until_kind("history_rewound")
    assert done.status_code == 200, done.text
    conforms(REWIND_RESULT, done.json(), "rewind confirmed")
    assert done.json()["status"] == "rewound" and done.json()["message"] == "draft it"
    assert done.json()["file_state_token"] == ""  # as Foya: nothing left to confirm
    check_frames(rewound)
    # `target_user_seq?` in the store's cast: Foya always sends it.
    for event in payloads(rewound, "history_rewound"):
        conforms(NUM, event.get("target_user_seq"), "history_rewound.target_user_seq")
    assert not (s.workspace / "draft.txt").exists()
    review = s.client.get(f"/sessions/{s.id}/file-review").json()
    conforms(FILE_REVIEW, review, "GET /file-review")


def test_facts_stored_by_an_older_version_read_in_the_desktop_shape(agent: Agent) -> None:
    with (
        agent.served.client() as client,
        client.stream("GET", f"/sessions/{LEGACY}/events", params={"after": 0}) as response,
    ):
        assert response.status_code == 200
        lines = response.iter_lines()
        frames: list[dict[str, Any]] = []
        for line in lines:
            if line.startswith("data: "):
                frames.append(json.loads(line[6:]))
                if len(frames) == 6:
                    break
    (update,) = [f["payload"] for f in frames if f["kind"] == "tool_update"]
    conforms(TOOL_UPDATE, update, "legacy tool_update")
    assert update["status"] == "queued" and json.loads(update["input"]) == LEGACY_ARGS
    history = agent.client.get(f"/sessions/{LEGACY}/history").json()
    conforms(ArrayOf(HISTORY_CHAT_MESSAGE), history, "legacy history")
    (view,) = history[1]["tool_calls"]
    assert json.loads(view["input"]) == LEGACY_ARGS and view["status"] == "done"
    assert "turn_reason" not in history[-1] and history[-1]["turn_status"] == "failed"


def test_a_failed_turn_is_an_error_event_and_a_failed_completion(agent: Agent) -> None:
    s = agent.session()
    s.push(http_error(400, "the model refused the request"))
    with s.events() as events:
        s.submit()
        frames = events.until_kind("turn_complete")
    assert "error" in check_frames(frames)
    assert payloads(frames, "turn_complete")[-1]["status"] == "failed"
    conforms(ArrayOf(HISTORY_CHAT_MESSAGE), s.history(), "GET /history after a failed turn")


def test_catalogs_and_statistics_have_the_desktop_shapes(agent: Agent) -> None:
    def get(path: str, **params: Any) -> Any:
        response = agent.client.get(path, params=params)
        assert response.status_code == 200, (path, response.text)
        return response.json()

    skills, agents = get("/skills"), get("/agents")
    conforms(ArrayOf(SKILL), skills, "GET /skills")
    conforms(ArrayOf(AGENT), agents, "GET /agents")
    assert agents, "the builtin agents are listed"
    conforms(ArrayOf(COMMAND), get("/commands", scope="global"), "GET /commands")
    for days in (7, 30):
        conforms(USAGE_STATISTICS, get("/usage", days=days), f"GET /usage?days={days}")
