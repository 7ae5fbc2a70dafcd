"""A rule or memory file's text as the `Rule`s or `Memory` it holds.

What is wrong with a file (front matter that does not parse, a field of the wrong type, content
over its limit) does not fail the read: it becomes the item's `error`, which the API reports and
the prompt leaves out. An item without an id gets one derived from its path, stable across
reads; one without timestamps takes the file's mtime.
"""

from __future__ import annotations

import os
from pathlib import Path

from app.events import iso_time
from app.jsontypes import JSONObject
from app.kernel.usercontext.items import (
    MAX_MEMORY_CHARS,
    MAX_RULE_CHARS,
    InvalidContextItem,
    Memory,
    Rule,
    apply_defaults,
    stable_id,
)
from app.kernel.usercontext.markdown import (
    Malformed,
    parse_blocks,
    parse_front_matter,
    split_front_matter,
)

MEMORY_HEADINGS = {"global": "# Foya User Profile", "project": "# Foya Project Memory"}


def parsed_rule(
    fields: JSONObject,
    scope: str,
    project_id: str | None,
    content: str,
    stamp: str,
    error: str | None,
    limit: int,
) -> tuple[Rule, str | None]:
    """A rule from parsed fields; what is wrong with them becomes its `error`."""
    text = {k: v for k, v in fields.items() if k != "globs" and isinstance(v, str)}
    globs = fields.get("globs")
    if isinstance(globs, str):
        globs = [globs]
    if globs is not None and not (
        isinstance(globs, list) and all(isinstance(g, str) for g in globs)
    ):
        error, globs = error or "globs: must be a list of strings", None
    bad = [
        k for k in ("name", "description", "trigger") if fields.get(k) not in (None, text.get(k))
    ]
    if bad and error is None:
        error = f"{bad[0]}: must be a string"
    rule = Rule(
        id=text["id"],
        name=text.get("name", "").strip(),
        description=text.get("description", "").strip() or None,
        trigger=text.get("trigger", "").strip(),
        globs=globs or None,
        path=text.get("path"),
        scope="global" if scope == "global" else "project",
        project_id=project_id,
        content=content,
        created_at=text.get("created_at") or stamp,
        updated_at=text.get("updated_at") or stamp,
    )
    if error is None and len(content) > limit:
        error = f"content is too large: maximum is {limit} characters"
    try:
        apply_defaults(rule)
    except InvalidContextItem as exc:
        error = error or exc.message
    rule.error = error
    return rule, error


def parse_project_rule(
    text: str, st: os.stat_result, path: Path, rel: str, project_id: str
) -> Rule | None:
    stamp = iso_time(st.st_mtime_ns)
    error = None
    fields: JSONObject = {}
    try:
        front, body = split_front_matter(text)
        fields = parse_front_matter(front) if front is not None else {}
    except Malformed as exc:
        error, body = f"front matter: {exc}", text
    content = body.strip()
    if not content and error is None:
        return None
    rid = fields.get("id")
    fields["id"] = rid.strip() if isinstance(rid, str) and rid.strip() else stable_id(str(path))
    fields["path"] = rel
    fields.pop("created_at", None), fields.pop("updated_at", None)
    return parsed_rule(fields, "project", project_id, content, stamp, error, MAX_RULE_CHARS)[0]


def parse_memory(
    text: str, st: os.stat_result, path: Path, project_id: str | None
) -> Memory | None:
    stamp = iso_time(st.st_mtime_ns)
    head, blocks = parse_blocks(text, "memory")
    scope = "global" if project_id is None else "project"
    if not blocks:
        body = head.removeprefix(MEMORY_HEADINGS[scope]).strip()
        blocks_ok: list[tuple[JSONObject, str]] = [({}, body)] if body else []
        error = None
    else:
        blocks_ok = [(b.meta, b.content) for b in blocks if b.content]
        error = next((b.error for b in blocks if b.error), None)
    if not blocks_ok:
        return None
    meta = max(blocks_ok, key=lambda b: str(b[0].get("updated_at", "")))[0]
    content = (
        "\n\n".join(sorted(c for _, c in blocks_ok)) if len(blocks_ok) > 1 else blocks_ok[0][1]
    )
    if error is None and len(content) > MAX_MEMORY_CHARS:
        error = f"content is too large: maximum is {MAX_MEMORY_CHARS} characters"

    def text_of(key: str, default: str) -> str:
        value = meta.get(key)
        return value if isinstance(value, str) and value else default

    return Memory(
        id=text_of("id", stable_id(str(path))),
        scope="global" if project_id is None else "project",
        project_id=project_id,
        content=content,
        created_at=text_of("created_at", stamp),
        updated_at=text_of("updated_at", stamp),
        error=error,
    )
