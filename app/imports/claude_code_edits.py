"""The file changes of Claude Code's file tools, read from a tool result's `toolUseResult`.

Write's result is {type create|update, filePath, content, originalFile}; Edit's {filePath,
oldString, newString, replaceAll, originalFile}; MultiEdit's {filePath, edits, originalFile}.
A change is kept only when the file is known in full before and after: Write's `originalFile`
(null for a new file) and `content`, or Edit/MultiEdit's `originalFile` with the edits replayed
on it. The call's own input stands in for a field the result leaves out.
"""

from __future__ import annotations

from typing import Any

from app.imports import transcripts as t
from app.imports.model import ImportedFileChange, ImportReport
from app.jsontypes import JSONObject


def file_change(
    name: str, tool_input: Any, result: JSONObject, cwd: str, report: ImportReport
) -> ImportedFileChange | None:
    """The change a Write, Edit or MultiEdit call made, from its record's `toolUseResult`;
    None (counted when it is a file tool) when the record does not carry the file in full."""
    if name not in ("Write", "Edit", "MultiEdit"):
        return None
    given = tool_input if isinstance(tool_input, dict) else {}
    path = t.text(result, "filePath") or t.text(given, "file_path")
    original = result.get("originalFile", result.get("originalFileContents", ...))
    after: str | None = None
    if name == "Write" and isinstance(result.get("content"), str):
        if original is None and result.get("type") == "create":
            return t.file_change(cwd, path, None, result["content"], report)
        after = result["content"]
    elif name == "Edit" and isinstance(original, str):
        edit = {
            "old_string": result.get("oldString", t.obj({"i": tool_input}, "i").get("old_string")),
            "new_string": result.get("newString", t.obj({"i": tool_input}, "i").get("new_string")),
            "replace_all": result.get(
                "replaceAll", t.obj({"i": tool_input}, "i").get("replace_all")
            ),
        }
        after = replay(original, [edit])
    elif name == "MultiEdit" and isinstance(original, str):
        after = replay(original, t.items(result, "edits") or t.items(given, "edits"))
    if not isinstance(original, str) or after is None or not path:
        report.skip(t.NOT_IN_FULL)
        return None
    return t.file_change(cwd, path, original, after, report)


def replay(original: str, edits: list[Any]) -> str | None:
    """`original` with the edits applied in order; None when one does not apply."""
    content = original
    for edit in edits:
        old, new = (
            t.text(edit, "old_string"),
            edit.get("new_string") if isinstance(edit, dict) else None,
        )
        if not isinstance(new, str) or (old == "" and content != "") or old not in content:
            return None
        if old == "":
            content = new
        elif edit.get("replace_all") is True:
            content = content.replace(old, new)
        else:
            content = content.replace(old, new, 1)
    return content
