"""Foya's desktop client against this kernel: every operation the desktop performs, its
request exactly as the desktop's host and views build it, its answer checked against the
desktop's TypeScript interface; and every SSE event kind the desktop's stores handle, its payload
checked the same way.

One real `foya serve` over TCP with a bearer token, as remote mode reaches it
(tests/support/desktop_world.py sends each request as `src-tauri/src/kernel.rs` does), with the fake
model provider scripting text, reasoning, tool calls and approvals, a fake MCP registry and a
fake Bing on loopback, an MCP server over stdio (tests/support/mcp_servers/server.py), a plugin
and a plugin marketplace in local directories. Shapes: tests/support/desktop_shapes.py.

`CASES` is the table: the desktop file and function each request comes from, the request, the
status Foya answers, and the interface the desktop casts the answer to. Cases run in table order
on the one kernel; each prepares what it needs itself (`World.prep`), so a failing case does not
hide the next one.

Offline stand-ins: a plugin marketplace is a local directory (the desktop's `source` is a path or
git URL; a remote git host is out of reach here); the MCP registry is the loopback fake the kernel
is pointed at (`FOYA_MCP_REGISTRY_URL`). Video generation posts to a `seedance` `video`
connection on the fake video provider (tests/support/fake_video_provider.py).

The channels' commands (`list_channels`, `create_channel`, `update_channel`,
`delete_channel`, the Feishu registration and bot settings, the channel binding and pairing)
are in tests/test_desktop_contract_channels.py.
Desktop-only commands (no kernel request): the SSH and kernel-connection settings, the local file
browser and external editors, and the embedded browser's window commands.
SSE kinds the stores handle that no offline run can produce: `subagent_interrupted` (a kernel
restart under a running child) and `agent_budget_exceeded` (a child tree over its token budget);
both carry the shapes `subagent_*` / `agent_budget_updated` are checked with here.
"""

from __future__ import annotations

import io
import json
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image
from support.desktop_shapes import (
    AGENT,
    AGENT_BUDGET,
    AGENT_LIMITS,
    AGENT_RUN,
    ANY,
    AUTOMATION,
    BACKGROUND_COMMAND,
    CANVAS_DOCUMENT,
    CANVAS_EVENT,
    CANVAS_UPLOAD,
    CHAT_MESSAGE,
    COMMAND,
    COMMAND_EXECUTION,
    COMPACT_RESULT,
    CONNECTION,
    CONTEXT_EVENT,
    CONTEXT_ITEM,
    CONTEXT_USAGE,
    DEFAULT_MODELS,
    ERROR,
    FILE_REVIEW,
    HOOK,
    KERNEL_EVENT,
    MARKETPLACE,
    MARKETPLACE_CATALOG,
    MARKETPLACE_PREVIEW,
    MCP_CONFIG,
    MCP_REGISTRY_SERVER,
    MCP_STATUS,
    MEMORY_SETTINGS,
    MODEL_CATALOG,
    PLUGIN,
    PROJECT,
    QUEUED_MESSAGE,
    REWIND_RESULT,
    SESSION,
    SESSION_EVENT_PAYLOADS,
    SESSION_WORKSPACE,
    SKILL,
    STR,
    SUBMIT_TURN_RESULT,
    TERMINAL,
    TERMINAL_EVENT,
    UPLOAD_RESULT,
    USAGE_STATISTICS,
    WEB_SEARCH_RESULT,
    WEB_SEARCH_SETTINGS,
    WORKFLOW,
    WORKFLOW_APPROVAL,
    WORKSPACE_ENTRY,
    ArrayOf,
    Nullable,
    Type,
    check,
)
from support.desktop_world import Call, Stream, World, desktop_world, multipart
from support.fake_provider import answer, call, http_error, image, reasoning, reply, tools, wait
from support.fake_video_provider import API_KEY as VIDEO_KEY
from support.fake_video_provider import FakeVideoProvider
from support.fake_video_provider import Script as VideoScript
from support.helpers import wait_until

MCP_SERVER = Path(__file__).parent / "support" / "mcp_servers" / "server.py"
PLAN_TEXT = "## Plan\n1. Create notes.txt\n2. Say done"
Session = dict[str, Any]


def png(width: int = 32, height: int = 24) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (30, 120, 200)).save(out, "PNG")
    return out.getvalue()


def enc(part: str) -> str:
    """The host's `encode_query_component`: every byte but the unreserved ones escaped."""
    from urllib.parse import quote

    return quote(part, safe="")


def turn_body(message: str, **extra: Any) -> dict[str, Any]:
    """`submit_turn` / `enqueue_message` (sessions.rs): the composer's message as the host
    wraps it."""
    return {"message": message, "skill_ref": "", "attachments": [], "browser_elements": [], **extra}


# ----------------------------------------------------------------------- shared preparations


def main_session(w: World) -> Session:
    """The chat the SSE check drives (manual approvals): reasoning, text, a `write` call the
    user approves, then the answer. Its file change stays pending for review."""

    def make() -> Session:
        s = w.session("manual")
        w.push(
            s,
            [reasoning("Let me think. "), *tools(call("w1", "write", WRITE), before="On it. ")],
            answer("Written notes.txt."),
        )
        mark = w.submit(s, "write the notes")
        request = w.stream(s["id"]).kind("approval_request", mark)["payload"]
        w.stash["main_approval"] = request
        approval = {"request_id": request["id"], "decision": "approved"}
        w.prep("POST", f"/sessions/{s['id']}/approvals/{request['id']}", approval)
        w.stream(s["id"]).kind("turn_complete", mark)
        w.idle(s)
        return s

    return dict(w.once("main", make))


WRITE = {"path": "notes.txt", "content": "hello\n"}


def chatted(w: World, key: str = "chatted", turns: int = 1) -> Session:
    """A chat with `turns` completed text turns (full access)."""

    def make() -> Session:
        s = w.session()
        for i in range(turns):
            w.turn(s, answer(f"Answer {i}."), message=f"question {i}")
        return s

    return dict(w.once(key, make))


def writer(w: World, key: str) -> Session:
    """A chat whose one turn wrote a file (full access): something to rewind."""

    def make() -> Session:
        s = w.session()
        w.turn(s, tools(call("w", "write", WRITE)), answer("Done."), message="write it")
        return s

    return dict(w.once(key, make))


def project(w: World) -> dict[str, Any]:
    def make() -> dict[str, Any]:
        place = w.root / "project"
        place.mkdir()
        (place / "README.md").write_text("# A project\n")
        return dict(w.prep("POST", "/projects", {"path": str(place), "name": "Project"}))

    return dict(w.once("project", make))


def project_session(w: World) -> Session:
    return dict(w.once("project_session", lambda: w.session(project_id=project(w)["id"])))


def last_user_seq(w: World, s: Session) -> int:
    return int([m for m in w.history(s) if m["role"] == "user"][-1]["event_seq"])


def pending(w: World, s: Session, kind: str, *scripts: Any, message: str = "go") -> Any:
    """Push the scripts, submit, and return the payload of the first `kind` event."""
    w.push(s, *scripts)
    mark = w.submit(s, message)
    return w.stream(s["id"]).kind(kind, mark)["payload"]


def running_tool(w: World, key: str, tool_id: str) -> Session:
    """A chat whose turn is running `sleep` in the foreground (tool `tool_id`)."""

    def make() -> Session:
        s = w.session()
        script = tools(call(tool_id, "bash", {"command": "sleep 30"}))
        w.stash[f"{key}:tool"] = pending(w, s, "tool_update", script, answer("ok"))
        return s

    return dict(w.once(key, make))


def background_command(w: World) -> tuple[Session, str]:
    """A chat whose turn started a background command (`bash` with `background`)."""

    def make() -> tuple[Session, str]:
        s = w.session()
        bg = call("bg", "bash", {"command": "sleep 30", "background": True})
        mark = w.turn(s, tools(bg), answer("Started."), message="start it")
        update = w.stream(s["id"]).kind("background_command_updated", mark)["payload"]
        return s, str(update["command_id"])

    value = w.once("background", make)
    return dict(value[0]), str(value[1])


def connection(w: World, key: str, **fields: Any) -> dict[str, Any]:
    """A connection to the fake made with the connection form's payload."""

    def make() -> dict[str, Any]:
        return dict(w.prep("POST", "/connections", form_payload(w, **fields)))

    return dict(w.once(f"connection:{key}", make))


def form_payload(w: World, **fields: Any) -> dict[str, Any]:
    """ConnectionsView.vue `formPayload()` for a new connection (no `id`): the name, type,
    `kind`/`auth_kind`, base URL, imported models with their settings, `models_cached: true`,
    the next `sort_order`, and the key when one was typed. `video_protocol` only for video."""
    kind = fields.pop("type", "language")
    models = fields.pop("models", [])
    body: dict[str, Any] = {
        "name": fields.pop("name", "Fake provider"),
        "type": kind,
        "kind": "openai",
        "auth_kind": "api_key",
        "base_url": w.fake.base_url,
        "model_settings": {m: model_settings(kind) for m in models},
        "models": models,
        "models_cached": True,
        "sort_order": len(w.client.get("/connections").json()),
        "api_key": "sk-desktop-" + uuid.uuid4().hex,
        **fields,
    }
    return body


def model_settings(kind: str) -> dict[str, Any]:
    """ConnectionsView.vue `defaultModelSettings(type)`."""
    return {
        "image_input": True,
        "image_generation": kind == "image",
        "video_generation": kind == "video",
        "audio_generation": False,
        "tool_calling": kind == "language",
        "web_search": kind == "language",
        "reasoning_efforts": ["low", "medium", "high"],
    }


