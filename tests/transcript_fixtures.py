"""Small but realistic transcript trees of Claude Code, Codex and opencode, written the way each
tool writes them (layouts and record shapes as documented in app/imports/{claude_code,codex,
opencode}.py). Each builder returns the records it wrote so a test can change them and write
again with `write_jsonl`.

Every tree holds the same story: the user asks (with an image) to fix `greet.py` and add
`notes.md`; the assistant thinks, edits one file and creates the other in one response, edits a
file outside the working directory, runs a command that fails, and says "Done.". Around it: an
unknown record type, a line that is not JSON, and per tool its own noise (a sidechain, meta and
command records for Claude Code; injected context and a compaction marker for Codex; a
sub-agent session and a synthetic part for opencode).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

CWD = "/home/ada/proj"
OUTSIDE = "/home/ada/other/config.txt"
# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()
GREET_BEFORE = 'def greet():\n    print("helo")\n'
GREET_AFTER = 'def greet():\n    print("hello")\n'
NOTES = "# Notes\n"
GARBAGE = '{"type": "user", "message": {"role": '  # a line cut short


def write_jsonl(path: Path, lines: list[Any]) -> Path:
    """One JSON value per line; a str is written as is (a garbled line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    path.write_text(text + "\n")
    return path


# --- Claude Code -------------------------------------------------------------------------------

CLAUDE_SESSION = "5d2c0b4e-8f0a-4c1e-9a57-3f4f3c2b1a00"


def claude_records(session_id: str = CLAUDE_SESSION, cwd: str = CWD) -> list[Any]:
    """The records of one Claude Code session file, in file order."""
    base = {
        "isSidechain": False,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session_id,
        "version": "1.0.80",
        "gitBranch": "main",
    }

    def record(kind: str, uuid: str, parent: str | None, second: int, **extra: Any) -> Any:
        stamp = f"2025-08-01T10:00:{second:02d}.{second * 7:03d}Z"
        return {
            **base,
            "type": kind,
            "uuid": uuid,
            "parentUuid": parent,
            "timestamp": stamp,
            **extra,
        }

    def assistant(uuid: str, parent: str, second: int, msg_id: str, *blocks: Any) -> Any:
        message = {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": list(blocks),
            "stop_reason": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return record("assistant", uuid, parent, second, message=message, requestId="req_1")

    def result(uuid: str, parent: str, second: int, call: str, content: Any, **extra: Any) -> Any:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call, "content": content}
        if extra.pop("is_error", False):
            block["is_error"] = True
        message = {"role": "user", "content": [block]}
        return record("user", uuid, parent, second, message=message, **extra)

    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
    }
    return [
        {"type": "summary", "summary": "Fix the greeting and add notes", "leafUuid": "a9"},
        record(
            "user",
            "u0",
            None,
            0,
            isMeta=True,
            message={
                "role": "user",
                "content": "<local-command-caveat>Caveat</local-command-caveat>",
            },
        ),
        record(
            "user",
            "u1",
            "u0",
            1,
            message={
                "role": "user",
                "content": [
                    {"type": "text", "text": "Please fix greet.py and add notes.md"},
                    image,
                ],
            },
        ),
        assistant(
            "a1",
            "u1",
            2,
            "msg_01",
            {"type": "thinking", "thinking": "Typo in greet.", "signature": "sig"},
        ),
        assistant("a2", "a1", 3, "msg_01", {"type": "text", "text": "Fixing both."}),
        assistant(
            "a3",
            "a2",
            4,
            "msg_01",
            {
                "type": "tool_use",
                "id": "toolu_edit",
                "name": "Edit",
                "input": {
                    "file_path": f"{cwd}/greet.py",
                    "old_string": "helo",
                    "new_string": "hello",
                },
            },
        ),
        assistant(
            "a4",
            "a3",
            5,
            "msg_01",
            {
                "type": "tool_use",
                "id": "toolu_write",
                "name": "Write",
                "input": {"file_path": f"{cwd}/notes.md", "content": NOTES},
            },
        ),
        result(
            "r1",
            "a4",
            6,
            "toolu_edit",
            "The file greet.py has been updated.",
            toolUseResult={
                "filePath": f"{cwd}/greet.py",
                "oldString": "helo",
                "newString": "hello",
                "originalFile": GREET_BEFORE,
                "structuredPatch": [
                    {
                        "oldStart": 2,
                        "oldLines": 1,
                        "newStart": 2,
                        "newLines": 1,
                        "lines": ['-    print("helo")', '+    print("hello")'],
                    }
                ],
                "userModified": False,
                "replaceAll": False,
            },
        ),
        result(
            "r2",
            "r1",
            7,
            "toolu_write",
            f"File created successfully at: {cwd}/notes.md",
            toolUseResult={
                "type": "create",
                "filePath": f"{cwd}/notes.md",
                "content": NOTES,
                "structuredPatch": [],
                "originalFile": None,
            },
        ),
        {
            **record(
                "assistant",
                "s1",
                "r2",
                8,
                message={
                    "role": "assistant",
                    "content": [{"type": "text", "text": "sub-agent work"}],
                },
            ),
            "isSidechain": True,
        },
        {
            "type": "file-history-snapshot",
            "messageId": "a4",
            "snapshot": {},
            "isSnapshotUpdate": False,
        },
        assistant(
            "a5",
            "r2",
            9,
            "msg_02",
            {
                "type": "tool_use",
                "id": "toolu_outside",
                "name": "Edit",
                "input": {"file_path": OUTSIDE, "old_string": "a", "new_string": "b"},
            },
        ),
        result(
            "r3",
            "a5",
            10,
            "toolu_outside",
            "Updated.",
            toolUseResult={
                "filePath": OUTSIDE,
                "oldString": "a",
                "newString": "b",
                "originalFile": "a\n",
            },
        ),
        assistant(
            "a6",
            "r3",
            11,
            "msg_03",
            {
                "type": "tool_use",
                "id": "toolu_bash",
                "name": "Bash",
                "input": {"command": "pytest"},
            },
        ),
        result(
            "r4", "a6", 12, "toolu_bash", [{"type": "text", "text": "Exit code 1"}], is_error=True
        ),
        record(
            "system",
            "y1",
            "r4",
            13,
            content="Stop hook ran",
            subtype="stop_hook_summary",
            level="info",
        ),
        {"type": "mystery-record", "uuid": "m1", "sessionId": session_id},
        GARBAGE,
        record(
            "user",
            "c1",
            "y1",
            14,
            message={
                "role": "user",
                "content": "<command-name>/cost</command-name>\n"
                "<command-message>cost</command-message>",
            },
        ),
        assistant("a9", "c1", 15, "msg_04", {"type": "text", "text": "Done."}),
    ]


