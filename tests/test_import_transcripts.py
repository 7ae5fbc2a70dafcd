"""The agent-CLI transcript parsers (app.imports.claude_code, codex, opencode) on fixture trees
written the way each tool writes them (tests/transcript_fixtures.py): exact mapping, file
changes, what is skipped and counted, the accepted paths, and garbled input that must only ever
give a bundle or one of the model's errors."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import transcript_fixtures as fx

from app.imports import claude_code, codex, opencode, transcripts
from app.imports.model import (
    ImportBundle,
    ImportedFileChange,
    ImportedSession,
    ImportTooLarge,
    InvalidImport,
    UnsupportedImportVersion,
    WrongPassphrase,
)

MODEL_ERRORS = (InvalidImport, UnsupportedImportVersion, WrongPassphrase, ImportTooLarge)
Parse = Callable[..., ImportBundle]


def view(session: ImportedSession) -> list[dict[str, Any]]:
    """Each message as its dict plus `source_id` and image bytes (when it has any)."""
    out = []
    for imported in session.messages:
        item = {**imported.message, "source_id": imported.source_id}
        if imported.images:
            item["images"] = [image.data for image in imported.images]
        out.append(item)
    return out


def changes(session: ImportedSession) -> dict[str, ImportedFileChange]:
    return {m.source_id: m.file_change for m in session.messages if m.file_change is not None}


def assert_calls_answered(session: ImportedSession) -> None:
    """Every assistant message's calls are followed, in order, by their tool messages."""
    messages = [m.message for m in session.messages]
    for index, message in enumerate(messages):
        calls = [call["id"] for call in message.get("tool_calls", [])]
        following = messages[index + 1 : index + 1 + len(calls)]
        assert [(m["role"], m["tool_call_id"]) for m in following] == [("tool", c) for c in calls]
    assert len({m.source_id for m in session.messages}) == len(session.messages)


def ns(stamp: str) -> int:
    found = transcripts.time_ns(stamp)
    assert found is not None
    return found


# --- Claude Code -------------------------------------------------------------------------------

CLAUDE_MODEL = "claude-sonnet-4-20250514"


def claude_call(call_id: str, name: str, **given: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "input": given}