def canvas(w: World, key: str = "canvas") -> dict[str, Any]:
    def make() -> dict[str, Any]:
        body = {"session_id": "", "project_id": "", "title": f"Creative project {key}"}
        return dict(w.prep("POST", "/canvases", body))

    return dict(w.once(key, make))


def node(node_id: str, node_type: str, **fields: Any) -> dict[str, Any]:
    """A CanvasNode as the canvas view holds it (every required field, `z_index` included)."""
    box = {"x": 0, "y": 0, "width": 240, "height": 160, "z_index": 0}
    return {"id": node_id, "type": node_type, **box, **fields}


def generation_canvas(w: World, mode: str, connection_id: str, model: str) -> dict[str, Any]:
    doc = canvas(w, f"gen-{mode}")
    nodes = [
        node("prompt", "text", text="a red fox in snow"),
        node(
            "gen",
            "generation",
            prompt="watercolour",
            generation={"connection_id": connection_id, "mode": mode, "model": model},
        ),
        node("out", mode),
    ]
    edges = [
        {"id": "e1", "from_node_id": "prompt", "to_node_id": "gen", "kind": "reference"},
        {"id": "e2", "from_node_id": "gen", "to_node_id": "out", "kind": "output"},
    ]
    patch = {"expected_revision": doc["revision"], "nodes": nodes, "edges": edges}
    return dict(w.prep("PATCH", f"/canvases/{doc['id']}", patch))


def plugin_dir(base: Path, name: str) -> Path:
    """A plugin package: its manifest and one skill."""
    place = base / name
    skill = place / "skills" / f"{name}-skill" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(f"---\nname: {name}-skill\ndescription: a plugin skill\n---\nDo it.\n")
    manifest = {
        "$schema": "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json",
        "name": name,
        "version": "1.0.0",
        "description": "A test plugin",
    }
    (place / "plugin.json").write_text(json.dumps(manifest))
    return place


def marketplace(w: World) -> dict[str, Any]:
    """A marketplace in a local directory (the closest offline form of a git source)."""

    def make() -> dict[str, Any]:
        market = w.root / "market"
        (market / ".claude-plugin").mkdir(parents=True)
        plugin_dir(market / "plugins", "delta")
        catalog = {
            "name": "shop",
            "metadata": {"description": "a test marketplace"},
            "owner": {"name": "Tester"},
            "plugins": [{"name": "delta", "description": "local", "source": "./plugins/delta"}],
        }
        (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps(catalog))
        body = {"source": str(market), "ref": "", "sparse_paths": []}
        return dict(w.prep("POST", "/plugin-marketplaces", body))

    return dict(w.once("marketplace", make))


# ------------------------------------------------------------------------------- the builders
# Each takes the world and returns the request as the host sends it; what it needs it prepares.


def sid(s: Session) -> str:
    return str(s["id"])


def b_create_session(w: World) -> Call:
    # conversation.ts ensureSession(): unset draft fields are `undefined`, so left out.
    body = {"connection_id": w.connection_id, "model": "m-desktop", "approval_mode": "manual"}
    return Call("POST", "/sessions", body)


def b_create_project_session(w: World) -> Call:
    body = {
        "connection_id": w.connection_id,
        "model": "m-desktop-project",
        "reasoning_effort": "low",
        "project_id": project(w)["id"],
        "approval_mode": "auto",
    }
    return Call("POST", "/sessions", body)


def b_fork(w: World) -> Call:
    return Call("POST", f"/sessions/{sid(chatted(w))}/fork")  # options null: no body


def b_fork_through(w: World) -> Call:
    s = chatted(w)
    last = w.history(s)[-1]["event_seq"]
    return Call("POST", f"/sessions/{sid(s)}/fork", {"through_seq": last})


def b_submit(w: World) -> Call:
    s = w.session()
    w.push(s, answer("Hello from the fake."))
    w.stash["submitted"] = s
    return Call("POST", f"/sessions/{sid(s)}/turns", turn_body("hello"))


def b_submit_files(w: World) -> Call:
    # conversation.ts send(): the composer's workspace files go along with the text.
    s = project_session(w)
    w.push(s, answer("Read it."))
    body = turn_body("look at this", workspace_files=["README.md"])
    return Call("POST", f"/sessions/{sid(s)}/turns", body)


def b_upload(w: World) -> Call:
    s = chatted(w)
    data = multipart("foya-image-upload-boundary", "photo.png", "application/octet-stream", png())
    boundary = "multipart/form-data; boundary=foya-image-upload-boundary"
    return Call("POST", f"/sessions/{sid(s)}/artifacts", raw=data, content_type=boundary)


def uploaded(w: World) -> tuple[Session, str]:
    def make() -> str:
        response = w.send(b_upload(w))
        assert response.status_code == 201, response.text
        return str(response.json()["attachment"]["id"])

    return chatted(w), str(w.once("uploaded", make))


def b_read_artifact(w: World) -> Call:
    s, artifact = uploaded(w)
    return Call("GET", f"/sessions/{sid(s)}/artifacts/{artifact}")


def b_delete_artifact(w: World) -> Call:
    s, artifact = uploaded(w)
    return Call("DELETE", f"/sessions/{sid(s)}/artifacts/{artifact}")


REWIND_PREVIEW = {
    "confirm": False,
    "expected_head_seq": 0,
    "expected_file_state": "",
    "force_file_keys": [],
}


def b_rewind_preview(w: World) -> Call:
    s = writer(w, "rewind-preview")
    return Call("POST", f"/sessions/{sid(s)}/turns/{last_user_seq(w, s)}/rewind", REWIND_PREVIEW)


def b_rewind_confirm(w: World) -> Call:
    s = writer(w, "rewind-confirm")
    path = f"/sessions/{sid(s)}/turns/{last_user_seq(w, s)}/rewind"
    preview = w.prep("POST", path, REWIND_PREVIEW)
    body = {
        "confirm": True,
        "expected_head_seq": preview["head_seq"],
        "expected_file_state": preview["file_state_token"],
        "force_file_keys": [],
    }
    return Call("POST", path, body)


def b_resolve_review(w: World) -> Call:
    s = main_session(w)
    review = w.prep("GET", f"/sessions/{sid(s)}/file-review")
    body = {
        "action": "keep",
        "expected_through_seq": review["through_seq"],
        "expected_file_state": review["file_state_token"],
        "force_file_keys": [],
    }
    return Call("POST", f"/sessions/{sid(s)}/file-review", body)


def b_compact(w: World) -> Call:
    s = chatted(w, "compact", turns=3)
    w.fake.push_completion(s["model"], reply("## Goal\nA summary of the chat."))
    return Call("POST", f"/sessions/{sid(s)}/compact")  # no body


def queued(w: World, key: str) -> tuple[Session, dict[str, Any]]:
    """An idle chat with one queued message (explicit enqueue never starts a turn)."""

    def make() -> tuple[Session, dict[str, Any]]:
        s = w.session()
        item = w.prep("POST", f"/sessions/{sid(s)}/queue", turn_body(f"later {key}"))
        return s, item

    s, item = w.once(f"queued:{key}", make)
    return dict(s), dict(item)


def b_enqueue(w: World) -> Call:
    s = w.session()
    return Call("POST", f"/sessions/{sid(s)}/queue", turn_body("queued message"))


def b_update_queued(w: World) -> Call:
    s, item = queued(w, "edit")
    return Call("PATCH", f"/sessions/{sid(s)}/queue/{item['id']}", {"message": "edited"})


def b_move_queued(w: World) -> Call:
    s, item = queued(w, "move")
    return Call("PATCH", f"/sessions/{sid(s)}/queue/{item['id']}", {"position": 0})


def b_delete_queued(w: World) -> Call:
    s, item = queued(w, "delete")
    return Call("DELETE", f"/sessions/{sid(s)}/queue/{item['id']}")


def b_dispatch_queued(w: World) -> Call:
    s, item = queued(w, "dispatch")
    w.push(s, answer("Dispatched."))
    return Call("POST", f"/sessions/{sid(s)}/queue/{item['id']}/dispatch")


def b_background_tool(w: World) -> Call:
    s = running_tool(w, "promote", "fg1")
    return Call("POST", f"/sessions/{sid(s)}/tools/fg1/background")


def b_reveal_tool(w: World) -> Call:
    s = running_tool(w, "reveal", "fg2")
    return Call("POST", f"/sessions/{sid(s)}/tools/fg2/reveal")


def b_cancel_turn(w: World) -> Call:
    return Call("POST", f"/sessions/{sid(running_tool(w, 'reveal', 'fg2'))}/cancel")


def b_cancel_tool(w: World) -> Call:
    return Call("POST", f"/sessions/{sid(chatted(w))}/tools/no-such-call/cancel")


def b_list_background(w: World) -> Call:
    s, _ = background_command(w)
    return Call("GET", f"/sessions/{sid(s)}/background-commands")


def b_get_background(w: World) -> Call:
    s, command = background_command(w)
    return Call("GET", f"/sessions/{sid(s)}/background-commands/{command}")


def b_stop_background(w: World) -> Call:
    s, command = background_command(w)
    return Call("POST", f"/sessions/{sid(s)}/background-commands/{command}/cancel")


def approval(w: World, key: str) -> tuple[Session, dict[str, Any]]:
    def make() -> tuple[Session, dict[str, Any]]:
        s = w.session("manual")
        script = tools(call("wa", "write", {"path": f"{key}.txt", "content": "x\n"}))
        return s, pending(w, s, "approval_request", script, answer("Done."))

    s, request = w.once(f"approval:{key}", make)
    return dict(s), dict(request)