def write_claude_tree(projects: Path, records: list[Any] | None = None) -> Path:
    """`<projects>/-home-ada-proj/<session>.jsonl`; returns the file."""
    project = projects / CWD.replace("/", "-")
    return write_jsonl(project / f"{CLAUDE_SESSION}.jsonl", records or claude_records())


# --- Codex ------------------------------------------------------------------------------------

CODEX_SESSION = "0199a213-81c0-7800-8aa1-bbab2a035a53"
CODEX_NAME = f"rollout-2025-09-13T04-30-00-{CODEX_SESSION}.jsonl"


def codex_lines(cwd: str = CWD) -> list[Any]:
    """The lines of one current-format rollout."""
    second = iter(range(60))

    def line(kind: str, payload: Any) -> Any:
        return {
            "timestamp": f"2025-09-13T04:30:{next(second):02d}.250Z",
            "type": kind,
            "payload": payload,
        }

    def item(**payload: Any) -> Any:
        return line("response_item", payload)

    def patch_end(call_id: str, changes: dict[str, Any]) -> Any:
        return line(
            "event_msg",
            {
                "type": "patch_apply_end",
                "call_id": call_id,
                "turn_id": "t1",
                "stdout": "Success.",
                "stderr": "",
                "success": True,
                "changes": changes,
            },
        )

    return [
        line(
            "session_meta",
            {
                "id": CODEX_SESSION,
                "timestamp": "2025-09-13T04:30:00.250Z",
                "cwd": cwd,
                "originator": "codex_cli_rs",
                "cli_version": "0.39.0",
                "source": "cli",
                "model_provider": "openai",
                "base_instructions": {"text": "You are Codex."},
                "git": {"branch": "main"},
            },
        ),
        item(
            type="message",
            role="developer",
            content=[{"type": "input_text", "text": "<permissions>"}],
        ),
        item(
            type="message",
            role="user",
            content=[
                {
                    "type": "input_text",
                    "text": f"<environment_context>\n  <cwd>{cwd}</cwd>\n</environment_context>",
                }
            ],
        ),
        line(
            "turn_context",
            {
                "turn_id": "t1",
                "cwd": cwd,
                "approval_policy": "on-request",
                "sandbox_policy": {"type": "workspace-write"},
                "model": "gpt-5-codex",
                "effort": "medium",
                "summary": "auto",
            },
        ),
        item(
            type="message",
            role="user",
            content=[
                {"type": "input_text", "text": "Please fix greet.py and add notes.md"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG_B64}"},
            ],
        ),
        line(
            "event_msg",
            {
                "type": "user_message",
                "message": "Please fix greet.py and add notes.md",
                "images": [],
            },
        ),
        item(
            type="reasoning",
            summary=[{"type": "summary_text", "text": "**Plan**\n\nPatch both files."}],
            content=None,
            encrypted_content="gAAAA",
        ),
        item(
            type="message",
            role="assistant",
            content=[{"type": "output_text", "text": "Fixing both."}],
        ),
        item(
            type="function_call",
            name="shell",
            arguments='{"command":["cat","greet.py"],"workdir":"."}',
            call_id="call_cat",
        ),
        item(type="function_call_output", call_id="call_cat", output=GREET_BEFORE),
        item(
            type="custom_tool_call",
            status="completed",
            call_id="call_patch",
            name="apply_patch",
            input="*** Begin Patch\n*** Add File: notes.md\n+# Notes\n*** End Patch\n",
        ),
        patch_end("call_patch", {f"{cwd}/notes.md": {"type": "add", "content": NOTES}}),
        item(
            type="custom_tool_call_output",
            call_id="call_patch",
            output="Success. Updated: A notes.md",
        ),
        item(
            type="custom_tool_call",
            status="completed",
            call_id="call_update",
            name="apply_patch",
            input="*** Begin Patch\n*** Update File: greet.py\n@@\n-helo\n+hello\n*** End Patch\n",
        ),
        patch_end(
            "call_update",
            {
                f"{cwd}/greet.py": {
                    "type": "update",
                    "unified_diff": "-helo\n+hello\n",
                    "move_path": None,
                }
            },
        ),
        item(
            type="custom_tool_call_output",
            call_id="call_update",
            output="Success. Updated: M greet.py",
        ),
        item(
            type="custom_tool_call",
            status="completed",
            call_id="call_outside",
            name="apply_patch",
            input="*** Begin Patch\n*** Delete File: /home/ada/other/config.txt\n*** End Patch\n",
        ),
        patch_end("call_outside", {OUTSIDE: {"type": "delete", "content": "a\n"}}),
        item(type="custom_tool_call_output", call_id="call_outside", output="Success."),
        item(type="function_call", name="shell", arguments="not json", call_id="call_test"),
        item(
            type="function_call_output",
            call_id="call_test",
            output={"content": "Exit code 1", "success": False},
        ),
        line("event_msg", {"type": "token_count", "info": None}),
        {"timestamp": "2025-09-13T04:30:21.500Z", "type": "mystery_record", "payload": {}},
        GARBAGE,
        line("compacted", {"message": "summary of the work", "replacement_history": []}),
        item(type="message", role="assistant", content=[{"type": "output_text", "text": "Done."}]),
    ]