def test_claude_code_maps_the_main_chain(tmp_path: Path) -> None:
    fx.write_claude_tree(tmp_path / "projects")

    bundle = claude_code.parse(tmp_path / "projects")

    assert bundle.source == "claude-code"
    [session] = bundle.sessions
    assert session.source == f"claude-code:{fx.CLAUDE_SESSION}"
    assert session.title == "Fix the greeting and add notes"
    assert session.cwd == fx.CWD
    assert session.model == CLAUDE_MODEL
    assert session.created_at_ns == ns("2025-08-01T10:00:00.000Z")
    assert session.updated_at_ns == ns("2025-08-01T10:00:15.105Z")
    tool = {"role": "tool"}
    assert view(session) == [
        {
            "role": "user",
            "content": "Please fix greet.py and add notes.md",
            "created_at": "2025-08-01T10:00:01.007Z",
            "source_id": "u1",
            "images": [fx.PNG],
        },
        {
            "role": "assistant",
            "content": "Fixing both.",
            "reasoning": "Typo in greet.",
            "model": CLAUDE_MODEL,
            "created_at": "2025-08-01T10:00:02.014Z",
            "tool_calls": [
                claude_call(
                    "toolu_edit",
                    "Edit",
                    file_path=f"{fx.CWD}/greet.py",
                    old_string="helo",
                    new_string="hello",
                ),
                claude_call(
                    "toolu_write", "Write", file_path=f"{fx.CWD}/notes.md", content=fx.NOTES
                ),
            ],
            "source_id": "a1",
        },
        {
            **tool,
            "tool_call_id": "toolu_edit",
            "name": "Edit",
            "content": "The file greet.py has been updated.",
            "created_at": "2025-08-01T10:00:06.042Z",
            "source_id": "a1#call-toolu_edit",
        },
        {
            **tool,
            "tool_call_id": "toolu_write",
            "name": "Write",
            "content": f"File created successfully at: {fx.CWD}/notes.md",
            "created_at": "2025-08-01T10:00:07.049Z",
            "source_id": "a1#call-toolu_write",
        },
        {
            "role": "assistant",
            "content": "",
            "model": CLAUDE_MODEL,
            "created_at": "2025-08-01T10:00:09.063Z",
            "tool_calls": [
                claude_call(
                    "toolu_outside", "Edit", file_path=fx.OUTSIDE, old_string="a", new_string="b"
                )
            ],
            "source_id": "a5",
        },
        {
            **tool,
            "tool_call_id": "toolu_outside",
            "name": "Edit",
            "content": "Updated.",
            "created_at": "2025-08-01T10:00:10.070Z",
            "source_id": "a5#call-toolu_outside",
        },
        {
            "role": "assistant",
            "content": "",
            "model": CLAUDE_MODEL,
            "created_at": "2025-08-01T10:00:11.077Z",
            "tool_calls": [claude_call("toolu_bash", "Bash", command="pytest")],
            "source_id": "a6",
        },
        {
            **tool,
            "tool_call_id": "toolu_bash",
            "name": "Bash",
            "content": "Exit code 1",
            "is_error": True,
            "created_at": "2025-08-01T10:00:12.084Z",
            "source_id": "a6#call-toolu_bash",
        },
        {
            "role": "assistant",
            "content": "Done.",
            "model": CLAUDE_MODEL,
            "created_at": "2025-08-01T10:00:15.105Z",
            "source_id": "a9",
        },
    ]
    assert_calls_answered(session)
    assert changes(session) == {
        "a1#call-toolu_edit": ImportedFileChange(
            "greet.py", fx.GREET_BEFORE.encode(), fx.GREET_AFTER.encode()
        ),
        "a1#call-toolu_write": ImportedFileChange("notes.md", None, fx.NOTES.encode()),
    }
    assert bundle.report.skipped == {
        "line that is not a JSON object": 1,
        "sub-agent (sidechain) record": 1,
        "unknown record type mystery-record": 1,
        "meta record": 1,
        "system record": 1,
        "slash-command record": 1,
        "file change outside the working directory": 1,
    }


