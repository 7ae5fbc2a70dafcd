"""ChatBuddy sessions and messages in the kernel's Message shape (chatbuddy-backup.md §6).

- A session becomes `chatbuddy:<session id>`, titled when its title was custom or generated
  (a v1 session without titleSource keeps any title but the default "New Session"/"新会话").
  Message ids key re-imports; a message whose id repeats in its session is skipped, counted.
- A user message keeps its content; attached files become `model_content` (the content, then
  one fenced `// File: name` block per file, as ChatBuddy sent them to the model).
- Images become `ImportedImage`s: inline base64 decoded (invalid base64: skipped, counted);
  path-only ones (ChatBuddy kept their bytes outside the backup) are read from `images_dir`,
  by a plain file name directly in it and nothing else, or counted as not in the backup.
- An assistant message's tool rounds expand, per round, to an assistant message with the
  round's tool calls (input = the parsed argumentsText, or the raw text if it is not JSON) and
  reasoning, then one tool message per call (output, or ""), then the answer itself: all at the
  answer's timestamp, with source ids `<id>#round-<i>` and `<id>#call-<call id>`. `model` is the
  label's model id ("gpt-4o | OpenAI" → "gpt-4o", the label kept as `model_label`), or the raw
  ref ChatBuddy wrote when the model was not listed. A greeting (no model) is kept.
- System messages are skipped and counted.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

from app.imports import safejson
from app.imports.chatbuddy_format import as_array, as_object, as_optional_text, as_text
from app.imports.model import (
    ImportedImage,
    ImportedMessage,
    ImportedSession,
    ImportReport,
    InvalidImport,
)
from app.jsontypes import JSONObject

DEFAULT_TITLES = frozenset({"New Session", "新会话"})
KEPT_TITLE_SOURCES = frozenset({"custom", "generated"})
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


class SessionMapper:
    """Maps sessions and their messages; counts what it leaves out in `report`."""

    def __init__(self, report: ImportReport, images_dir: Path | None) -> None:
        self.report = report
        self.images_dir = images_dir

    def session(self, raw: JSONObject, assistant: tuple[str, str | None] | None) -> ImportedSession:
        """One session; `assistant` is its assistant's (model ref, rule key) if known."""
        sid = as_text(raw.get("id"), "a session's id")
        where = f"session {sid}"
        model, rule = assistant or ("", None)
        messages: list[ImportedMessage] = []
        seen: set[str] = set()
        for position, item in enumerate(as_array(raw.get("messages", []), f"{where} messages"), 1):
            mapped = self.message(as_object(item, f"{where} message {position}"), sid, where)
            if any(m.source_id in seen for m in mapped):
                self.report.skip("message with a duplicate id")
                continue
            seen.update(m.source_id for m in mapped)
            messages.extend(mapped)
        return ImportedSession(
            source=f"chatbuddy:{sid}",
            title=_title(raw),
            created_at_ns=_ms(raw.get("createdAt"), f"{where} createdAt") * 1_000_000,
            updated_at_ns=_ms(raw.get("updatedAt"), f"{where} updatedAt") * 1_000_000,
            messages=messages,
            model=model,
            rule=rule,
        )

    def message(self, raw: JSONObject, sid: str, where: str) -> list[ImportedMessage]:
        """The messages one ChatBuddy message becomes: none, one, or a tool-round expansion."""
        mid = as_text(raw.get("id"), f"{where}: a message's id")
        where = f"{where} message {mid}"
        role = raw.get("role")
        content = as_optional_text(raw.get("content"), f"{where} content")
        created = _iso(_ms(raw.get("timestamp"), f"{where} timestamp"))
        if role == "system":
            self.report.skip("system message")
            return []
        if role not in ("user", "assistant"):
            self.report.skip("message with an unknown role")
            return []
        message: JSONObject = {"role": role, "content": content, "created_at": created}
        images = self.images(raw.get("images"), f"{sid}_{mid}", where)
        if role == "user":
            files = [
                _file_block(f, where) for f in as_array(raw.get("files") or [], f"{where} files")
            ]
            if files:
                message["model_content"] = "\n\n".join([content, *files] if content else files)
            return [ImportedMessage(message, mid, images)]
        label = as_optional_text(raw.get("model"), f"{where} model")
        if label:
            message["model"] = label.split(" | ", 1)[0]
            if " | " in label:
                message["model_label"] = label
        expanded = _rounds(raw.get("toolRounds"), message, mid, where)
        reasoning = as_optional_text(raw.get("reasoning"), f"{where} reasoning")
        if reasoning:
            message["reasoning"] = reasoning
        return [*expanded, ImportedMessage(message, mid, images)]

    def images(self, value: Any, stem: str, where: str) -> list[ImportedImage]:
        """A message's images that have bytes; the others are counted in the report."""
        images = []
        for index, item in enumerate(as_array(value or [], f"{where} images")):
            image = as_object(item, f"{where} image {index + 1}")
            encoded = as_optional_text(image.get("base64"), f"{where} image base64")
            path = as_optional_text(image.get("path"), f"{where} image path")
            if encoded:
                try:
                    data = base64.b64decode(encoded, validate=True)
                except (binascii.Error, ValueError):
                    self.report.skip("image with invalid base64")
                    continue
                mime = as_optional_text(image.get("mimeType"), f"{where} image mimeType")
                name = (
                    path if _plain_name(path) else f"{stem}_{index}.{_EXTENSIONS.get(mime, 'bin')}"
                )
                images.append(ImportedImage(data, name))
            elif path:
                found = self.image_file(path)
                if found is not None:
                    images.append(ImportedImage(found, path))
            else:
                self.report.skip("image without data")
        return images

    def image_file(self, name: str) -> bytes | None:
        """A path-only image's bytes from `images_dir`: a plain file name directly in it."""
        if self.images_dir is None:
            self.report.skip("image not in the backup")
            return None
        if not _plain_name(name):
            self.report.skip("image path that is not a plain file name")
            return None
        try:
            folder = self.images_dir.resolve()
            path = (folder / name).resolve()
            if path.parent == folder and path.is_file():
                return path.read_bytes()
        except OSError:
            pass
        self.report.skip("image not found in the images directory")
        return None