def b_resolve_approval(w: World) -> Call:
    s, request = approval(w, "own")
    body = {"request_id": request["id"], "decision": "approved"}
    return Call("POST", f"/sessions/{sid(s)}/approvals/{request['id']}", body)


def b_resolve_approval_elsewhere(w: World) -> Call:
    _, request = approval(w, "other")
    other = chatted(w)
    body = {"request_id": request["id"], "decision": "approved"}
    return Call("POST", f"/sessions/{sid(other)}/approvals/{request['id']}", body)


QUESTION = {
    "id": "scope",
    "question": "Which scope?",
    "options": [{"label": "All", "recommended": True}, {"label": "Some"}],
    "allow_custom": True,
}


def question(w: World, key: str) -> tuple[Session, dict[str, Any]]:
    def make() -> tuple[Session, dict[str, Any]]:
        s = w.session()
        script = tools(call("ask", "ask_user", {"questions": [QUESTION]}))
        return s, pending(w, s, "question_requested", script, answer("Thanks."))

    s, batch = w.once(f"question:{key}", make)
    return dict(s), dict(batch)


def b_answer_questions(w: World) -> Call:
    s, batch = question(w, "answer")
    answers = [{"question_id": q["id"], "value": "All"} for q in batch["questions"]]
    return Call("POST", f"/sessions/{sid(s)}/questions/{batch['id']}/answer", {"answers": answers})


def b_cancel_questions(w: World) -> Call:
    s, batch = question(w, "cancel")
    return Call("POST", f"/sessions/{sid(s)}/questions/{batch['id']}/cancel")


def b_browser_result(w: World) -> Call:
    def make() -> tuple[Session, dict[str, Any]]:
        s = w.session()
        script = tools(call("b1", "browser_snapshot", {}))
        return s, pending(w, s, "browser_action_requested", script, answer("Seen."))

    s, request = w.once("browser", make)
    # browser.rs resolve_browser_action: every result field, unset ones as null.
    body = {
        "request_id": request["id"],
        "url": "https://example.com/",
        "title": "Example",
        "revision": 1,
        "observation_id": None,
        "snapshot": '- heading "Example" [ref=e1]',
        "screenshot_base64": None,
        "media_type": None,
        "code": None,
        "message": None,
        "pre_url": None,
        "post_url": None,
        "verified": None,
        "actual_text": None,
        "trace": None,
        "error": None,
    }
    return Call("POST", f"/sessions/{sid(s)}/browser-actions/{request['id']}", body)


def agent_parent(w: World) -> Session:
    return dict(w.once("agent_parent", lambda: w.session()))


def b_start_agent(w: World) -> Call:
    s = agent_parent(w)
    w.fake.push("helper-model", answer("The answer is 42."))
    body = {"task": "find the answer", "agent_ref": "helper"}
    return Call("POST", f"/sessions/{sid(s)}/agents", body)


def b_cancel_agent(w: World) -> Call:
    s = agent_parent(w)
    # Held at the fake until it stops (it opens every gate then).
    w.fake.push("holder-model", [wait(w.fake.gate()), *answer("late")])
    run = w.prep("POST", f"/sessions/{sid(s)}/agents", {"task": "slow", "agent_ref": "holder"})
    return Call("POST", f"/sessions/{sid(s)}/agents/{run['id']}/cancel")


def b_delete_session(w: World) -> Call:
    return Call("DELETE", f"/sessions/{sid(w.session())}")


# settings.rs ------------------------------------------------------------------------------


def b_create_connection(w: World) -> Call:
    return Call("POST", "/connections", form_payload(w, name="Desktop form"))


def b_create_video_connection(w: World) -> Call:
    body = form_payload(w, name="Video", type="video", video_protocol="seedance")
    return Call("POST", "/connections", body)


def video_protocol_kept(w: World, answer_: Any) -> list[str]:
    stored = answer_.get("video_protocol") if isinstance(answer_, dict) else None
    if stored != "seedance":
        return [f"ConnectionConfig.video_protocol: sent 'seedance', answered {stored!r}"]
    return []


def b_update_connection(w: World) -> Call:
    made = connection(w, "to-update")
    body = form_payload(w, name="Renamed", models=["fake-1"])
    del body["api_key"]  # no key typed: left out, the stored one stays
    body = {"id": made["id"], **body, "sort_order": made["sort_order"]}
    return Call("PATCH", f"/connections/{made['id']}", body)


def b_update_listed_connection(w: World) -> Call:
    # The listed connection sent back whole (read-only `id`, `has_api_key`, `models_cached`).
    made = connection(w, "to-echo")
    listed = next(c for c in w.prep("GET", "/connections") if c["id"] == made["id"])
    return Call("PATCH", f"/connections/{made['id']}", {**listed, "name": "Echoed"})


def b_delete_connection(w: World) -> Call:
    return Call("DELETE", f"/connections/{connection(w, 'to-delete')['id']}")


def b_update_default_models(w: World) -> Call:
    language = {"connection_id": w.connection_id, "model": "m-default"}
    unset = {"connection_id": "", "model": ""}
    body = {"language": language, "fast": language, "image": unset, "video": unset}
    return Call("PUT", "/settings/default-models", body)


REVIEW_SKILL = "global:review"


def b_update_hooks(w: World) -> Call:
    hook = {
        "name": "notify",
        "event": "Notification",
        "command": "true",
        "timeout": 10,
        "async": False,
        "enabled": True,
    }
    return Call("PUT", "/hooks", {"scope": "global", "project_id": "", "hooks": [hook]})


def command(w: World, key: str) -> dict[str, Any]:
    def make() -> dict[str, Any]:
        body = {"scope": "global", "name": f"cmd-{key}", "body": "Say hi to $ARGUMENTS"}
        return dict(w.prep("POST", "/commands", body))

    return dict(w.once(f"command:{key}", make))


def b_create_command(w: World) -> Call:
    body = {"scope": "global", "name": "greet", "body": "Greet $ARGUMENTS"}
    return Call("POST", "/commands", body)


def b_update_command(w: World) -> Call:
    made = command(w, "edit")
    body = {
        "scope": "global",
        "name": made["name"],
        "description": "Says hi",
        "body": "Say hello to $ARGUMENTS",
    }
    return Call("PATCH", f"/commands/{enc(made['ref'])}", body)


def b_delete_command(w: World) -> Call:
    made = command(w, "delete")
    return Call("DELETE", f"/commands/{enc(made['ref'])}?scope=global")


def b_execute_command(w: World) -> Call:
    made = command(w, "run")
    s = w.session()
    w.push(s, answer("Hi there."))
    body = {"args": "there", "workspace_files": []}
    return Call("POST", f"/sessions/{sid(s)}/commands/{enc(made['name'])}", body)


def planned(w: World, key: str) -> tuple[Session, dict[str, Any]]:
    """A chat whose `/plan` turn has answered its plan: the workflow is ready."""

    def make() -> tuple[Session, dict[str, Any]]:
        s = w.session()
        w.push(s, answer(PLAN_TEXT))
        mark = w.stream(sid(s)).mark()
        body = {"args": "write the notes", "workspace_files": []}
        run = w.prep("POST", f"/sessions/{sid(s)}/commands/plan", body)
        w.stream(sid(s)).kind("turn_complete", mark)
        w.idle(s)
        return s, dict(run["workflow"])

    s, workflow = w.once(f"plan:{key}", make)
    return dict(s), dict(workflow)


def b_execute_plan(w: World) -> Call:
    s = w.session()
    w.push(s, answer(PLAN_TEXT))
    return Call(
        "POST", f"/sessions/{sid(s)}/commands/plan", {"args": "a plan", "workspace_files": []}
    )


def b_approve_workflow(w: World) -> Call:
    s, workflow = planned(w, "approve")
    w.push(s, answer("Executed."))
    return Call("POST", f"/sessions/{sid(s)}/workflow/{workflow['id']}/approve")


def b_close_workflow(w: World) -> Call:
    s, workflow = planned(w, "close")
    return Call("DELETE", f"/sessions/{sid(s)}/workflow/{workflow['id']}")


def b_register_project(w: World) -> Call:
    place = w.root / "registered"
    place.mkdir(exist_ok=True)
    return Call("POST", "/projects", {"path": str(place), "name": "Registered"})


def extra_project(w: World, key: str) -> dict[str, Any]:
    def make() -> dict[str, Any]:
        place = w.root / f"project-{key}"
        place.mkdir()
        return dict(w.prep("POST", "/projects", {"path": str(place), "name": key}))

    return dict(w.once(f"project:{key}", make))


def context_item(w: World, kind: str, key: str) -> dict[str, Any]:
    def make() -> dict[str, Any]:
        return dict(w.prep("POST", f"/{kind}", {"scope": "global", "content": f"{kind} {key}"}))

    return dict(w.once(f"{kind}:{key}", make))


def b_create_rule(w: World) -> Call:
    body = {
        "scope": "global",
        "content": "Answer briefly.",
        "name": "brief",
        "description": "Keep answers short",
        "trigger": "always",
    }
    return Call("POST", "/rules", body)


def b_create_project_rule(w: World) -> Call:
    body = {
        "scope": "project",
        "project_id": project(w)["id"],
        "content": "Use tabs.",
        "name": "tabs",
        "trigger": "glob",
        "globs": ["*.go"],
    }
    return Call("POST", "/rules", body)