def test_claude_code_keeps_the_branch_written_last(tmp_path: Path) -> None:
    records = fx.claude_records()
    base = {"isSidechain": False, "cwd": fx.CWD, "sessionId": fx.CLAUDE_SESSION}
    # The user rewound to before the first prompt and asked something else.
    records += [
        {
            **base,
            "type": "user",
            "uuid": "v1",
            "parentUuid": "u0",
            "timestamp": "2025-08-01T11:00:00Z",
            "message": {"role": "user", "content": "Only explain greet.py"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "b1",
            "parentUuid": "v1",
            "timestamp": "2025-08-01T11:00:05Z",
            "message": {
                "id": "msg_09",
                "role": "assistant",
                "model": CLAUDE_MODEL,
                "content": [{"type": "text", "text": "It prints a greeting."}],
            },
        },
    ]
    fx.write_claude_tree(tmp_path, records)

    bundle = claude_code.parse(tmp_path)

    [session] = bundle.sessions
    assert [(m["role"], m["content"]) for m in view(session)] == [
        ("user", "Only explain greet.py"),
        ("assistant", "It prints a greeting."),
    ]
    # The summary describes the abandoned branch: the title comes from the kept one.
    assert session.title == "Only explain greet.py"
    abandoned = ["u1", "a1", "a2", "a3", "a4", "r1", "r2", "a5", "r3", "a6", "r4", "c1", "a9"]
    assert bundle.report.skipped["record on an abandoned branch"] == len(abandoned)
    assert "system record" not in bundle.report.skipped


def test_claude_code_title_falls_back_to_the_first_prompt(tmp_path: Path) -> None:
    records = [
        r for r in fx.claude_records() if not (isinstance(r, dict) and r["type"] == "summary")
    ]
    prompt = "Please " + "fix greet.py " * 20
    [u1] = [r for r in records if isinstance(r, dict) and r.get("uuid") == "u1"]
    u1["message"]["content"][0]["text"] = f"\n{prompt}\nsecond line"
    fx.write_claude_tree(tmp_path, records)

    [session] = claude_code.parse(tmp_path).sessions

    assert session.title is not None
    assert len(session.title) == transcripts.TITLE_CHARS
    assert session.title.endswith("…")
    assert prompt.startswith(session.title[:-1])


def test_claude_code_counts_images_that_do_not_decode(tmp_path: Path) -> None:
    records = fx.claude_records()
    records[2]["message"]["content"][1]["source"]["data"] = "not base64!"
    records[2]["message"]["content"].append(
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    )
    fx.write_claude_tree(tmp_path, records)

    bundle = claude_code.parse(tmp_path)

    assert bundle.sessions[0].messages[0].images == []
    assert bundle.report.skipped["image that does not decode"] == 1
    assert bundle.report.skipped["image without inline data"] == 1


def test_claude_code_multi_edit_and_write_over_a_file(tmp_path: Path) -> None:
    records = fx.claude_records()
    [a3] = [r for r in records if isinstance(r, dict) and r.get("uuid") == "a3"]
    edits = [
        {"old_string": "helo", "new_string": "hello"},
        {"old_string": "greet", "new_string": "salute", "replace_all": True},
    ]
    a3["message"]["content"][0].update(
        name="MultiEdit", input={"file_path": "greet.py", "edits": edits}
    )
    [r1] = [r for r in records if isinstance(r, dict) and r.get("uuid") == "r1"]
    r1["toolUseResult"] = {
        "filePath": f"{fx.CWD}/greet.py",
        "edits": edits,
        "originalFileContents": fx.GREET_BEFORE + "greet()\n",
    }
    [r2] = [r for r in records if isinstance(r, dict) and r.get("uuid") == "r2"]
    r2["toolUseResult"].update(type="update", originalFile="old notes\n")
    fx.write_claude_tree(tmp_path, records)

    [session] = claude_code.parse(tmp_path).sessions

    assert changes(session) == {
        "a1#call-toolu_edit": ImportedFileChange(
            "greet.py",
            (fx.GREET_BEFORE + "greet()\n").encode(),
            b'def salute():\n    print("hello")\nsalute()\n',
        ),
        "a1#call-toolu_write": ImportedFileChange("notes.md", b"old notes\n", fx.NOTES.encode()),
    }


def test_claude_code_edit_that_does_not_replay_is_counted(tmp_path: Path) -> None:
    records = fx.claude_records()
    [r1] = [r for r in records if isinstance(r, dict) and r.get("uuid") == "r1"]
    r1["toolUseResult"]["originalFile"] = "nothing to replace here\n"
    fx.write_claude_tree(tmp_path, records)

    bundle = claude_code.parse(tmp_path)

    assert list(changes(bundle.sessions[0])) == ["a1#call-toolu_write"]
    assert bundle.report.skipped[transcripts.NOT_IN_FULL] == 1


def test_claude_code_session_id_comes_from_the_file_name(tmp_path: Path) -> None:
    resumed = "9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a"
    records = fx.claude_records()  # the copied history keeps the previous session's id
    records.append({**records[-1], "uuid": "a10", "parentUuid": "a9", "sessionId": resumed})
    fx.write_claude_tree(tmp_path / "a")
    fx.write_jsonl(tmp_path / "a" / "-home-ada-proj" / f"{resumed}.jsonl", records)
    uploaded = fx.write_jsonl(tmp_path / "b" / "transcript.jsonl", records)

    sources = sorted(s.source for s in claude_code.parse(tmp_path / "a").sessions)

    assert sources == sorted([f"claude-code:{fx.CLAUDE_SESSION}", f"claude-code:{resumed}"])
    assert claude_code.parse(uploaded).sessions[0].source == f"claude-code:{resumed}"


def test_claude_code_file_and_directories_give_the_same_session(tmp_path: Path) -> None:
    file = fx.write_claude_tree(tmp_path / "projects")
    reads = [claude_code.parse(p) for p in (file, file.parent, tmp_path / "projects")]
    assert view(reads[0].sessions[0]) == view(reads[1].sessions[0]) == view(reads[2].sessions[0])


# --- Codex ------------------------------------------------------------------------------------


def test_codex_maps_a_rollout(tmp_path: Path) -> None:
    fx.write_codex_tree(tmp_path)
    progress: list[tuple[int, int]] = []

    bundle = codex.parse(
        tmp_path / "sessions", progress=lambda done, total: progress.append((done, total))
    )

    assert bundle.source == "codex"
    assert progress == [(1, 1)]
    [session] = bundle.sessions
    assert session.source == f"codex:{fx.CODEX_SESSION}"
    assert session.title == "Please fix greet.py and add notes.md"
    assert session.cwd == fx.CWD
    assert session.model == "gpt-5-codex"
    assert session.created_at_ns == ns("2025-09-13T04:30:00.250Z")
    assert session.updated_at_ns == ns("2025-09-13T04:30:23.250Z")

    def at(second: int) -> str:
        return f"2025-09-13T04:30:{second:02d}.250Z"

    def assistant(line: int, second: int, calls: list[Any], content: str = "") -> dict[str, Any]:
        found = {
            "role": "assistant",
            "content": content,
            "model": "gpt-5-codex",
            "created_at": at(second),
            "source_id": str(line),
        }
        return {**found, "tool_calls": calls} if calls else found

    def tool(
        line: int, second: int, call: str, name: str, content: str, **extra: Any
    ) -> dict[str, Any]:
        return {
            "role": "tool",
            "tool_call_id": call,
            "name": name,
            "content": content,
            "created_at": at(second),
            "source_id": f"{line}#call-{call}",
            **extra,
        }

    patch_add = "*** Begin Patch\n*** Add File: notes.md\n+# Notes\n*** End Patch\n"
    patch_update = "*** Begin Patch\n*** Update File: greet.py\n@@\n-helo\n+hello\n*** End Patch\n"
    patch_delete = f"*** Begin Patch\n*** Delete File: {fx.OUTSIDE}\n*** End Patch\n"
    assert view(session) == [
        {
            "role": "user",
            "content": "Please fix greet.py and add notes.md",
            "created_at": at(4),
            "source_id": "5",
            "images": [fx.PNG],
        },
        {
            **assistant(
                7,
                6,
                [
                    {
                        "id": "call_cat",
                        "name": "shell",
                        "input": {"command": ["cat", "greet.py"], "workdir": "."},
                    }
                ],
                "Fixing both.",
            ),
            "reasoning": "**Plan**\n\nPatch both files.",
        },
        tool(7, 9, "call_cat", "shell", fx.GREET_BEFORE),
        assistant(11, 10, [{"id": "call_patch", "name": "apply_patch", "input": patch_add}]),
        tool(11, 12, "call_patch", "apply_patch", "Success. Updated: A notes.md"),
        assistant(14, 13, [{"id": "call_update", "name": "apply_patch", "input": patch_update}]),
        tool(14, 15, "call_update", "apply_patch", "Success. Updated: M greet.py"),
        assistant(17, 16, [{"id": "call_outside", "name": "apply_patch", "input": patch_delete}]),
        tool(17, 18, "call_outside", "apply_patch", "Success."),
        # Arguments that are not JSON stay the raw string.
        assistant(20, 19, [{"id": "call_test", "name": "shell", "input": "not json"}]),
        tool(20, 20, "call_test", "shell", "Exit code 1", is_error=True),
        assistant(26, 23, [], "Done."),
    ]
    assert_calls_answered(session)
    assert changes(session) == {
        "11#call-call_patch": ImportedFileChange("notes.md", None, fx.NOTES.encode())
    }
    assert bundle.report.skipped == {
        "developer message": 1,
        "context message Codex injected": 1,
        transcripts.NOT_IN_FULL: 1,
        "file change outside the working directory": 1,
        "unknown record type mystery_record": 1,
        "line that is not a JSON object": 1,
        "compaction marker": 1,
    }


def test_codex_reads_older_rollout_generations(tmp_path: Path) -> None:
    fx.write_codex_tree(tmp_path)
    legacy, single = fx.write_codex_legacy(tmp_path)

    bundle = codex.parse(tmp_path / "sessions")

    by_source = {s.source: s for s in bundle.sessions}
    assert len(by_source) == 3
    old = by_source["codex:5973b6c0-94b8-487b-a530-2aeb6098ae0e"]
    assert [(m["role"], m["content"], m.get("tool_calls")) for m in view(old)] == [
        ("user", "List the files", None),
        ("assistant", "", [{"id": "call_ls", "name": "shell", "input": {"command": ["ls"]}}]),
        ("tool", '{"output":"greet.py\\n","metadata":{"exit_code":0}}', None),
        ("assistant", "One file: greet.py", None),
    ]
    assert old.created_at_ns == old.updated_at_ns == ns("2025-05-07T17:24:21.123Z")
    assert old.cwd is None
    oldest = by_source["codex:1f2e3d4c-5b6a-4978-8897-a6b5c4d3e2f1"]
    assert [(m["role"], m["content"]) for m in view(oldest)] == [
        ("user", "Hello"),
        ("assistant", "Hi!"),
    ]
    assert oldest.title == "Hello"
    assert oldest.created_at_ns == ns("2025-04-20T08:00:00.000Z")
    # One file on its own is read the same way.
    assert view(codex.parse(legacy).sessions[0]) == view(old)
    assert view(codex.parse(single).sessions[0]) == view(oldest)


# --- opencode ---------------------------------------------------------------------------------


def test_opencode_maps_a_session(tmp_path: Path) -> None:
    fx.write_opencode_tree(tmp_path)

    bundle = opencode.parse(tmp_path)

    assert bundle.source == "opencode"
    [session] = bundle.sessions
    assert session.source == f"opencode:{fx.OPENCODE_SESSION}"
    assert session.title == "Fix the greeting"
    assert session.cwd == fx.CWD
    assert session.model == CLAUDE_MODEL
    assert session.created_at_ns == fx.T0 * 1_000_000
    assert session.updated_at_ns == (fx.T0 + 20_000) * 1_000_000
    label = f"anthropic/{CLAUDE_MODEL}"

    def at(ms: int) -> str:
        return transcripts.iso((fx.T0 + ms) * 1_000_000)

    def tool(
        owner: str, call: str, name: str, content: str, end: int, **extra: Any
    ) -> dict[str, Any]:
        return {
            "role": "tool",
            "tool_call_id": call,
            "name": name,
            "content": content,
            "created_at": at(end),
            "source_id": f"{owner}#call-{call}",
            **extra,
        }

    step_two = "msg_a02#step-2"
    assert view(session) == [
        {
            "role": "user",
            "content": "Please fix greet.py and add notes.md",
            "created_at": at(1000),
            "source_id": "msg_a01",
            "images": [fx.PNG],
        },
        {
            "role": "assistant",
            "content": "Fixing both.",
            "reasoning": "Typo in greet.",
            "model": CLAUDE_MODEL,
            "model_label": label,
            "created_at": at(2000),
            "source_id": "msg_a02",
            "tool_calls": [
                {
                    "id": "toolu_edit",
                    "name": "edit",
                    "input": {
                        "filePath": f"{fx.CWD}/greet.py",
                        "oldString": "helo",
                        "newString": "hello",
                    },
                },
                {
                    "id": "toolu_write",
                    "name": "write",
                    "input": {"filePath": f"{fx.CWD}/notes.md", "content": fx.NOTES},
                },
            ],
        },
        tool("msg_a02", "toolu_edit", "edit", "Edit applied successfully.", 3500),
        tool("msg_a02", "toolu_write", "write", "Wrote file successfully.", 4500),
        {
            "role": "assistant",
            "content": "",
            "model": CLAUDE_MODEL,
            "model_label": label,
            "created_at": at(2000),
            "source_id": step_two,
            "tool_calls": [
                {
                    "id": "toolu_outside",
                    "name": "edit",
                    "input": {"filePath": fx.OUTSIDE, "oldString": "a", "newString": "b"},
                },
                {"id": "toolu_bash", "name": "bash", "input": {"command": "pytest"}},
            ],
        },
        tool(step_two, "toolu_outside", "edit", "Edit applied successfully.", 5500),
        tool(step_two, "toolu_bash", "bash", "Exit code 1", 6500, is_error=True),
        {
            "role": "assistant",
            "content": "Done.",
            "model": CLAUDE_MODEL,
            "model_label": label,
            "created_at": at(10_000),
            "source_id": "msg_a03",
        },
    ]
    assert_calls_answered(session)
    assert changes(session) == {
        "msg_a02#call-toolu_edit": ImportedFileChange(
            "greet.py", fx.GREET_BEFORE.encode(), fx.GREET_AFTER.encode()
        ),
        "msg_a02#call-toolu_write": ImportedFileChange("notes.md", None, fx.NOTES.encode()),
    }
    assert bundle.report.skipped == {
        "synthetic text part": 1,
        "file that is not a JSON object": 1,
        "file change outside the working directory": 1,
        "unknown part type mystery": 1,
        "sub-agent session": 1,
    }


def test_opencode_accepts_storage_data_dir_and_session_file(tmp_path: Path) -> None:
    storage = fx.write_opencode_tree(tmp_path)
    file = storage / "session" / fx.PROJECT_ID / f"{fx.OPENCODE_SESSION}.json"
    reads = [opencode.parse(p) for p in (tmp_path, storage, file)]
    assert view(reads[0].sessions[0]) == view(reads[1].sessions[0]) == view(reads[2].sessions[0])
    with pytest.raises(InvalidImport, match="not an opencode session file"):
        opencode.parse(storage / "project" / f"{fx.PROJECT_ID}.json")


def test_opencode_unfinished_tool_call_keeps_an_empty_result(tmp_path: Path) -> None:
    storage = fx.write_opencode_tree(tmp_path)
    part = storage / "part" / "msg_a02" / "prt_b09.json"  # the failed bash call
    value = json.loads(part.read_text())
    value["state"] = {"status": "running", "input": {"command": "pytest"}, "time": {"start": fx.T0}}
    part.write_text(json.dumps(value))

    bundle = opencode.parse(storage)

    [bash] = [
        m.message
        for m in bundle.sessions[0].messages
        if m.message.get("tool_call_id") == "toolu_bash"
    ]
    assert bash["content"] == ""
    assert "is_error" not in bash
    assert bundle.report.skipped["tool call without a result"] == 1


# --- all three --------------------------------------------------------------------------------

BUILDERS: dict[str, tuple[Parse, Callable[[Path], Path]]] = {
    "claude-code": (claude_code.parse, lambda root: fx.write_claude_tree(root).parent.parent),
    "codex": (codex.parse, lambda root: fx.write_codex_tree(root).parents[3]),
    "opencode": (opencode.parse, fx.write_opencode_tree),
}


@pytest.mark.parametrize("source", BUILDERS)
def test_missing_or_empty_paths_are_invalid(source: str, tmp_path: Path) -> None:
    parse, _build = BUILDERS[source]
    with pytest.raises(InvalidImport, match=r"does not exist|not an opencode storage"):
        parse(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidImport):
        parse(tmp_path / "empty")


@pytest.mark.parametrize("source", ["claude-code", "codex"])
def test_a_file_of_garbage_is_invalid(source: str, tmp_path: Path) -> None:
    parse, _build = BUILDERS[source]
    file = tmp_path / "rollout-x.jsonl"
    file.write_bytes(b"\x00\xff not json\n[1, 2]\n")
    with pytest.raises(InvalidImport, match="holds no readable"):
        parse(file)


@pytest.mark.parametrize("source", ["claude-code", "codex"])
def test_a_file_too_large_is_skipped_and_counted(source: str, tmp_path: Path) -> None:
    parse, build = BUILDERS[source]
    root = build(tmp_path / "tree")
    huge = root / "big" / "rollout-big.jsonl"
    huge.parent.mkdir()
    with huge.open("wb") as out:  # sparse: no disk space used
        out.truncate(transcripts.MAX_FILE_BYTES + 1)

    bundle = parse(root)

    assert len(bundle.sessions) == 1
    assert bundle.report.skipped["file larger than 512 MiB"] == 1


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/home/ada/proj/src/a.py", "src/a.py"),
        ("src/a.py", "src/a.py"),
        ("/home/ada/proj/../other/a.py", None),
        ("/home/ada/projX/a.py", None),
        ("/home/ada/proj", None),
        ("/etc/passwd", None),
    ],
)
def test_file_change_paths_stay_inside_the_working_directory(
    path: str, expected: str | None
) -> None:
    assert transcripts.relative_path("/home/ada/proj", path) == expected


