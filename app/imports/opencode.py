"""opencode sessions → `ImportBundle` (source "opencode").

Layout (the JSON file storage, `~/.local/share/opencode/storage/`): `session/<projectID>/
<sessionID>.json` {id, title, directory, parentID, time {created, updated}},
`message/<sessionID>/<messageID>.json` {role, time {created}, modelID, providerID, path {cwd}},
`part/<messageID>/<partID>.json` {type: text | reasoning | tool {callID, tool, state {status,
input, output | error, metadata, time, attachments}} | file {mime, url} | step-start |
step-finish | snapshot | patch | …}. Ids are taken from the file names, as opencode's own
migration does. `parse` takes the storage directory, the data directory holding `storage/`, or
one session file. Read from sst/opencode (now anomalyco/opencode):
`packages/opencode/src/storage/storage.ts` (commit 00d1fee8), `storage/json-migration.ts`
(commit 062aa8c0), `session/message-v2.ts` (commit 007a9409) and `tool/edit.ts` (commit
00937b92). Later opencode versions move this storage into an SQLite database (`opencode.db`)
after migrating it; that database is not read here.

Mapping: user text parts and image file parts (data URLs) → user messages; each step of an
assistant message (parts between `step-start`s: text, reasoning, tool calls) → one assistant
message with `model` (and "provider/model" as `model_label`), each tool part → the tool message
of its call (`is_error` for status "error"). File changes: the edit tool's
`metadata.filediff` {file, before, after} when it carries both sides, and the write tool when
`metadata.exists` is false (a new file; its content is the input).

Skipped and counted: sub-agent sessions (those with a `parentID`), synthetic and ignored text
parts, non-image attachments, agent/subtask/compaction parts, unknown part types, files that are
not JSON. Step-finish, snapshot, patch and retry parts are bookkeeping and ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from app.imports import transcripts as t
from app.imports.conversation import Conversation, finish
from app.imports.model import (
    ImportBundle,
    ImportedFileChange,
    ImportedImage,
    ImportedSession,
    ImportReport,
    InvalidImport,
    Progress,
)
from app.jsontypes import JSONObject

_BOOKKEEPING = {"step-finish", "snapshot", "patch", "retry"}
_COUNTED = {"agent", "subtask", "compaction"}


def parse(path: Path, *, progress: Progress | None = None) -> ImportBundle:
    """Every top-level session in the opencode storage at `path` (or the one session file)."""
    root, files = _session_files(path)
    bundle = ImportBundle(source="opencode")
    for done, file in enumerate(files, start=1):
        found = _Session(root, bundle.report).read(file)
        if found is not None:
            bundle.sessions.append(found)
        if progress is not None:
            progress(done, len(files))
    if not bundle.sessions:
        raise InvalidImport(f"{path} holds no readable opencode session")
    return bundle


def _session_files(path: Path) -> tuple[Path, list[Path]]:
    if t.kind_of(path) == "file":
        root = path.parent.parent.parent
        if path.suffix != ".json" or path.parent.parent.name != "session":
            raise InvalidImport(
                f"{path} is not an opencode session file (storage/session/<project>/<id>.json)"
            )
        return root, [path]
    if _is_dir(path / "storage"):
        path = path / "storage"
    if not _is_dir(path / "session"):
        raise InvalidImport(f"{path} is not an opencode storage directory (no session/ in it)")
    files = sorted(
        file
        for project in _entries(path / "session")
        if _is_dir(project)
        for file in _files(project)
    )
    if not files:
        raise InvalidImport(f"{path} holds no opencode sessions")
    return path, files


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _entries(directory: Path) -> list[Path]:
    try:
        return sorted(directory / name for name in os.listdir(directory))
    except OSError:
        return []


class _Session:
    """One session file, its messages and their parts, read into one session."""

    def __init__(self, root: Path, report: ImportReport) -> None:
        self.root = root
        self.report = report
        self.conversation = Conversation(report)
        self.times: list[int] = []
        self.cwd = ""

    def _json(self, file: Path) -> JSONObject | None:
        data = t.read_file(file, self.report)
        value = None if data is None else t.load_json(data)
        if data is not None and not isinstance(value, dict):
            self.report.skip("file that is not a JSON object")
        return value if isinstance(value, dict) else None

    def _time(self, value: Any) -> str | None:
        ns = t.time_ns(value)
        if ns is not None:
            self.times.append(ns)
        return None if ns is None else t.iso(ns)

    def read(self, file: Path) -> ImportedSession | None:
        info = self._json(file)
        if info is None:
            return None
        if info.get("parentID"):
            self.report.skip("sub-agent session")
            return None
        session_id = file.stem
        self.cwd = t.text(info, "directory")
        times = t.obj(info, "time")
        start = self._time(times.get("created")) or t.iso(0)
        self._time(times.get("updated"))
        messages = [
            (file.stem, message)
            for file in _files(self.root / "message" / session_id)
            if (message := self._json(file)) is not None
        ]
        messages.sort(key=lambda m: (_number(t.obj(m[1], "time").get("created")), m[0]))
        last = start
        for message_id, message in messages:
            last = self._time(t.obj(message, "time").get("created")) or last
            parts = [p for p in map(self._json, _files(self.root / "part" / message_id)) if p]
            if t.text(message, "role") == "user":
                self._user(message_id, last, parts)
            elif t.text(message, "role") == "assistant":
                self.cwd = self.cwd or t.text(t.obj(message, "path"), "cwd")
                self._assistant(message_id, message, last, parts)
            else:
                t.skip_unknown(self.report, "message role", message.get("role"))
        title = t.text(info, "title") or None
        return finish(
            f"opencode:{session_id}", title, self.conversation, self.times, self.cwd, self.report
        )

    def _user(self, message_id: str, created_at: str, parts: list[JSONObject]) -> None:
        texts: list[str] = []
        images: list[ImportedImage] = []
        for part in parts:
            kind = t.text(part, "type")
            if kind == "text" and (part.get("synthetic") is True or part.get("ignored") is True):
                self.report.skip("synthetic text part")
            elif kind == "text":
                texts.append(t.text(part, "text"))
            elif kind == "file":
                self._image(part, images)
            else:
                self._other(kind)
        self.conversation.user(message_id, created_at, "\n\n".join(x for x in texts if x), images)

    def _assistant(
        self, message_id: str, message: JSONObject, created_at: str, parts: list[JSONObject]
    ) -> None:
        model = t.text(message, "modelID")
        provider = t.text(message, "providerID")
        label = f"{provider}/{model}" if provider and model else ""
        step = 0
        first_step: int | None = None
        for part in parts:
            kind = t.text(part, "type")
            if kind == "step-start":
                step += 1
                continue
            if kind not in ("text", "reasoning", "tool"):
                self._other(kind)
                continue
            first_step = step if first_step is None else first_step
            source_id = message_id if step == first_step else f"{message_id}#step-{step}"
            fields: JSONObject = {"model": model, "model_label": label}
            if kind == "text" and part.get("ignored") is not True:
                fields["content"] = t.text(part, "text")
            elif kind == "reasoning":
                fields["reasoning"] = t.text(part, "text")
            elif kind == "tool":
                state = t.obj(part, "state")
                call = (t.text(part, "callID"), t.text(part, "tool"), state.get("input", {}))
                fields["calls"] = [call]
            self.conversation.assistant(source_id, created_at, key=(message_id, step), **fields)
            if kind == "tool":
                self._result(part, created_at)

    def _result(self, part: JSONObject, created_at: str) -> None:
        state = t.obj(part, "state")
        status = t.text(state, "status")
        if status not in ("completed", "error"):
            return  # pending or running: the tool message keeps content ""
        call_id = t.text(part, "callID")
        images: list[ImportedImage] = []
        for attachment in t.items(state, "attachments"):
            self._image(attachment, images)
        ended = self._time(t.obj(state, "time").get("end")) or created_at
        answered = self.conversation.result(
            call_id,
            t.text(state, "output" if status == "completed" else "error"),
            created_at=ended,
            is_error=status == "error",
            images=images,
        )
        if answered and status == "completed":
            change = self._file_change(t.text(part, "tool"), state)
            if change is not None:
                self.conversation.attach_change(call_id, change)

    def _file_change(self, tool: str, state: JSONObject) -> ImportedFileChange | None:
        given = t.obj(state, "input")
        metadata = t.obj(state, "metadata")
        if tool == "edit":
            diff = t.obj(metadata, "filediff")
            before, after = diff.get("before"), diff.get("after")
            path = t.text(diff, "file") or t.text(given, "filePath")
            if isinstance(before, str) and isinstance(after, str) and path:
                return t.file_change(self.cwd, path, before, after, self.report)
        elif tool == "write":
            content, path = given.get("content"), t.text(given, "filePath")
            if metadata.get("exists") is False and isinstance(content, str) and path:
                return t.file_change(self.cwd, path, None, content, self.report)
        else:
            return None
        self.report.skip(t.NOT_IN_FULL)
        return None

    def _image(self, part: Any, images: list[ImportedImage]) -> None:
        if not t.text(part, "mime").startswith("image/"):
            self.report.skip("attachment that is not an image")
            return
        found = t.data_url_image(t.text(part, "url"), len(images) + 1, self.report)
        if found is not None:
            images.append(found)

    def _other(self, kind: str) -> None:
        if kind in _COUNTED or kind == "file":
            self.report.skip(f"{kind} part")
        elif kind not in _BOOKKEEPING:
            t.skip_unknown(self.report, "part type", kind)


def _files(directory: Path) -> list[Path]:
    """The `*.json` files of a directory, by name (opencode ids sort in creation order)."""
    return [entry for entry in _entries(directory) if entry.suffix == ".json"]


def _number(value: Any) -> float:
    """A sort key from a JSON number; 0 for anything else (or a number too large)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return 0.0
    return 0.0