def b_update_rule(w: World) -> Call:
    item = context_item(w, "rules", "edit")
    body = {"content": "Answer very briefly.", "name": "brief", "trigger": "always"}
    return Call("PATCH", f"/rules/{item['id']}", body)


def b_create_memory(w: World) -> Call:
    return Call("POST", "/memories", {"scope": "global", "content": "The user likes tea."})


def b_update_memory(w: World) -> Call:
    item = context_item(w, "memories", "edit")
    return Call("PATCH", f"/memories/{item['id']}", {"content": "The user likes coffee."})


def web_search_settings(w: World) -> dict[str, Any]:
    provider = {
        "id": "bing",
        "kind": "bing",
        "name": "Bing",
        "enabled": True,
        "api_key": "bing-key-" + uuid.uuid4().hex,
        "endpoint": f"{w.stash['outside']}/bing",
    }
    return {"enabled": True, "default_provider": "bing", "providers": [provider]}


def b_update_web_search(w: World) -> Call:
    return Call("PUT", "/web-search", web_search_settings(w))


def b_update_web_search_echo(w: World) -> Call:
    # WebSearchView.vue saves the settings it shows: the provider with `has_api_key`, no key.
    shown = w.prep("PUT", "/web-search", web_search_settings(w))
    return Call("PUT", "/web-search", shown)


def b_test_web_search(w: World) -> Call:
    w.once("web-search", lambda: w.prep("PUT", "/web-search", web_search_settings(w)))
    return Call("POST", "/web-search/test", {"provider_id": "bing", "query": "foya"})


def mcp_server_config() -> dict[str, Any]:
    return {
        "id": "notes",
        "name": "Notes",
        "enabled": True,
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(MCP_SERVER), "stdio"],
        "env": {},
    }


def b_update_mcp(w: World) -> Call:
    return Call("PUT", "/mcp", {"version": 1, "servers": [mcp_server_config()]})


def b_install_registry_server(w: World) -> Call:
    # McpView.vue: an installable registry item's `config` added to the servers and saved.
    found = w.prep("GET", "/mcp/registry?search=notes")
    item = next(s for s in found if s["installable"])
    current = w.prep("GET", "/mcp")
    servers = [*current.get("servers", []), {**item["config"], "enabled": False}]
    return Call("PUT", "/mcp", {"version": current.get("version", 1), "servers": servers})


def mcp_lists_tools(w: World, answer_: Any) -> list[str]:
    wait_until(
        lambda: any(
            s["id"] == "notes" and s["state"] == "connected" for s in w.prep("GET", "/mcp/status")
        ),
        "the MCP server to connect",
    )
    return []


def installed_plugin(w: World, name: str) -> dict[str, Any]:
    def make() -> dict[str, Any]:
        place = plugin_dir(w.root / "plugins", name)
        return dict(w.prep("POST", "/plugins/install", {"source": str(place), "replace": False}))

    return dict(w.once(f"plugin:{name}", make))


def b_install_plugin(w: World) -> Call:
    place = plugin_dir(w.root / "plugins", "alpha")
    return Call("POST", "/plugins/install", {"source": str(place), "replace": False})


def b_enable_plugin(w: World) -> Call:
    name = installed_plugin(w, "beta")["name"]
    return Call("PATCH", f"/plugins/{enc(name)}", {"enabled": False})


def b_remove_plugin(w: World) -> Call:
    return Call("DELETE", f"/plugins/{enc(installed_plugin(w, 'gamma')['name'])}")


def b_add_marketplace(w: World) -> Call:
    market = w.root / "market2"
    (market / ".claude-plugin").mkdir(parents=True)
    plugin_dir(market / "plugins", "zeta")
    catalog = {
        "name": "bazaar",
        "owner": {"name": "Tester"},
        "plugins": [{"name": "zeta", "source": "./plugins/zeta"}],
    }
    (market / ".claude-plugin" / "marketplace.json").write_text(json.dumps(catalog))
    return Call(
        "POST", "/plugin-marketplaces", {"source": str(market), "ref": "", "sparse_paths": []}
    )


def shop(w: World) -> str:
    return enc(marketplace(w)["name"])


# canvas.rs -------------------------------------------------------------------------------


def b_create_canvas(w: World) -> Call:
    # studio.ts createProject(): list_canvases / create_canvas pass no session or project.
    body = {"session_id": "", "project_id": "", "title": "Creative project 1"}
    return Call("POST", "/canvases", body)


def b_update_canvas(w: World) -> Call:
    doc = canvas(w, "edit")
    return Call(
        "PATCH",
        f"/canvases/{doc['id']}",
        {"expected_revision": doc["revision"], "title": "Renamed"},
    )


def b_update_canvas_board(w: World) -> Call:
    doc = canvas(w, "board")
    body = {
        "expected_revision": doc["revision"],
        "nodes": [node("n1", "text", text="hello"), node("n2", "image", title="empty")],
        "edges": [{"id": "e1", "from_node_id": "n1", "to_node_id": "n2", "kind": "reference"}],
        "viewport": {"x": 10, "y": 20, "zoom": 1.5},
        "background": "grid",
    }
    return Call("PATCH", f"/canvases/{doc['id']}", body)


def b_upload_asset(w: World) -> Call:
    doc = canvas(w, "assets")
    data = multipart("foya-canvas-asset-boundary", "photo.png", "image/png", png())
    boundary = "multipart/form-data; boundary=foya-canvas-asset-boundary"
    return Call("POST", f"/canvases/{doc['id']}/assets", raw=data, content_type=boundary)


def b_read_asset(w: World) -> Call:
    def make() -> tuple[str, str]:
        response = w.send(b_upload_asset(w))
        assert response.status_code == 201, response.text
        body = response.json()
        return body["canvas"]["id"], body["asset"]["id"]

    canvas_id, asset = w.once("asset", make)
    return Call("GET", f"/canvases/{canvas_id}/assets/{asset}")


def b_generate_image(w: World) -> Call:
    conn = connection(w, "image", name="Images", type="image", models=["img-model"])
    w.fake.push_image("img-model", image(png(16, 16)))
    doc = generation_canvas(w, "image", conn["id"], "img-model")
    w.stash["image_canvas"] = doc["id"]
    body = {
        "expected_revision": doc["revision"],
        "config_node_id": "gen",
        "output_node_id": "out",
        "connection_id": conn["id"],
    }
    return Call("POST", f"/canvases/{doc['id']}/generate-image", body)


def b_generate_video(w: World) -> Call:
    video: FakeVideoProvider = w.stash["video"]
    video.script("vid-model", VideoScript())
    conn = connection(
        w,
        "video",
        name="Videos",
        type="video",
        video_protocol="seedance",
        models=["vid-model"],
        base_url=f"{video.base_url}/v1",  # the video fake (tests/support/fake_video_provider.py)
        api_key=VIDEO_KEY,
    )
    doc = generation_canvas(w, "video", conn["id"], "vid-model")
    body = {
        "expected_revision": doc["revision"],
        "config_node_id": "gen",
        "output_node_id": "out",
        "connection_id": conn["id"],
    }
    return Call("POST", f"/canvases/{doc['id']}/generate-video", body)


def b_delete_canvas(w: World) -> Call:
    return Call("DELETE", f"/canvases/{canvas(w, 'doomed')['id']}")


# terminal.rs -----------------------------------------------------------------------------


def terminal(w: World) -> tuple[Session, dict[str, Any]]:
    def make() -> tuple[Session, dict[str, Any]]:
        s = w.session()
        return s, dict(w.prep("POST", f"/sessions/{sid(s)}/terminals", {"cols": 80, "rows": 24}))

    s, term = w.once("terminal", make)
    return dict(s), dict(term)


def term_path(w: World, tail: str = "") -> str:
    s, term = terminal(w)
    return f"/sessions/{sid(s)}/terminals/{term['ref']}{tail}"


def b_start_terminal(w: World) -> Call:
    return Call("POST", f"/sessions/{sid(chatted(w))}/terminals", {"cols": 80, "rows": 24})


# workspace (Go workspace_handlers.go; the desktop's workspace panel) ------------------------


def ws(w: World, tail: str) -> str:
    return f"/sessions/{sid(main_session(w))}/workspace{tail}"


def scratch(w: World) -> Session:
    return dict(w.once("scratch", lambda: w.session()))


def b_create_entry(w: World, path: str, kind: str) -> Call:
    return Call(
        "POST", f"/sessions/{sid(scratch(w))}/workspace/entries", {"path": path, "kind": kind}
    )


def b_rename_entry(w: World) -> Call:
    w.once("entry:draft", lambda: w.send(b_create_entry(w, "draft.md", "file")))
    body = {"path": "draft.md", "new_name": "final.md"}
    return Call("PATCH", f"/sessions/{sid(scratch(w))}/workspace/entries", body)


def b_delete_entry(w: World) -> Call:
    w.once("entry:gone", lambda: w.send(b_create_entry(w, "gone.txt", "file")))
    return Call("DELETE", f"/sessions/{sid(scratch(w))}/workspace/entries?path=gone.txt")


def automation_input(w: World, name: str) -> dict[str, Any]:
    """AutomationInput as the automations form sends it."""
    return {
        "name": name,
        "prompt": "Summarise the news",
        "cron": "0 9 * * *",
        "timezone": "UTC",
        "enabled": False,
        "connection_id": w.connection_id,
        "model": "m-automation",
        "approval_mode": "auto",
    }


def automation(w: World, key: str) -> dict[str, Any]:
    return dict(
        w.once(
            f"automation:{key}", lambda: w.prep("POST", "/automations", automation_input(w, key))
        )
    )