def test_windows_paths_are_made_relative() -> None:
    assert (
        transcripts.relative_path("C:\\Users\\ada\\proj", "C:\\Users\\ada\\proj\\src\\a.py")
        == "src/a.py"
    )
    assert transcripts.relative_path("C:\\Users\\ada\\proj", "D:\\proj\\a.py") is None


JUNK: list[Any] = [
    None,
    0,
    -1,
    1e308,
    "",
    "x",
    [],
    {},
    [None],
    {"type": None},
    True,
    "2025-13-45T99:99",
]


def mutate(value: Any, rng: random.Random) -> Any:
    """`value` with one nested field replaced by junk (or the whole value, at the top)."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        return {**value, key: mutate(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        index = rng.randrange(len(value))
        return [*value[:index], mutate(value[index], rng), *value[index + 1 :]]
    return rng.choice(JUNK)


def garble_file(file: Path, rng: random.Random) -> None:
    data = file.read_bytes()
    choice = rng.randrange(4)
    if choice == 0 and data:  # truncated
        file.write_bytes(data[: rng.randrange(len(data))])
    elif choice == 1 and data:  # bytes flipped
        raw = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        file.write_bytes(bytes(raw))
    else:  # a field of some records (or of the document) replaced by junk
        lines = data.split(b"\n")
        for _ in range(rng.randint(1, 4)):
            index = rng.randrange(len(lines))
            try:
                value = json.loads(lines[index])
            except ValueError:
                continue
            lines[index] = json.dumps(mutate(value, rng)).encode()
        file.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("source", BUILDERS)
def test_garbled_input_gives_a_bundle_or_a_model_error(source: str, tmp_path: Path) -> None:
    parse, build = BUILDERS[source]
    rng = random.Random(f"transcripts-{source}")
    outcomes = {"bundle": 0, "error": 0}
    for attempt in range(120):
        root = build(tmp_path / str(attempt))
        files = sorted(Path(d) / n for d, _s, names in os.walk(root) for n in names)
        for file in rng.sample(files, k=min(len(files), rng.randint(1, 3))):
            garble_file(file, rng)
        try:
            bundle = parse(root)
        except MODEL_ERRORS:
            outcomes["error"] += 1
            continue
        outcomes["bundle"] += 1
        for session in bundle.sessions:
            assert_calls_answered(session)
            for message in session.messages:
                assert isinstance(message.message["content"], str)
                assert message.message["created_at"].endswith("Z")
    assert outcomes["bundle"] > 0
