"""Claude Code session transcripts → `ImportBundle` (source "claude-code").

Layout: `~/.claude/projects/<cwd with "/" replaced by "-">/<session uuid>.jsonl`; `parse` takes
one such file, one project directory or the whole `projects` directory (every `*.jsonl` below).
Anthropic publishes no source for Claude Code; the format was read from public parsers and
documented samples: daaain/claude-code-log `claude_code_log/models.py` (commit 05cc97e4) and
the `toolUseResult` shapes of Write/Edit quoted in public transcripts.

One line is one record: `type` (user, assistant, summary, system, …), `uuid`, `parentUuid`,
`sessionId`, `timestamp`, `cwd`, `isSidechain`, `isMeta`, `message` {role, content blocks: text,
thinking, tool_use {id, name, input}, tool_result {tool_use_id, content, is_error}, image
{source {type base64, media_type, data}}}, and on a tool's result record `toolUseResult`, which
for Write is {type create|update, filePath, content, originalFile} and for Edit / MultiEdit
{filePath, oldString, newString, replaceAll | edits, originalFile}.

The session key is the file name (Claude Code names the file after the session), else the
last `sessionId` of the kept branch (an uploaded file may be named anything).

Mapping: user text and images → user messages; the records of one API response (same
`message.id`, written one content block per record) → one assistant message with its text,
thinking as `reasoning`, tool_use blocks as `tool_calls` and `model`; each tool_result → the tool
message of its call (`is_error` when the record says so), with a file change when the record's
`toolUseResult` carries the whole file before and after (Edit/MultiEdit: `originalFile` plus the
edits replayed on it; Write: `originalFile`, null for a new file, plus `content`), read by
app.imports.claude_code_edits.

Skipped and counted: sub-agent (sidechain) records, `isMeta` and slash-command records, system
records, records on an abandoned branch, unknown record and block types, lines that are not
JSON. Bookkeeping records (file-history-snapshot, queue-operation, progress, attachment, titles)
carry no conversation and are read for titles only or ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from app.imports import claude_code_edits as edits
from app.imports import transcripts as t
from app.imports.conversation import Conversation, finish
from app.imports.model import (
    ImportBundle,
    ImportedImage,
    ImportedSession,
    ImportReport,
    Progress,
)
from app.jsontypes import JSONObject

_IGNORED = {"file-history-snapshot", "queue-operation", "progress", "attachment"}
_TITLES = {"summary", "ai-title", "custom-title"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_COMMAND_MARKERS = ("<command-name>", "<command-message>", "<local-command-", "<bash-stdout>")


def parse(path: Path, *, progress: Progress | None = None) -> ImportBundle:
    """Every session in the transcript file or directory `path`."""
    files = t.find_files(path, lambda name: name.endswith(".jsonl"), "Claude Code transcripts")
    bundle = ImportBundle(source="claude-code")

    def read(file: Path, data: bytes) -> ImportedSession | None:
        return _session(file, data, bundle.report)

    return t.read_sessions(path, files, bundle, read, "Claude Code session", progress)


def _session(file: Path, data: bytes, report: ImportReport) -> ImportedSession | None:
    lines = list(t.json_lines(data, report))
    records = [record for _n, record in lines]
    line_of = {id(record): number for number, record in lines}
    main: list[JSONObject] = []
    for record in records:
        kind = t.text(record, "type")
        if kind in ("user", "assistant") and record.get("isSidechain") is True:
            report.skip("sub-agent (sidechain) record")
        elif kind in ("user", "assistant", "system"):
            main.append(record)
        elif kind not in _IGNORED and kind not in _TITLES:
            t.skip_unknown(report, "record type", record.get("type"))
    chain = _chain(records, main)
    conversation = Conversation(report)
    times: list[int] = []
    cwd = ""
    session_id = ""
    first_text = ""
    fallback = _mtime(file)
    for record in main:
        if id(record) not in chain:
            if record.get("type") != "system":
                report.skip("record on an abandoned branch")
            continue
        ns = t.time_ns(record.get("timestamp"))
        if ns is not None:
            times.append(ns)
        created_at = t.iso(times[-1] if times else fallback)
        source_id = t.text(record, "uuid") or f"line-{line_of[id(record)]}"
        cwd = cwd or t.text(record, "cwd")
        session_id = t.text(record, "sessionId") or session_id
        if record.get("type") == "system":
            report.skip("system record")
        elif record.get("isMeta") is True:
            report.skip("meta record")
        elif record.get("type") == "user":
            text = _user(record, source_id, created_at, conversation, cwd, report)
            first_text = first_text or text
        else:
            _assistant(record, source_id, created_at, conversation, report)
    title = _title(records, {t.text(r, "uuid") for r in main if id(r) in chain})
    # Claude Code names the file after the session; a resumed session's file starts with records
    # that still carry the previous session's id, so the name wins and the last id comes next.
    source = f"claude-code:{file.stem if _UUID.fullmatch(file.stem) else session_id or file.stem}"
    return finish(source, title or t.title_from(first_text), conversation, times, cwd, report)


def _chain(records: list[JSONObject], main: list[JSONObject]) -> set[int]:
    """The records (by `id()`) of the branch written last. A rewind or an edited prompt leaves
    the old branch in the file and appends the new one, so the last user/assistant record is
    the tip of the branch the user kept; its `parentUuid` links (or `logicalParentUuid` across a
    compaction boundary) lead back to the start. Without uuids, every record is kept."""
    talk = [r for r in main if r.get("type") in ("user", "assistant")]
    if not talk or not t.text(talk[-1], "uuid"):
        return {id(r) for r in main}
    by_uuid = {t.text(r, "uuid"): r for r in records if t.text(r, "uuid")}
    chain: set[int] = set()
    uuid = t.text(talk[-1], "uuid")
    while uuid in by_uuid and id(by_uuid[uuid]) not in chain:
        record = by_uuid[uuid]
        chain.add(id(record))
        uuid = t.text(record, "parentUuid") or t.text(record, "logicalParentUuid")
    return chain


def _title(records: list[JSONObject], chain_uuids: set[str]) -> str | None:
    """A title the user set, else the summary of this conversation, else Claude's own title."""
    found: dict[str, str] = {}
    for record in records:
        kind = t.text(record, "type")
        if kind == "custom-title" and t.text(record, "customTitle"):
            found[kind] = t.text(record, "customTitle")
        elif kind == "summary" and t.text(record, "leafUuid") in chain_uuids:
            found[kind] = t.text(record, "summary")
        elif kind == "ai-title" and t.text(record, "aiTitle"):
            found[kind] = t.text(record, "aiTitle")
    for kind in ("custom-title", "summary", "ai-title"):
        if found.get(kind):
            return t.title_from(found[kind])
    return None