def b_run_automation(w: World) -> Call:
    made = automation(w, "run")
    w.fake.push("m-automation", answer("Here is the news."))
    return Call("POST", f"/automations/{made['id']}/run")


# ---------------------------------------------------------------------------------- the table

BYTES = Nullable(ANY)  # a binary answer (artifacts, assets): checked to be the PNG uploaded


@dataclass(frozen=True)
class Case:
    """One desktop operation: where it comes from, the request, Foya's status, the answer's
    interface (None: no body)."""

    name: str  # pytest id
    source: str  # the desktop file that builds the request
    function: str  # the api.ts function (and host command) it is
    build: Callable[[World], Call]
    status: int
    shape: Type | None
    retry: tuple[str, ...] = ()  # error codes the caller retries on, as the desktop does
    also: Callable[[World, Any], list[str]] | None = None


S, ST, CV, TM = "sessions.rs", "settings.rs", "canvas.rs", "terminal.rs"
CONV, VIEWS = "stores/conversation.ts", "views/settings"
GET = "GET"


def get(path: str | Callable[[World], str]) -> Callable[[World], Call]:
    return lambda w: Call(GET, path(w) if callable(path) else path)


# fmt: off
CASES: list[Case] = [
    # sessions and chats
    Case("create_session", f"{CONV} ensureSession / {S}", "createSession", b_create_session, 200,
        SESSION),
    Case("create_session_project", f"{CONV} ensureSession / {S}", "createSession",
        b_create_project_session, 200, SESSION),
    Case("list_sessions", f"stores/session.ts / {S}", "listSessions", get("/sessions"), 200,
        ArrayOf(SESSION)),
    Case("update_session_title", f"stores/session.ts renameSession / {S}", "updateSession",
        lambda w: Call("PATCH", f"/sessions/{sid(chatted(w))}", {"title": "Renamed chat"}), 200,
        SESSION),
    Case("update_session_pin", f"stores/session.ts pinSession / {S}", "updateSession",
        lambda w: Call("PATCH", f"/sessions/{sid(chatted(w))}", {"pinned": True}), 200, SESSION),
    Case("update_session_mode", f"composer approval menu / {S}", "updateSession",
        lambda w: Call("PATCH", f"/sessions/{sid(chatted(w))}", {"approval_mode": "auto",
        "reasoning_effort": "high"}),
        200,
        SESSION,
    ),
    Case("fork_session", f"{CONV} forkSession / {S}", "forkSession", b_fork, 200, SESSION),
    Case("fork_session_through", f"{CONV} forkSession(throughSeq) / {S}", "forkSession",
        b_fork_through, 200, SESSION),
    Case("list_child_sessions", f"{CONV} / {S}", "listChildSessions",
        get(lambda w: f"/sessions/{sid(chatted(w))}/children"), 200, ArrayOf(SESSION)),
    Case("load_history", f"{CONV} select / {S}", "loadHistory",
        get(lambda w: f"/sessions/{sid(main_session(w))}/history"), 200, ArrayOf(CHAT_MESSAGE)),
    Case("load_usage", f"{CONV} select / {S}", "loadUsage",
        get(lambda w: f"/sessions/{sid(chatted(w))}/usage"), 200, Nullable(CONTEXT_USAGE)),
    Case("load_usage_statistics_7", f"{VIEWS}/UsageView.vue / {S}", "loadUsageStatistics",
        get("/usage?days=7"), 200, USAGE_STATISTICS),
    Case("load_usage_statistics_30", f"{VIEWS}/UsageView.vue / {S}", "loadUsageStatistics",
        get("/usage?days=30"), 200, USAGE_STATISTICS),
    Case("submit_turn", f"{CONV} send / {S}", "submitTurn", b_submit, 200, SUBMIT_TURN_RESULT),
    Case("submit_turn_workspace_files", f"{CONV} send(workspaceFiles) / {S}", "submitTurn",
        b_submit_files, 200, SUBMIT_TURN_RESULT),
    Case("upload_image", f"{CONV} send(files) / {S}", "uploadImage", b_upload, 201, UPLOAD_RESULT),
    Case("read_artifact", f"components (attachment preview) / {S}", "readArtifact", b_read_artifact,
        200, BYTES),
    Case("delete_artifact", f"{CONV} send (failed upload) / {S}", "deleteArtifact",
        b_delete_artifact, 204, None),
    # rewind and file review
    Case("rewind_turn_preview", f"{CONV} rewindSentMessage / {S}", "rewindTurn", b_rewind_preview,
        200, REWIND_RESULT),
    Case("rewind_turn_confirm", f"{CONV} confirmHistoryRewind / {S}", "rewindTurn",
        b_rewind_confirm, 200, REWIND_RESULT),
    Case("load_file_review", f"{CONV} refreshFileReview / {S}", "loadFileReview",
        get(lambda w: f"/sessions/{sid(main_session(w))}/file-review"), 200, FILE_REVIEW),
    Case("resolve_file_review", f"{CONV} resolveActiveFileReview / {S}", "resolveFileReview",
        b_resolve_review, 200, ANY),
    Case("compact_session", f"{CONV} send('/compact') / {S}", "compactSession", b_compact, 200,
        COMPACT_RESULT, retry=("session_busy",)),
    # queue
    Case("enqueue_message", f"composer (queue) / {S}", "enqueueMessage", b_enqueue, 201,
        QUEUED_MESSAGE),
    Case("list_queued_messages", f"{CONV} select / {S}", "listQueuedMessages",
        get(lambda w: f"/sessions/{sid(queued(w, 'edit')[0])}/queue"), 200,
        ArrayOf(QUEUED_MESSAGE)),
    Case("update_queued_message", f"{CONV} editQueuedMessage / {S}", "updateQueuedMessage",
        b_update_queued, 200, QUEUED_MESSAGE),
    Case("move_queued_message", f"{CONV} reorderQueuedMessage / {S}", "updateQueuedMessage",
        b_move_queued, 200, QUEUED_MESSAGE),
    Case("delete_queued_message", f"{CONV} deleteQueuedMessage / {S}", "deleteQueuedMessage",
        b_delete_queued, 204, None),
    Case("dispatch_queued_message", f"{CONV} dispatchQueuedMessage / {S}", "dispatchQueuedMessage",
        b_dispatch_queued, 200, QUEUED_MESSAGE),
    # tools and background commands
    Case("background_tool", f"{CONV} backgroundTool / {S}", "backgroundTool", b_background_tool,
        200, BACKGROUND_COMMAND, retry=("tool_not_running",)),
    Case("reveal_tool_command", f"{CONV} revealToolCommand / {S}", "revealToolCommand",
        b_reveal_tool, 200, BACKGROUND_COMMAND, retry=("tool_not_running",)),
    Case("cancel_turn", f"{CONV} cancelTurn / {S}", "cancelTurn", b_cancel_turn, 204, None),
    Case("cancel_tool_not_running", f"{CONV} cancelTool / {S}", "cancelTool", b_cancel_tool, 409,
        ERROR),
    Case("list_background_commands", f"{CONV} select / {S}", "listBackgroundCommands",
        b_list_background, 200, ArrayOf(BACKGROUND_COMMAND)),
    Case("get_background_command", f"components (command panel) / {S}", "getBackgroundCommand",
        b_get_background, 200, BACKGROUND_COMMAND),
    Case("stop_background_command", f"{CONV} stopBackgroundCommand / {S}", "stopBackgroundCommand",
        b_stop_background, 200, BACKGROUND_COMMAND),
    # approvals, questions, browser
    Case("resolve_approval", f"stores/interaction.ts resolveApproval / {S}", "resolveApproval",
        b_resolve_approval, 204, None),
    Case("resolve_approval_other_session",
        f"stores/interaction.ts resolveApproval (another chat's id) / {S}", "resolveApproval",
        b_resolve_approval_elsewhere, 404, ERROR),
    Case("answer_questions", f"stores/interaction.ts answerQuestions / {S}", "answerQuestions",
        b_answer_questions, 204, None),
    Case("cancel_questions", f"stores/interaction.ts cancelQuestions / {S}", "cancelQuestions",
        b_cancel_questions, 204, None),
    Case("resolve_browser_action", "browser.rs resolve_browser_action", "resolveBrowserAction",
        b_browser_result, 204, None),
    # sub-agents
    Case("start_agent", f"components (agent panel) / {S}", "startAgent", b_start_agent, 202,
        AGENT_RUN),
    Case("list_agent_runs", f"{CONV} select / {S}", "listAgentRuns",
        get(lambda w: f"/sessions/{sid(agent_parent(w))}/agents"), 200, ArrayOf(AGENT_RUN)),
    Case("load_agent_budget", f"{CONV} select / {S}", "loadAgentBudget",
        get(lambda w: f"/sessions/{sid(agent_parent(w))}/agent-budget"), 200, AGENT_BUDGET),
    Case("cancel_agent", f"components (agent panel) / {S}", "cancelAgent", b_cancel_agent, 204,
        None),
    # workspace (the session's files panel; Go workspace_handlers.go)
    Case("workspace_info", "workspace panel / workspace_handlers.go", "sessionWorkspace",
        get(lambda w: ws(w, "")), 200, SESSION_WORKSPACE),
    Case("workspace_info_project", "workspace panel / workspace_handlers.go", "sessionWorkspace",
        get(lambda w: f"/sessions/{sid(project_session(w))}/workspace"), 200, SESSION_WORKSPACE),
    Case("workspace_files", "workspace panel / workspace_handlers.go", "listWorkspaceFiles",
        get(lambda w: ws(w, "/files")), 200, ArrayOf(WORKSPACE_ENTRY)),
    Case("workspace_file", "workspace panel / workspace_handlers.go", "readWorkspaceFile",
        get(lambda w: ws(w, "/file?path=notes.txt")), 200, STR),
    Case("workspace_create_file", "workspace panel / workspace_handlers.go", "createWorkspaceEntry",
        lambda w: b_create_entry(w, "new.md", "file"), 201, STR),
    Case("workspace_create_directory", "workspace panel / workspace_handlers.go",
        "createWorkspaceEntry", lambda w: b_create_entry(w, "docs", "directory"), 201, STR),
    Case("workspace_rename_entry", "workspace panel / workspace_handlers.go",
        "renameWorkspaceEntry", b_rename_entry, 200, STR),
    Case("workspace_delete_entry", "workspace panel / workspace_handlers.go",
        "deleteWorkspaceEntry", b_delete_entry, 204, None),
    Case("workspace_path", "workspace panel / workspace_handlers.go", "resolveWorkspacePath",
        get(lambda w: ws(w, "/path?path=notes.txt")), 200, STR),
    # connections and models
    Case("list_connections", f"{VIEWS}/ConnectionsView.vue loadConnections / {ST}",
        "listConnections", get("/connections"), 200, ArrayOf(CONNECTION)),
    Case("create_connection", f"{VIEWS}/ConnectionsView.vue formPayload / {ST}", "createConnection",
        b_create_connection, 201, CONNECTION),
    Case("create_video_connection", f"{VIEWS}/ConnectionsView.vue formPayload (video) / {ST}",
        "createConnection", b_create_video_connection, 201, CONNECTION, also=video_protocol_kept),
    Case("update_connection", f"{VIEWS}/ConnectionsView.vue save / {ST}", "updateConnection",
        b_update_connection, 200, CONNECTION),
    Case("update_connection_echo",
        f"{VIEWS}/ConnectionsView.vue (listed connection sent back) / {ST}", "updateConnection",
        b_update_listed_connection, 200, CONNECTION),
    Case("list_connection_models", f"{VIEWS}/ConnectionsView.vue checkConnection / {ST}",
        "listConnectionModels", get(lambda w: f"/connections/{w.connection_id}/models"), 200,
        MODEL_CATALOG),
    Case("list_connection_models_refresh",
        f"{VIEWS}/ConnectionsView.vue checkConnection(force) / {ST}", "listConnectionModels",
        get(lambda w: f"/connections/{w.connection_id}/models?refresh=true"), 200, MODEL_CATALOG),
    Case("delete_connection", f"{VIEWS}/ConnectionsView.vue / {ST}", "deleteConnection",
        b_delete_connection, 204, None),
    Case("get_default_models", f"{VIEWS}/DefaultModelsView.vue / {ST}", "getDefaultModels",
        get("/settings/default-models"), 200, DEFAULT_MODELS),
    Case("update_default_models", f"{VIEWS}/DefaultModelsView.vue / {ST}", "updateDefaultModels",
        b_update_default_models, 200, DEFAULT_MODELS),
    # projects
    Case("register_project", f"stores/session.ts registerProject / {ST}", "registerProject",
        b_register_project, 201, PROJECT),
    Case("list_projects", f"stores/session.ts refreshProjects / {ST}", "listProjects",
        lambda w: (project(w), Call(GET, "/projects"))[1], 200, ArrayOf(PROJECT)),
    Case("update_project_name", f"layouts/chat sidebar / {ST}", "updateProject",
        lambda w: Call("PATCH", f"/projects/{extra_project(w, 'rename')['id']}",
        {"name": "Renamed"}),
        200,
        PROJECT,
    ),
    Case("update_project_pin", f"layouts/chat sidebar / {ST}", "updateProject",
        lambda w: Call("PATCH", f"/projects/{extra_project(w, 'pin')['id']}", {"pinned": True}),
        200, PROJECT),
    Case("delete_project", f"layouts/chat sidebar / {ST}", "deleteProject", lambda w: Call("DELETE",
        f"/projects/{extra_project(w, 'gone')['id']}"), 204, None),
    # skills and agents
    Case("list_skills", f"{VIEWS}/SkillsView.vue / {ST}", "listSkills", get("/skills?all=true"),
        200, ArrayOf(SKILL)),
    Case("list_available_skills", f"composer skill picker / {ST}", "listAvailableSkills",
        get("/skills?invocable=true"), 200, ArrayOf(SKILL)),
    Case("list_available_project_skills", f"composer skill picker / {ST}", "listAvailableSkills",
        get(lambda w: f"/projects/{enc(project(w)['id'])}/skills?invocable=true"), 200,
        ArrayOf(SKILL)),
    Case("list_project_skills", f"{VIEWS}/SkillsView.vue / {ST}", "listProjectSkills",
        get(lambda w: f"/projects/{enc(project(w)['id'])}/skills?all=true"), 200, ArrayOf(SKILL)),
    Case("set_skill_pinned", f"{VIEWS}/SkillsView.vue / {ST}", "setSkillPinned",
        lambda w: Call("PATCH", f"/skills/{enc(REVIEW_SKILL)}/pinned", {"pinned": True}), 204,
        None),
    Case("set_skill_enabled", f"{VIEWS}/SkillsView.vue / {ST}", "setSkillEnabled",
        lambda w: Call("PATCH", f"/skills/{enc(REVIEW_SKILL)}", {"enabled": False}), 204, None),
    Case("list_agents", f"{VIEWS}/AgentsView.vue / {ST}", "listAgents", get("/agents"), 200,
        ArrayOf(AGENT)),
    Case("list_project_agents", f"{VIEWS}/AgentsView.vue / {ST}", "listProjectAgents",
        get(lambda w: f"/projects/{enc(project(w)['id'])}/agents"), 200, ArrayOf(AGENT)),
    Case("get_agent_limits", f"{VIEWS}/AgentsView.vue / {ST}", "getAgentLimits",
        get("/settings/agent-limits"), 200, AGENT_LIMITS),
    Case("update_agent_limits", f"{VIEWS}/AgentsView.vue / {ST}", "updateAgentLimits",
        lambda w: Call("PUT", "/settings/agent-limits", {"max_global_concurrency": 4,
        "max_per_root": 4, "max_tree_tokens": 0}),
        200,
        AGENT_LIMITS,
    ),
    # rules, memories, memory settings
    Case("list_rules", f"{VIEWS}/RulesView.vue / {ST}", "listContextItems",
        get("/rules?scope=global"), 200, ArrayOf(CONTEXT_ITEM)),
    Case("list_project_rules", f"{VIEWS}/RulesView.vue / {ST}", "listContextItems",
        get(lambda w: f"/rules?scope=project&project_id={enc(project(w)['id'])}"), 200,
        ArrayOf(CONTEXT_ITEM)),
    Case("create_rule", f"{VIEWS}/RulesView.vue / {ST}", "createContextItem", b_create_rule, 201,
        CONTEXT_ITEM),
    Case("create_project_rule", f"{VIEWS}/RulesView.vue / {ST}", "createContextItem",
        b_create_project_rule, 201, CONTEXT_ITEM),
    Case("update_rule", f"{VIEWS}/RulesView.vue / {ST}", "updateContextItem", b_update_rule, 200,
        CONTEXT_ITEM),
    Case("delete_rule", f"{VIEWS}/RulesView.vue / {ST}", "deleteContextItem",
        lambda w: Call("DELETE", f"/rules/{context_item(w, 'rules', 'gone')['id']}"), 204, None),
    Case("list_memories", f"{VIEWS}/MemoryView.vue / {ST}", "listContextItems",
        get("/memories?scope=global"), 200, ArrayOf(CONTEXT_ITEM)),
    Case("create_memory", f"{VIEWS}/MemoryView.vue / {ST}", "createContextItem", b_create_memory,
        201, CONTEXT_ITEM),
    Case("update_memory", f"{VIEWS}/MemoryView.vue / {ST}", "updateContextItem", b_update_memory,
        200, CONTEXT_ITEM),
    Case("delete_memory", f"{VIEWS}/MemoryView.vue / {ST}", "deleteContextItem",
        lambda w: Call("DELETE", f"/memories/{context_item(w, 'memories', 'gone')['id']}"), 204,
        None),
    Case("get_memory_settings", f"{VIEWS}/MemoryView.vue / {ST}", "getMemorySettings",
        get("/settings/memory"), 200, MEMORY_SETTINGS),
    Case("update_memory_settings", f"{VIEWS}/MemoryView.vue / {ST}", "updateMemorySettings",
        lambda w: Call("PUT", "/settings/memory", {"enabled": True}), 200, MEMORY_SETTINGS),
    # hooks, commands, workflows
    Case("get_hooks", f"{VIEWS}/HooksView.vue / {ST}", "getHooks", get("/hooks?scope=global"), 200,
        ArrayOf(HOOK)),
    Case("update_hooks", f"{VIEWS}/HooksView.vue / {ST}", "updateHooks", b_update_hooks, 200,
        ArrayOf(HOOK)),
    Case("list_commands", f"{VIEWS}/CommandsView.vue / {ST}", "listCommands",
        get("/commands?scope=global"), 200, ArrayOf(COMMAND)),
    Case("create_command", f"{VIEWS}/CommandsView.vue / {ST}", "createCommand", b_create_command,
        201, COMMAND),
    Case("update_command", f"{VIEWS}/CommandsView.vue / {ST}", "updateCommand", b_update_command,
        200, COMMAND),
    Case("delete_command", f"{VIEWS}/CommandsView.vue / {ST}", "deleteCommand", b_delete_command,
        204, None),
    Case("list_session_commands", f"composer command picker / {ST}", "listSessionCommands",
        get(lambda w: f"/sessions/{sid(chatted(w))}/commands"), 200, ArrayOf(COMMAND)),
    Case("execute_command", f"composer / {ST}", "executeCommand", b_execute_command, 200,
        COMMAND_EXECUTION),
    Case("execute_plan_command", f"composer (/plan) / {ST}", "executeCommand", b_execute_plan, 200,
        COMMAND_EXECUTION),
    Case("get_workflow", f"{CONV} select / {ST}", "getWorkflow",
        get(lambda w: f"/sessions/{sid(planned(w, 'approve')[0])}/workflow"), 200,
        Nullable(WORKFLOW)),
    Case("get_workflow_none", f"{CONV} select / {ST}", "getWorkflow",
        get(lambda w: f"/sessions/{sid(chatted(w))}/workflow"), 200, Nullable(WORKFLOW)),
    Case("approve_workflow", f"{CONV} approveWorkflow / {ST}", "approveWorkflow",
        b_approve_workflow, 200, WORKFLOW_APPROVAL),
    Case("close_workflow", f"{CONV} closeWorkflow / {ST}", "closeWorkflow", b_close_workflow, 200,
        WORKFLOW),
    # automations
    Case("list_automations", f"automations view / {ST}", "listAutomations", get("/automations"),
        200, ArrayOf(AUTOMATION)),
    Case("create_automation", f"automations view / {ST}", "createAutomation", lambda w: Call("POST",
        "/automations", automation_input(w, "Morning")), 201, AUTOMATION),
    Case("update_automation", f"automations view / {ST}", "updateAutomation", lambda w: Call("PUT",
        f"/automations/{automation(w, 'edit')['id']}", automation_input(w, "Edited")),
        200,
        AUTOMATION,
    ),
    Case("run_automation", f"automations view / {ST}", "runAutomation", b_run_automation, 202,
        AUTOMATION),
    Case("delete_automation", f"automations view / {ST}", "deleteAutomation",
        lambda w: Call("DELETE", f"/automations/{automation(w, 'gone')['id']}"), 204, None),
    # web search
    Case("get_web_search_settings", f"{VIEWS}/WebSearchView.vue / {ST}", "getWebSearchSettings",
        get("/web-search"), 200, WEB_SEARCH_SETTINGS),
    Case("update_web_search_settings", f"{VIEWS}/WebSearchView.vue / {ST}",
        "updateWebSearchSettings", b_update_web_search, 200, WEB_SEARCH_SETTINGS),
    Case("update_web_search_settings_echo",
        f"{VIEWS}/WebSearchView.vue (shown settings saved) / {ST}", "updateWebSearchSettings",
        b_update_web_search_echo, 200, WEB_SEARCH_SETTINGS),
    Case("test_web_search", f"{VIEWS}/WebSearchView.vue / {ST}", "testWebSearch", b_test_web_search,
        200, ArrayOf(WEB_SEARCH_RESULT)),
    # MCP
    Case("get_mcp_config", f"{VIEWS}/McpView.vue / lib.rs", "getMcpConfig", get("/mcp"), 200,
        MCP_CONFIG),
    Case("update_mcp_config", f"{VIEWS}/McpView.vue / lib.rs", "updateMcpConfig", b_update_mcp, 200,
        MCP_CONFIG, also=mcp_lists_tools),
    Case("get_mcp_status", f"{VIEWS}/McpView.vue / lib.rs", "getMcpStatus", get("/mcp/status"), 200,
        ArrayOf(MCP_STATUS)),
    Case("search_mcp_registry", f"{VIEWS}/McpView.vue / lib.rs", "searchMcpRegistry",
        get("/mcp/registry?search=notes"), 200, ArrayOf(MCP_REGISTRY_SERVER)),
    Case("install_mcp_registry_server", f"{VIEWS}/McpView.vue (install from registry) / lib.rs",
        "updateMcpConfig", b_install_registry_server, 200, MCP_CONFIG),
    # plugins and marketplaces (local directories)
    Case("list_plugins", f"plugins view / {ST}", "listPlugins", get("/plugins"), 200,
        ArrayOf(PLUGIN)),
    Case("install_plugin", f"plugins view / {ST}", "installPlugin", b_install_plugin, 201, PLUGIN),
    Case("set_plugin_enabled", f"plugins view / {ST}", "setPluginEnabled", b_enable_plugin, 200,
        ArrayOf(PLUGIN)),
    Case("remove_plugin", f"plugins view / {ST}", "removePlugin", b_remove_plugin, 204, None),
    Case("add_plugin_marketplace", f"plugins view / {ST}", "addPluginMarketplace",
        b_add_marketplace, 201, MARKETPLACE),
    Case("list_plugin_marketplaces", f"plugins view / {ST}", "listPluginMarketplaces",
        lambda w: (marketplace(w), Call(GET, "/plugin-marketplaces"))[1], 200,
        ArrayOf(MARKETPLACE)),
    Case("browse_plugin_marketplace", f"plugins view / {ST}", "browsePluginMarketplace",
        get(lambda w: f"/plugin-marketplaces/{shop(w)}"), 200, MARKETPLACE_CATALOG),
    Case("refresh_plugin_marketplace", f"plugins view / {ST}", "refreshPluginMarketplace",
        lambda w: Call("POST", f"/plugin-marketplaces/{shop(w)}/refresh", {}), 200, MARKETPLACE),
    Case("preview_marketplace_plugin", f"plugins view / {ST}", "previewMarketplacePlugin",
        get(lambda w: f"/plugin-marketplaces/{shop(w)}/plugins/delta"), 200, MARKETPLACE_PREVIEW),
    Case("install_marketplace_plugin", f"plugins view / {ST}", "installMarketplacePlugin",
        lambda w: Call("POST", f"/plugin-marketplaces/{shop(w)}/plugins/delta/install",
        {"replace": False}),
        201,
        PLUGIN,
    ),
    Case("disable_plugin_marketplace", f"plugins view / {ST}", "setPluginMarketplaceEnabled",
        lambda w: Call("PATCH", f"/plugin-marketplaces/{shop(w)}", {"enabled": False}), 200,
        ArrayOf(MARKETPLACE)),
    Case("remove_plugin_marketplace", f"plugins view / {ST}", "removePluginMarketplace",
        lambda w: Call("DELETE", f"/plugin-marketplaces/{shop(w)}"), 204, None),
    # canvases
    Case("create_canvas", f"stores/studio.ts createProject / {CV}", "createCanvas", b_create_canvas,
        201, CANVAS_DOCUMENT),
    Case("list_canvases", f"stores/studio.ts loadProjects / {CV}", "listCanvases", get("/canvases"),
        200, ArrayOf(CANVAS_DOCUMENT)),
    Case("get_canvas", f"canvas view / {CV}", "getCanvas",
        get(lambda w: f"/canvases/{canvas(w)['id']}"), 200, CANVAS_DOCUMENT),
    Case("update_canvas_title", f"stores/studio.ts renameProject / {CV}", "updateCanvas",
        b_update_canvas, 200, CANVAS_DOCUMENT),
    Case("update_canvas_board", f"canvas view (nodes, edges, viewport) / {CV}", "updateCanvas",
        b_update_canvas_board, 200, CANVAS_DOCUMENT),
    Case("upload_canvas_asset", f"canvas view / {CV}", "uploadCanvasAsset", b_upload_asset, 201,
        CANVAS_UPLOAD),
    Case("read_canvas_asset", f"canvas view / {CV}", "readCanvasAsset", b_read_asset, 200, BYTES),
    Case("generate_canvas_image", f"canvas view / {CV}", "generateCanvasImage", b_generate_image,
        200, CANVAS_DOCUMENT),
    Case("generate_canvas_video", f"canvas view / {CV}", "generateCanvasVideo", b_generate_video,
        200, CANVAS_DOCUMENT),
    Case("delete_canvas", f"stores/studio.ts deleteProject / {CV}", "deleteCanvas", b_delete_canvas,
        204, None),
    # terminals
    Case("start_terminal", f"terminal panel / {TM}", "startTerminal", b_start_terminal, 201,
        TERMINAL),
    Case("attach_terminal", f"terminal panel / {TM}", "attachTerminal", get(lambda w: term_path(w)),
        200, TERMINAL),
    Case("write_terminal", f"terminal panel / {TM}", "writeTerminal", lambda w: Call("POST",
        term_path(w, "/input"), {"input": "echo desk-$((6*7))\n"}), 204, None),
    Case("resize_terminal", f"terminal panel / {TM}", "resizeTerminal", lambda w: Call("POST",
        term_path(w, "/resize"), {"cols": 100, "rows": 30}), 204, None),
    # last: deletions of whole sessions and terminals
    Case("stop_terminal", f"terminal panel / {TM}", "stopTerminal", lambda w: Call("DELETE",
        term_path(w)), 204, None),
    Case("delete_session", f"{CONV} deleteSession / {S}", "deleteSession", b_delete_session, 204,
        None),
]
# fmt: on