def _rounds(value: Any, answer: JSONObject, mid: str, where: str) -> list[ImportedMessage]:
    """The messages one answer's tool rounds expand to (model and time as the answer's)."""
    if isinstance(value, str):  # older builds stored the rounds as a JSON string
        try:
            value = safejson.loads(value) if value else []
        except (ValueError, RecursionError):
            raise InvalidImport(f"{where} toolRounds is not valid JSON") from None
    out: list[ImportedMessage] = []
    created: JSONObject = {"created_at": answer["created_at"]}
    by: JSONObject = {k: answer[k] for k in ("model", "model_label") if k in answer}
    for index, item in enumerate(as_array(value or [], f"{where} toolRounds")):
        round_ = as_object(item, f"{where} tool round {index + 1}")
        calls: list[JSONObject] = []
        results: list[ImportedMessage] = []
        for number, entry in enumerate(as_array(round_.get("calls") or [], f"{where} calls")):
            call = as_object(entry, f"{where} tool round {index + 1} call {number + 1}")
            raw_id = call.get("id")
            used = {c["id"] for c in calls}
            cid = raw_id if isinstance(raw_id, str) and raw_id and raw_id not in used else ""
            cid = cid or f"{mid}-{index}-{number}"
            name = as_optional_text(call.get("name"), f"{where} call {cid} name")
            arguments = as_optional_text(call.get("argumentsText"), f"{where} call {cid} arguments")
            calls.append({"id": cid, "name": name, "input": _arguments(arguments)})
            output = call.get("output")
            text = (
                output if isinstance(output, str) else "" if output is None else json.dumps(output)
            )
            result = {"role": "tool", "tool_call_id": cid, "name": name, "content": text}
            results.append(ImportedMessage({**result, **created}, f"{mid}#call-{cid}"))
        reasoning = as_optional_text(round_.get("reasoning"), f"{where} round reasoning")
        if not calls and not reasoning:
            continue
        head: JSONObject = {"role": "assistant", "content": "", **created, **by}
        if calls:
            head["tool_calls"] = calls
        if reasoning:
            head["reasoning"] = reasoning
        out.append(ImportedMessage(head, f"{mid}#round-{index}"))
        out.extend(results)
    return out


def _title(session: JSONObject) -> str | None:
    title, source = session.get("title"), session.get("titleSource")
    if not isinstance(title, str) or not title.strip():
        return None
    if isinstance(source, str) and source in KEPT_TITLE_SOURCES:
        return title
    if source is None and title.strip() not in DEFAULT_TITLES:
        return title
    return None


def _file_block(value: Any, where: str) -> str:
    file = as_object(value, f"{where} file")
    name = as_optional_text(file.get("name"), f"{where} file name")
    text = as_optional_text(file.get("content"), f"{where} file {name} content")
    language = as_optional_text(file.get("language"), f"{where} file {name} language")
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"```{language}\n// File: {name}\n{body}```"


def _arguments(text: str) -> Any:
    try:
        return safejson.loads(text)
    except (ValueError, RecursionError):
        return text


def _ms(value: Any, where: str) -> int:
    """A ChatBuddy timestamp (ms since the epoch) checked and as an int."""
    if type(value) not in (int, float) or not math.isfinite(value) or not 0 <= value <= _MAX_MS:
        raise InvalidImport(f"{where} is not a timestamp in milliseconds")
    return int(value)


def _iso(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    stamp = dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{millis:03d}Z"


def _plain_name(name: str) -> bool:
    return name not in ("", ".", "..") and not any(c in name for c in "/\\\x00")