def write_codex_tree(home: Path, lines: list[Any] | None = None) -> Path:
    """`<home>/sessions/2025/09/13/rollout-….jsonl`; returns the file."""
    return write_jsonl(
        home / "sessions" / "2025" / "09" / "13" / CODEX_NAME, lines or codex_lines()
    )


def write_codex_legacy(home: Path) -> tuple[Path, Path]:
    """A mid-2025 rollout (bare items after a meta line) and a TypeScript CLI single-JSON one."""
    legacy_id = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    legacy = write_jsonl(
        home / "sessions" / "2025" / "05" / "07" / f"rollout-2025-05-07T17-24-21-{legacy_id}.jsonl",
        [
            {
                "id": legacy_id,
                "timestamp": "2025-05-07T17:24:21.123Z",
                "instructions": None,
                "git": {"branch": "main"},
            },
            {"record_type": "state"},
            {
                "type": "message",
                "id": None,
                "role": "user",
                "content": [{"type": "input_text", "text": "List the files"}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "name": "shell",
                "arguments": '{"command":["ls"]}',
                "call_id": "call_ls",
            },
            {
                "type": "function_call_output",
                "call_id": "call_ls",
                "output": '{"output":"greet.py\\n","metadata":{"exit_code":0}}',
            },
            {"record_type": "state"},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "One file: greet.py"}],
            },
        ],
    )
    ts_id = "1f2e3d4c-5b6a-4978-8897-a6b5c4d3e2f1"
    single = home / "sessions" / f"rollout-2025-04-20-{ts_id}.json"
    single.write_text(
        json.dumps(
            {
                "session": {
                    "timestamp": "2025-04-20T08:00:00.000Z",
                    "id": ts_id,
                    "instructions": "",
                },
                "items": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": "Hello"}],
                    },
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "Hi!"}],
                    },
                ],
            },
            indent=2,
        )
    )
    return legacy, single


