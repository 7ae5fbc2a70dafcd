"""OpenAI Codex CLI rollouts → `ImportBundle` (source "codex").

Layout: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`; `parse` takes one rollout or
a directory (every `rollout-*.jsonl`, and `rollout-*.json` of the first TypeScript CLI, below).
Read from openai/codex: `codex-rs/protocol/src/models.rs` (commit 001cb8e2: `ResponseItem`,
`ContentItem`, `FunctionCallOutputPayload`), `codex-rs/core/src/rollout/recorder.rs` (commit
035416bf: `RolloutLine` = {timestamp, type, payload}, read line by line, bad lines counted),
the `PatchApplyEndEvent` / `FileChange` shapes in `codex-rs/protocol/src/protocol.rs`, and
`codex-cli/src/utils/storage/save-rollout.ts` (commit 01d69e28) for the single-JSON rollouts.

Three generations are read:
- current: each line {timestamp, type: session_meta | response_item | event_msg | turn_context |
  compacted, payload};
- mid-2025: a first line {id, timestamp, instructions, git}, then bare response items and
  {"record_type": "state"} lines;
- the TypeScript CLI: one JSON document {session: {id, timestamp}, items: [response items]}.

Mapping: `message` items (user input_text / input_image, assistant output_text) → user and
assistant messages; `reasoning` summaries (or raw reasoning text) → `reasoning`; function_call,
custom_tool_call (apply_patch) and local_shell_call → `tool_calls` (a model response's reasoning,
text and calls join one assistant message until a result or a user message arrives); their
*_output items → tool messages (`is_error` when the output says success: false); the model from
`turn_context`; `cwd` from `session_meta`/`turn_context`. A `patch_apply_end` event that applied
an added or deleted file (the whole content is in the event) becomes that call's file change;
updates carry only a diff and are counted, not mapped.

Skipped and counted: developer/system messages, the environment and instruction messages Codex
injects as user input, compaction markers, web search calls, unknown record and item types,
lines that are not JSON. Other event_msg records repeat the response items and are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

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

_ENVELOPE = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
_ITEMS = {
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "web_search_call",
    "ghost_snapshot",
    "compaction",
    "compaction_summary",
}
_INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions for")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def parse(path: Path, *, progress: Progress | None = None) -> ImportBundle:
    """Every session in the rollout file or sessions directory `path`."""
    files = t.find_files(
        path,
        lambda name: name.startswith("rollout-") and name.endswith((".jsonl", ".json")),
        "Codex rollouts",
    )
    bundle = ImportBundle(source="codex")

    def read(file: Path, data: bytes) -> ImportedSession | None:
        return _Rollout(file, bundle.report).read(data)

    return t.read_sessions(path, files, bundle, read, "Codex session", progress)


class _Rollout:
    """One rollout file read into one session."""

    def __init__(self, file: Path, report: ImportReport) -> None:
        self.file = file
        self.report = report
        self.conversation = Conversation(report)
        self.times: list[int] = []
        self.session_id = ""
        self.cwd = ""
        self.model = ""
        self.first_text = ""
        # A model response (reasoning, text, calls) ends when a result or user input arrives.
        self.step = 0
        try:
            self.fallback = file.stat().st_mtime_ns
        except OSError:
            self.fallback = 0

    def read(self, data: bytes) -> ImportedSession | None:
        # The TypeScript CLI's rollout is one document; any JSONL rollout fails to parse whole.
        document = t.load_json(data)
        if isinstance(document, dict) and isinstance(document.get("items"), list):
            self._meta(t.obj(document, "session"))
            for number, item in enumerate(document["items"], start=1):
                self._item(item, f"item-{number}")
        else:
            for number, record in t.json_lines(data, self.report):
                self._line(number, record)
        if not self.session_id:
            found = _UUID.search(self.file.name)
            self.session_id = found.group(0) if found else self.file.stem
        title = t.title_from(self.first_text)
        return finish(
            f"codex:{self.session_id}", title, self.conversation, self.times, self.cwd, self.report
        )

    def _line(self, number: int, record: JSONObject) -> None:
        kind = t.text(record, "type")
        payload = record.get("payload")
        ns = t.time_ns(record.get("timestamp"))
        if ns is not None:
            self.times.append(ns)
        if kind in _ENVELOPE and isinstance(payload, dict):
            if kind == "session_meta":
                self._meta(payload)
            elif kind == "response_item":
                self._item(payload, str(number))
            elif kind == "turn_context":
                self.cwd = self.cwd or t.text(payload, "cwd")
                self.model = t.text(payload, "model") or self.model
            elif kind == "event_msg":
                self._event(payload)
            else:
                self.report.skip("compaction marker")
        elif record.get("record_type") == "state":
            return
        elif "type" not in record and "id" in record:
            self._meta(record)
        elif kind in _ITEMS:
            self._item(record, str(number))
        else:
            t.skip_unknown(self.report, "record type", record.get("type"))

    def _meta(self, meta: JSONObject) -> None:
        if not self.session_id:  # a forked rollout repeats its parent's meta after its own
            self.session_id = t.text(meta, "id")
            self.cwd = self.cwd or t.text(meta, "cwd")
            ns = t.time_ns(meta.get("timestamp"))
            if ns is not None:
                self.times.append(ns)

    def _item(self, item: Any, source_id: str) -> None:
        kind = t.text(item, "type")
        # Items of older rollouts carry no time: they take the last one read.
        created_at = t.iso(self.times[-1] if self.times else self.fallback)
        conversation = self.conversation
        if kind == "message":
            self._message(item, source_id, created_at)
        elif kind == "reasoning":
            summary = [t.text(x, "text") for x in t.items(item, "summary")]
            raw = [t.text(x, "text") for x in t.items(item, "content")]
            reasoning = "\n\n".join(x for x in summary or raw if x)
            conversation.assistant(source_id, created_at, key=self.step, reasoning=reasoning)
        elif kind in ("function_call", "custom_tool_call"):
            raw_input = item.get("arguments" if kind == "function_call" else "input")
            call = (t.text(item, "call_id"), t.text(item, "name"), t.parse_arguments(raw_input))
            self._call(source_id, created_at, call)
        elif kind == "local_shell_call":
            call_id = t.text(item, "call_id") or t.text(item, "id")
            self._call(source_id, created_at, (call_id, "local_shell", t.obj(item, "action")))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._output(item, created_at)
        elif kind in ("compaction", "compaction_summary"):
            self.report.skip("compaction marker")
        elif kind == "web_search_call":
            self.report.skip("web search call")
        elif kind != "ghost_snapshot":
            t.skip_unknown(self.report, "response item type", item.get("type"))

    def _call(self, source_id: str, created_at: str, call: tuple[str, str, Any]) -> None:
        self.conversation.assistant(
            source_id, created_at, key=self.step, calls=[call], model=self.model
        )

    def _message(self, item: JSONObject, source_id: str, created_at: str) -> None:
        role = t.text(item, "role")
        texts: list[str] = []
        images: list[ImportedImage] = []
        for part in t.items(item, "content"):
            kind = t.text(part, "type")
            if kind in ("input_text", "output_text", "text"):
                texts.append(t.text(part, "text"))
            elif kind == "input_image":
                found = t.data_url_image(t.text(part, "image_url"), len(images) + 1, self.report)
                if found is not None:
                    images.append(found)
            else:
                t.skip_unknown(self.report, "content type", kind)
        text = "\n\n".join(x for x in texts if x)
        if role == "assistant":
            self.conversation.assistant(
                source_id, created_at, key=self.step, content=text, model=self.model
            )
        elif role != "user":
            self.report.skip(f"{role or 'unnamed'} message")
        elif text.lstrip().startswith(_INJECTED):
            self.report.skip("context message Codex injected")
        else:
            self.step += 1
            self.conversation.user(source_id, created_at, text, images)
            self.first_text = self.first_text or text

    def _output(self, item: JSONObject, created_at: str) -> None:
        self.step += 1
        output = item.get("output")
        is_error = False
        images: list[ImportedImage] = []
        if isinstance(output, dict):  # {content, success} of some versions
            is_error = output.get("success") is False
            output = output.get("content")
        if isinstance(output, list):  # content items (MCP results with images)
            texts = []
            for part in output:
                if t.text(part, "type") == "input_image":
                    url = t.text(part, "image_url")
                    found = t.data_url_image(url, len(images) + 1, self.report)
                    if found is not None:
                        images.append(found)
                else:
                    texts.append(t.text(part, "text"))
            output = "\n".join(texts)
        self.conversation.result(
            t.text(item, "call_id"),
            output if isinstance(output, str) else "",
            created_at=created_at,
            is_error=is_error,
            images=images,
        )

    def _event(self, event: JSONObject) -> None:
        if t.text(event, "type") != "patch_apply_end" or event.get("success") is not True:
            return
        call_id = t.text(event, "call_id")
        for path, change in t.obj(event, "changes").items():
            if not isinstance(change, dict):
                self.report.skip(t.NOT_IN_FULL)
                continue
            kind = t.text(change, "type")
            content = change.get("content")
            before: str | None
            after: str | None
            if kind == "add" and isinstance(content, str):
                before, after = None, content
            elif kind == "delete" and isinstance(content, str):
                before, after = content, None
            elif isinstance(change.get("old_content"), str) and isinstance(
                change.get("new_content"), str
            ):
                before, after = change["old_content"], change["new_content"]
            else:
                self.report.skip(t.NOT_IN_FULL)
                continue
            found = t.file_change(self.cwd, path, before, after, self.report)
            if found is not None:
                self.conversation.attach_change(call_id, found)