# -------------------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def w(tmp_path_factory: pytest.TempPathFactory, token: str, digest: str) -> Iterator[World]:
    with desktop_world(tmp_path_factory.mktemp("desktop"), token, digest) as world:
        main_session(world)  # the SSE turn runs first: its approval is the first thing a user does
        yield world


def send(w: World, case: Case, call_: Call) -> httpx.Response:
    """Send as the desktop does; an operation the desktop retries is retried the same way."""
    response = w.send(call_)
    tries = 0
    while case.retry and response.status_code == 409 and tries < 100:
        if response.json().get("code") not in case.retry:
            break
        time.sleep(0.05)  # the desktop's pause between tries
        tries += 1
        response = w.send(call_)
    return response


def violations(w: World, case: Case, response: httpx.Response) -> list[str]:
    found: list[str] = []
    if response.status_code != case.status:
        found.append(
            f"status {response.status_code}, expected {case.status}: {response.text[:300]}"
        )
        return found
    if case.shape is None:
        if response.content:
            found.append(f"expected no body, got {response.text[:120]!r}")
        return found
    if case.shape is BYTES:
        if response.content != png():
            found.append(f"expected the uploaded PNG back, got {response.content[:40]!r}")
        return found
    try:
        body = response.json()
    except ValueError:
        return [f"not JSON: {response.text[:120]!r}"]
    found += check(case.shape, body)
    if case.also is not None:
        found += case.also(w, body)
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_desktop_operation(w: World, case: Case) -> None:
    """One desktop operation: its request as built by `case.source`, its answer as
    `case.function` reads it."""
    call_ = case.build(w)
    response = send(w, case, call_)
    found = violations(w, case, response)
    where = f"{case.source} {case.function}: {call_.method} {call_.path}"
    assert not found, f"{where}\n  " + "\n  ".join(found)