def _user(
    record: JSONObject,
    source_id: str,
    created_at: str,
    conversation: Conversation,
    cwd: str,
    report: ImportReport,
) -> str:
    """Map a user record (its text, images and tool results); returns the text it adds."""
    message = t.obj(record, "message")
    content = message.get("content")
    blocks = (
        [{"type": "text", "text": content}]
        if isinstance(content, str)
        else t.items(message, "content")
    )
    texts: list[str] = []
    images: list[ImportedImage] = []
    results = [b for b in blocks if t.text(b, "type") == "tool_result"]
    for block in blocks:
        kind = t.text(block, "type")
        if kind == "text":
            texts.append(t.text(block, "text"))
        elif kind == "image":
            _image(block, len(images) + 1, images, report)
        elif kind != "tool_result":
            t.skip_unknown(report, "content block", kind)
    for block in results:
        # `toolUseResult` belongs to the record, so it is only unambiguous for a lone result.
        extra = record.get("toolUseResult") if len(results) == 1 else None
        _result(block, created_at, extra, conversation, cwd, report)
    text = "\n\n".join(x for x in texts if x)
    if any(marker in text for marker in _COMMAND_MARKERS):
        report.skip("slash-command record")
        return ""
    conversation.user(source_id, created_at, text, images)
    return text


def _result(
    block: JSONObject,
    created_at: str,
    extra: Any,
    conversation: Conversation,
    cwd: str,
    report: ImportReport,
) -> None:
    call_id = t.text(block, "tool_use_id")
    content = block.get("content")
    images: list[ImportedImage] = []
    if isinstance(content, list):
        parts = []
        for part in content:
            if t.text(part, "type") == "image":
                _image(part, len(images) + 1, images, report)
            else:
                parts.append(t.text(part, "text"))
        content = "\n".join(parts)
    is_error = block.get("is_error") is True
    answered = conversation.result(
        call_id,
        content if isinstance(content, str) else "",
        created_at=created_at,
        is_error=is_error,
        images=images,
    )
    call = conversation.call(call_id)
    if answered and call is not None and not is_error and isinstance(extra, dict):
        change = edits.file_change(call[0], call[1], extra, cwd, report)
        if change is not None:
            conversation.attach_change(call_id, change)


def _assistant(
    record: JSONObject,
    source_id: str,
    created_at: str,
    conversation: Conversation,
    report: ImportReport,
) -> None:
    message = t.obj(record, "message")
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[tuple[str, str, Any]] = []
    for block in t.items(message, "content"):
        kind = t.text(block, "type")
        if kind == "text":
            texts.append(t.text(block, "text"))
        elif kind == "thinking":
            thoughts.append(t.text(block, "thinking"))
        elif kind == "redacted_thinking":
            report.skip("redacted thinking block")
        elif kind == "tool_use":
            calls.append((t.text(block, "id"), t.text(block, "name"), block.get("input", {})))
        else:
            t.skip_unknown(report, "content block", kind)
    model = t.text(message, "model")
    conversation.assistant(
        source_id,
        created_at,
        key=t.text(message, "id") or None,
        content="\n\n".join(x for x in texts if x),
        reasoning="\n\n".join(x for x in thoughts if x),
        calls=calls,
        model="" if model == "<synthetic>" else model,
    )


def _image(block: Any, number: int, images: list[ImportedImage], report: ImportReport) -> None:
    source = t.obj(block, "source")
    if t.text(source, "type") != "base64":
        report.skip("image without inline data")
        return
    found = t.image(t.text(source, "data"), t.text(source, "media_type"), number, report)
    if found is not None:
        images.append(found)


def _mtime(file: Path) -> int:
    try:
        return file.stat().st_mtime_ns
    except OSError:
        return 0