# --- opencode ---------------------------------------------------------------------------------

OPENCODE_SESSION = "ses_6f1a2b3c4ffeYb2k9X0aBcDeFg"
PROJECT_ID = "4b0ea68d7af9a6031a7ffda7ad66e0cb83315750"
T0 = 1_754_042_400_000  # 2025-08-01T10:00:00Z in ms


def write_opencode_tree(data_dir: Path, cwd: str = CWD) -> Path:
    """`<data_dir>/storage/{project,session,message,part}/…`; returns the storage directory."""
    storage = data_dir / "storage"

    def put(relative: str, value: Any) -> None:
        file = storage / relative
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(value if isinstance(value, str) else json.dumps(value, indent=2))

    put(
        f"project/{PROJECT_ID}.json",
        {
            "id": PROJECT_ID,
            "worktree": cwd,
            "vcs": "git",
            "time": {"created": T0, "initialized": T0},
        },
    )
    put(
        f"session/{PROJECT_ID}/{OPENCODE_SESSION}.json",
        {
            "id": OPENCODE_SESSION,
            "projectID": PROJECT_ID,
            "directory": cwd,
            "title": "Fix the greeting",
            "version": "0.9.6",
            "time": {"created": T0, "updated": T0 + 20_000},
        },
    )
    put(
        f"session/{PROJECT_ID}/ses_child.json",
        {
            "id": "ses_child",
            "projectID": PROJECT_ID,
            "parentID": OPENCODE_SESSION,
            "directory": cwd,
            "title": "Sub task (@general subagent)",
            "version": "0.9.6",
            "time": {"created": T0, "updated": T0},
        },
    )
    user, reply, last = "msg_a01", "msg_a02", "msg_a03"
    put(
        f"message/{OPENCODE_SESSION}/{user}.json",
        {
            "id": user,
            "sessionID": OPENCODE_SESSION,
            "role": "user",
            "time": {"created": T0 + 1000},
            "agent": "build",
            "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-20250514"},
        },
    )
    part = {"sessionID": OPENCODE_SESSION, "messageID": user}
    put(
        f"part/{user}/prt_a01.json",
        {**part, "id": "prt_a01", "type": "text", "text": "Please fix greet.py and add notes.md"},
    )
    put(
        f"part/{user}/prt_a02.json",
        {
            **part,
            "id": "prt_a02",
            "type": "file",
            "mime": "image/png",
            "filename": "shot.png",
            "url": f"data:image/png;base64,{PNG_B64}",
        },
    )
    put(
        f"part/{user}/prt_a03.json",
        {
            **part,
            "id": "prt_a03",
            "type": "text",
            "synthetic": True,
            "text": "Called the Read tool with the following input: {}",
        },
    )
    assistant = {
        "sessionID": OPENCODE_SESSION,
        "role": "assistant",
        "parentID": user,
        "modelID": "claude-sonnet-4-20250514",
        "providerID": "anthropic",
        "mode": "build",
        "path": {"cwd": cwd, "root": cwd},
        "cost": 0.01,
        "system": [],
        "tokens": {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    }
    put(
        f"message/{OPENCODE_SESSION}/{reply}.json",
        {**assistant, "id": reply, "time": {"created": T0 + 2000, "completed": T0 + 9000}},
    )
    put(
        f"message/{OPENCODE_SESSION}/{last}.json",
        {**assistant, "id": last, "time": {"created": T0 + 10_000, "completed": T0 + 11_000}},
    )
    part = {"sessionID": OPENCODE_SESSION, "messageID": reply}

    def tool(call: str, name: str, state: dict[str, Any]) -> dict[str, Any]:
        return {**part, "type": "tool", "callID": call, "tool": name, "state": state}

    def done(
        start: int, given: dict[str, Any], output: str, metadata: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "status": "completed",
            "input": given,
            "output": output,
            "title": "t",
            "metadata": metadata,
            "time": {"start": T0 + start, "end": T0 + start + 500},
        }

    parts: list[Any] = [
        {**part, "type": "step-start", "snapshot": "abc"},
        {
            **part,
            "type": "reasoning",
            "text": "Typo in greet.",
            "time": {"start": T0 + 2100, "end": T0 + 2200},
        },
        {
            **part,
            "type": "text",
            "text": "Fixing both.",
            "time": {"start": T0 + 2200, "end": T0 + 2300},
        },
        tool(
            "toolu_edit",
            "edit",
            done(
                3000,
                {"filePath": f"{cwd}/greet.py", "oldString": "helo", "newString": "hello"},
                "Edit applied successfully.",
                {
                    "diff": "…",
                    "filediff": {
                        "file": f"{cwd}/greet.py",
                        "before": GREET_BEFORE,
                        "after": GREET_AFTER,
                        "additions": 1,
                        "deletions": 1,
                    },
                },
            ),
        ),
        tool(
            "toolu_write",
            "write",
            done(
                4000,
                {"filePath": f"{cwd}/notes.md", "content": NOTES},
                "Wrote file successfully.",
                {"diagnostics": {}, "filepath": f"{cwd}/notes.md", "exists": False},
            ),
        ),
        {**part, "type": "step-finish", "reason": "tool-calls", "cost": 0, "tokens": {}},
        {**part, "type": "step-start"},
        tool(
            "toolu_outside",
            "edit",
            done(
                5000,
                {"filePath": OUTSIDE, "oldString": "a", "newString": "b"},
                "Edit applied successfully.",
                {"filediff": {"file": OUTSIDE, "before": "a\n", "after": "b\n"}},
            ),
        ),
        tool(
            "toolu_bash",
            "bash",
            {
                "status": "error",
                "input": {"command": "pytest"},
                "error": "Exit code 1",
                "time": {"start": T0 + 6000, "end": T0 + 6500},
            },
        ),
        {**part, "type": "mystery"},
        {**part, "type": "step-finish", "reason": "tool-calls", "cost": 0, "tokens": {}},
    ]
    for number, value in enumerate(parts, start=1):
        put(f"part/{reply}/prt_b{number:02d}.json", {**value, "id": f"prt_b{number:02d}"})
    put(f"part/{reply}/prt_b99.json", GARBAGE)
    part = {"sessionID": OPENCODE_SESSION, "messageID": last}
    put(f"part/{last}/prt_c01.json", {**part, "id": "prt_c01", "type": "step-start"})
    put(f"part/{last}/prt_c02.json", {**part, "id": "prt_c02", "type": "text", "text": "Done."})
    put(
        "message/ses_child/msg_z01.json",
        {"id": "msg_z01", "sessionID": "ses_child", "role": "user", "time": {"created": T0}},
    )
    return storage