def test_the_table_names_unique_cases() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert all(c.source and c.function for c in CASES)


# ------------------------------------------------------------------------------------- SSE

# The kinds the desktop's stores handle that no offline run produces (see the module docstring).
NOT_DRIVEN = {"subagent_interrupted", "agent_budget_exceeded"}


def drive(w: World, kind: str) -> None:
    """Make the kernel emit `kind` on a stream the world watches (once)."""
    drivers: dict[str, Callable[[], Any]] = {
        "message_imported": lambda: fork_and_watch(w),
        "history_rewound": lambda: w.send(b_rewind_confirm(w)),
        "file_review_resolved": lambda: w.send(b_resolve_review(w)),
        "question_requested": lambda: question(w, "answer"),
        "question_resolved": lambda: w.send(b_answer_questions(w)),
        "browser_action_requested": lambda: w.send(b_browser_result(w)),
        "browser_action_resolved": lambda: w.send(b_browser_result(w)),
        "queue_updated": lambda: queued(w, "edit"),
        "compaction_started": lambda: w.send(b_compact(w)),
        "compaction_completed": lambda: w.send(b_compact(w)),
        "compaction_failed": lambda: failed_compaction(w),
        "session_deleted": lambda: deleted_session(w),
        "workflow_updated": lambda: planned(w, "approve"),
        "background_command_updated": lambda: background_command(w),
        "error": lambda: failed_turn(w),
        "turn_started": lambda: None,
        **{
            f"subagent_{s}": (lambda: sub_agents(w))
            for s in ("queued", "running", "started", "completed", "failed", "cancelled")
        },
        "agent_budget_updated": lambda: sub_agents(w),
    }
    driver = drivers.get(kind)
    if driver is not None:
        w.once(f"drive:{kind}", driver)


