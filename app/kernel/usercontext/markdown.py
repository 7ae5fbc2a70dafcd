"""The Markdown shapes of the user's rule and memory files, parsed and rendered.

- A project rule file is `---` front matter `---` then the rule text. The front matter is a small
  YAML subset: `key: value` lines (plain, `"double"` or `'single'` quoted) and `globs` as an
  inline `[a, "b"]` list or `- item` lines. PyYAML is not a dependency; we render values as JSON
  strings, which every YAML reader accepts.
- `user_rules.md` and the memory files hold blocks that each start with a marker line
  `<!-- foya-rule: {json} -->` (`foya-memory`) carrying the metadata, as Foya writes them.

Parsing never raises: what cannot be read is returned as a `Malformed` message for that item, so
one bad file or block does not hide the others.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from app.jsontypes import JSONObject

FRONT_KEYS = ("id", "name", "description", "trigger", "globs")
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)")
# A content line that reads (after any backslashes) as one of our markers: rendering it as is
# would let stored text open a block of its own, so it gets one more backslash on the way out
# and loses one on the way in (Markdown shows `\<` as `<`).
_MARKER_LIKE = re.compile(r"(\\*)<!-- foya-")
# Line ends `str.splitlines` (which front matter is read with) knows and JSON leaves raw.
_RAW_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


class Malformed(ValueError):
    """Text that cannot be read as front matter or a marker."""


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(front matter, body); front matter is None when the text does not open with `---`."""
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---\n", 3)
    if end < 0:
        if text.endswith("\n---"):
            return text[4:-4], ""
        raise Malformed("front matter opened with --- is never closed")
    return text[4 : end + 1], text[end + 5 :]


def parse_front_matter(block: str) -> JSONObject:
    """The fields of a front matter block (unknown keys are kept, then ignored by callers)."""
    fields: JSONObject = {}
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY.fullmatch(line.strip())
        if match is None or line[0].isspace():
            raise Malformed(f"front matter line {i} is not `key: value`: {line.strip()[:80]}")
        key, raw = match.group(1), match.group(2).strip()
        if key in fields:
            raise Malformed(f"front matter key {key!r} appears twice")
        if raw == "" and key == "globs":
            items: list[str] = []
            while i < len(lines) and lines[i].lstrip().startswith("- "):
                items.append(_scalar(lines[i].lstrip()[2:].strip()))
                i += 1
            fields[key] = items
        elif raw.startswith("["):
            fields[key] = _inline_list(raw)
        else:
            fields[key] = _scalar(raw)
    return fields


def _inline_list(raw: str) -> list[str]:
    if not raw.endswith("]"):
        raise Malformed(f"list is not closed: {raw[:80]}")
    inner = raw[1:-1].strip()
    if not inner:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return [_scalar(part.strip()) for part in inner.split(",")]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Malformed(f"list items must be strings: {raw[:80]}")
    return value


def _scalar(raw: str) -> str:
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError:
            raise Malformed(f"bad double-quoted string: {raw[:80]}") from None
        if not isinstance(value, str):
            raise Malformed(f"not a string: {raw[:80]}")
        return value
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'"):
            raise Malformed(f"bad single-quoted string: {raw[:80]}")
        return raw[1:-1].replace("''", "'")
    if raw[:1] in ("{", "&", "*", "|", ">", "!", "%", "@", "`"):
        raise Malformed(f"unsupported YAML value: {raw[:80]}")
    return raw


def render_front_matter(fields: JSONObject) -> str:
    """`---` front matter `---` for the non-empty `fields`, in `FRONT_KEYS` order."""
    lines = ["---"]
    for key in FRONT_KEYS:
        value = fields.get(key)
        if value:
            data = json.dumps(value, ensure_ascii=False).translate(_RAW_BREAKS)
            lines.append(f"{key}: {data}")
    lines.append("---")
    return "\n".join(lines) + "\n"


@dataclass
class Block:
    """One marked block: its metadata (or the reason it has none), its text, its source lines."""

    meta: JSONObject
    content: str
    raw: str
    error: str | None = None


def parse_blocks(text: str, marker: str) -> tuple[str, list[Block]]:
    """(the text before the first marker, the marked blocks) of a `<!-- foya-<marker>: -->` file."""
    prefix, suffix = f"<!-- foya-{marker}: ", " -->"
    head: list[str] = []
    blocks: list[Block] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        stripped = line.strip()
        if stripped.startswith(prefix) and stripped.endswith(suffix):
            meta, error = _marker(stripped[len(prefix) : -len(suffix)])
            blocks.append(Block(meta, "", line + "\n", error))
        elif blocks:
            blocks[-1].content += _unescape_line(line) + "\n"
            blocks[-1].raw += line + "\n"
        else:
            head.append(line)
    for block in blocks:
        block.content = block.content.strip()
    return "\n".join(head).strip(), blocks


def _marker(raw: str) -> tuple[JSONObject, str | None]:
    try:
        meta = json.loads(raw)
    except ValueError as exc:
        return {}, f"marker is not JSON: {exc}"
    if not isinstance(meta, dict):
        return {}, "marker is not a JSON object"
    if not isinstance(meta.get("id"), str) or not meta["id"]:
        return meta, "marker has no id"
    return meta, None


def render_block(marker: str, meta: JSONObject, content: str) -> str:
    """One marked block, as `parse_blocks` reads it back."""
    data = json.dumps(
        {k: v for k, v in meta.items() if v not in (None, "", [])}, ensure_ascii=False
    )
    return f"\n<!-- foya-{marker}: {data} -->\n{escape_content(content)}\n"


def _split_indent(line: str) -> tuple[str, str]:
    # The marker test strips with `str.strip`, so "indent" is whatever that strips.
    rest = line.lstrip()
    return line[: len(line) - len(rest)], rest


def escape_content(content: str) -> str:
    """`content` with every line that could read as a marker (any `<!-- foya-…`, with or
    without leading backslashes) given one more backslash: stored text stays text."""
    out = []
    for line in content.split("\n"):
        indent, rest = _split_indent(line)
        if _MARKER_LIKE.match(rest):
            line = indent + "\\" + rest
        out.append(line)
    return "\n".join(out)


def _unescape_line(line: str) -> str:
    indent, rest = _split_indent(line)
    match = _MARKER_LIKE.match(rest)
    if match and match.group(1):
        return indent + rest[1:]
    return line