def fork_and_watch(w: World) -> None:
    """Fork a chat and read the fork's stored events (the desktop loads a fork's history and
    then subscribes; its `message_imported` events are read here from the start)."""
    forked = w.prep("POST", f"/sessions/{sid(chatted(w))}/fork")
    w.streams[forked["id"]] = Stream(w, f"/sessions/{forked['id']}/events?after=0")
    w.streams[forked["id"]].kind("message_imported")


def failed_compaction(w: World) -> None:
    s = chatted(w, "compact-fail", turns=3)
    w.fake.push_completion(s["model"], http_error(500, "summary broke"))
    w.send(Call("POST", f"/sessions/{sid(s)}/compact"))


def deleted_session(w: World) -> None:
    s = w.session()
    w.prep("DELETE", f"/sessions/{sid(s)}")
    w.stream(sid(s)).kind("session_deleted")


def failed_turn(w: World) -> None:
    s = w.session()
    w.turn(s, http_error(400, "the provider refused"), message="fail")


def sub_agents(w: World) -> None:
    """One child that completes, one that fails, one cancelled (their runs reach the parent's
    stream)."""
    s = agent_parent(w)
    runs = f"/sessions/{sid(s)}/agents"
    w.fake.push("helper-model", answer("Done by the child."))
    w.prep("POST", runs, {"task": "complete", "agent_ref": "helper"})
    w.stream(sid(s)).kind("subagent_completed")
    w.fake.push("failer-model", http_error(400, "child refused"))
    w.prep("POST", runs, {"task": "fail", "agent_ref": "failer"})
    w.stream(sid(s)).kind("subagent_failed")
    w.fake.push("holder-model", [wait(w.fake.gate()), *answer("late")])
    run = w.prep("POST", runs, {"task": "hold", "agent_ref": "holder"})
    w.prep("POST", f"{runs}/{run['id']}/cancel")
    w.stream(sid(s)).kind("subagent_cancelled")


def session_items(w: World) -> list[tuple[str, Any]]:
    return [
        (path, item)
        for path, stream in ((s.path, s) for s in w.streams.values())
        if "/sessions/" in path and "/terminals/" not in path
        for item in list(stream.items)
    ]


def test_every_session_event_kind_the_stores_handle(w: World) -> None:
    """Each kind the desktop's conversation and interaction stores switch on: seen on a session
    stream, its envelope a `KernelEvent`, its payload the shape the store casts it to."""
    wanted = set(SESSION_EVENT_PAYLOADS) - NOT_DRIVEN
    seen = {item.get("kind") for _, item in session_items(w) if isinstance(item, dict)}
    for kind in sorted(wanted - seen):
        drive(w, kind)
    wait_until(
        lambda: wanted <= {i.get("kind") for _, i in session_items(w) if isinstance(i, dict)},
        "every kind the stores handle",
    )
    # One line per difference, with how many frames (on how many streams) showed it.
    seen_at: dict[str, set[str]] = {}
    for path, item in session_items(w):
        event_kind = item.get("kind") if isinstance(item, dict) else None
        found = check(KERNEL_EVENT, item)
        shape = SESSION_EVENT_PAYLOADS.get(event_kind or "")
        if shape is not None:
            found += check(shape, item.get("payload"))
        for violation in found:
            general = re.sub(r"got (\w+) \(.*\)$", r"got \1", violation)
            seen_at.setdefault(f"{event_kind}: {general}", set()).add(path)
    lines = [f"{v}  [{len(paths)} stream(s)]" for v, paths in sorted(seen_at.items())]
    assert not lines, f"{len(lines)} differences:\n  " + "\n  ".join(lines)


def test_the_main_turn_streams_in_the_order_the_stores_expect(w: World) -> None:
    """The approval turn: text, reasoning, the tool card from begin to end, the approval."""
    s = main_session(w)
    kinds = [i["kind"] for i in w.stream(sid(s)).items if isinstance(i, dict)]
    for kind in (
        "turn_started",
        "reasoning_delta",
        "message_delta",
        "tool_begin",
        "tool_update",
        "approval_request",
        "approval_resolved",
        "tool_end",
        "usage_updated",
        "turn_complete",
    ):
        assert kind in kinds, f"{kind} missing from {kinds}"
    assert kinds.index("tool_begin") < kinds.index("approval_request") < kinds.index("tool_end")
    request = w.stash["main_approval"]
    # What a client needs to show what it approves: the path being written.
    assert "notes.txt" in json.dumps(request), request


def test_context_stream_frames(w: World) -> None:
    """`subscribe_context_events`: a rule's change reaches the context stream as one JSON frame
    (the desktop counts them to reload)."""
    stream = Stream(w, "/context/events")
    try:
        mark = stream.mark()
        w.prep("POST", "/rules", {"scope": "global", "content": "Context event."})
        item = stream.wait("a context event", lambda _: True, mark)
        assert check(CONTEXT_EVENT, item) == []
    finally:
        stream.close()


def test_canvas_stream_frames(w: World) -> None:
    """`subscribe_canvas_events`: each frame carries the canvas document."""
    doc = canvas(w, "streamed")
    stream = Stream(w, f"/canvases/{doc['id']}/events")
    try:
        mark = stream.mark()
        w.prep(
            "PATCH",
            f"/canvases/{doc['id']}",
            {"expected_revision": doc["revision"], "title": "Seen"},
        )
        item = stream.wait(
            "a canvas event",
            lambda i: isinstance(i, dict) and i.get("kind") == "canvas_updated",
            mark,
        )
        found = check(CANVAS_EVENT, item)
        assert not found, "\n".join(found)
    finally:
        stream.close()


def test_terminal_stream_frames(w: World) -> None:
    """`subscribe_terminal` (`?after=0`): output frames are `TerminalDataEvent`s."""
    s = w.session()
    term = w.prep("POST", f"/sessions/{sid(s)}/terminals", {"cols": 80, "rows": 24})
    path = f"/sessions/{sid(s)}/terminals/{term['ref']}"
    stream = Stream(w, f"{path}/events?after=0")
    try:
        w.prep("POST", f"{path}/input", {"input": "echo term-$((6*7))\n"})
        item = stream.wait("the echoed output", lambda i: "term-42" in str(i.get("data", "")))
        found = check(TERMINAL_EVENT, item)
        assert not found, "\n".join(found)
    finally:
        w.prep("DELETE", path)
        stream.close()
