"""One skill package on disk, read as Foya's `skill` package reads it: `SKILL.md` (front matter,
then the instructions) and the files beside it (its resources).

Front matter is a YAML subset (PyYAML is not a dependency). Each `key: value` line is read by
`markdown.parse_front_matter` (plain, quoted, inline `[a, b]` lists); beyond that, skill files
commonly use a value continued on indented lines (folded into one line), `|` and `>` block
scalars, `- item` block lists and nested maps (`metadata:`), which are read here. `#` comment
lines and ` # comments` after plain values are skipped.

What Foya rejects is rejected here too (`Malformed`, the skill is then reported, not loaded): an
unterminated front matter, a `name` or `description` that is not text, a name longer than 128
characters, a file over 256 KiB. Besides, a name holding `/`, `\\`, a control character, or
that is `.` or `..`, is refused (refs name skills and must never read as paths). Where Foya's
YAML decoder is stricter or looser: a list field written as one string (`allowed-tools: Read,
Grep`, Claude Code's form) is split on commas and spaces; a field Foya does not use that this
subset cannot read (e.g. a `{flow: map}`) is dropped with an `unsupported_field` warning.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from app.jsontypes import JSONObject
from app.kernel.usercontext.markdown import Malformed, parse_front_matter, split_front_matter

MAX_FILE_BYTES = 256 * 1024
MAX_RESOURCE_BYTES = 512 * 1024
MAX_RESOURCES = 512
MAX_NAME_CHARS = 128
LIST_FIELDS = ("allowed-tools", "required-tools", "required-capabilities")
TEXT_FIELDS = ("name", "description", "license", "compatibility", "category")
KNOWN_FIELDS = (*TEXT_FIELDS, *LIST_FIELDS, "metadata")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_BLOCK_SCALARS = ("|", "|-", "|+", ">", ">-", ">+")
_MEDIA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".log": "text/plain",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".sh": "text/x-shellscript",
    ".bash": "text/x-shellscript",
    ".zsh": "text/x-shellscript",
    ".py": "text/x-python",
    ".js": "text/javascript",
    ".jsx": "text/javascript",
    ".ts": "text/typescript",
    ".tsx": "text/typescript",
    ".go": "text/x-go",
    ".rs": "text/rust",
    ".toml": "application/toml",
    ".html": "text/html",
    ".css": "text/css",
}
BINARY = "application/octet-stream"

Warning = tuple[str, str, str]
"""(code, message, field) of something worth telling about a skill that still loads."""


@dataclass(frozen=True)
class SkillFile:
    """What a SKILL.md says, wherever it is found."""

    name: str | None  # the front matter's; `skill_name` falls back on the directory's
    manifest: JSONObject  # Foya's wire names (`allowed_tools`), empty values left out
    body: str
    content_hash: str
    warnings: tuple[Warning, ...]


def parse_skill(data: bytes) -> SkillFile:
    """Read a SKILL.md's bytes. Raises `Malformed` saying why they are not a skill."""
    if len(data) > MAX_FILE_BYTES:
        raise Malformed(f"skill file exceeds {MAX_FILE_BYTES} bytes")
    text = data.decode("utf-8", errors="replace")
    try:
        front, body = split_front_matter(text)
    except Malformed:
        raise Malformed("unterminated YAML frontmatter") from None
    warnings: list[Warning] = []
    fields: JSONObject = {}
    if front is None:
        warnings.append(("missing_frontmatter", "SKILL.md has no YAML frontmatter", "frontmatter"))
        body = text
    else:
        fields = yaml_front_matter(front, warnings)
    manifest = _manifest(fields)
    if not manifest.get("description"):
        warnings.append(("missing_description", "SKILL.md has no description", "description"))
    for field in sorted(set(fields) - set(KNOWN_FIELDS)):
        message = f"unsupported frontmatter field: {field}"
        warnings.append(("unsupported_field", message, field))
    return SkillFile(
        name=manifest.get("name"),
        manifest=manifest,
        body=body.strip(),
        content_hash=hashlib.sha256(data).hexdigest(),
        warnings=tuple(warnings),
    )


def skill_name(parsed: SkillFile, directory_name: str) -> str:
    """The skill's name: its front matter's, else its directory's. Raises `Malformed` for an
    empty or too long name, or one that could read as a path."""
    name = parsed.name or directory_name
    if not name or len(name) > MAX_NAME_CHARS:
        raise Malformed("skill name is empty or too long")
    if name in (".", "..") or any(c in "/\\" or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise Malformed(f"skill name {name!r} holds '/', '\\' or a control character")
    return name


def _manifest(fields: JSONObject) -> JSONObject:
    """Foya's manifest from the front matter: text trimmed, lists compacted, empties left out."""
    manifest: JSONObject = {}
    for key in TEXT_FIELDS:
        value = fields.get(key)
        if value is not None and not isinstance(value, str):
            raise Malformed(f"decode frontmatter: {key} must be text")
        if value and value.strip():
            manifest[key] = value.strip()
    for key in LIST_FIELDS:
        value = fields.get(key)
        if isinstance(value, str):  # `allowed-tools: Read, Grep`
            value = value.replace(",", " ").split()
        if value is not None and not isinstance(value, list):
            raise Malformed(f"decode frontmatter: {key} must be a list of text")
        items = list(dict.fromkeys(v.strip() for v in value or [] if isinstance(v, str)))
        if any(items):
            manifest[key.replace("-", "_")] = [v for v in items if v]
    metadata = fields.get("metadata")
    if isinstance(metadata, dict):
        kept = {k.strip(): v for k, v in metadata.items() if k.strip() and v not in ("", [], {})}
        if kept:
            manifest["metadata"] = kept
    return manifest


# Front matter -------------------------------------------------------------------------------


def yaml_front_matter(block: str, warnings: list[Warning]) -> JSONObject:
    """The top-level fields. A field Foya does not use that cannot be read becomes a warning;
    one it uses makes the file malformed."""
    fields: JSONObject = {}
    for key, rest, lines in _entries(block):
        try:
            fields[key] = _value(rest, lines)
        except Malformed as exc:
            if key in (*TEXT_FIELDS, *LIST_FIELDS):
                raise Malformed(f"decode frontmatter: {key}: {exc}") from None
            warnings.append(("unsupported_field", f"frontmatter field {key}: {exc}", key))
    return fields


def _mapping(block: str) -> JSONObject:
    return {key: _value(rest, lines) for key, rest, lines in _entries(block)}


def _entries(block: str) -> list[tuple[str, str, list[str]]]:
    """(key, the rest of its line, the lines under it) of each `key:` line at column 0."""
    entries: list[tuple[str, str, list[str]]] = []
    for number, line in enumerate(block.splitlines(), 1):
        if not line.strip():
            if entries:
                entries[-1][2].append("")
            continue
        if line.startswith("#"):
            continue
        if line[0].isspace() or line.startswith("-"):  # YAML allows `key:\n- item` unindented
            if not entries:
                raise Malformed(f"front matter line {number} is indented with no key above it")
            entries[-1][2].append(line)
            continue
        key, colon, rest = line.partition(":")
        key = key.strip()
        if not colon or not _KEY.fullmatch(key) or (rest and not rest[0].isspace()):
            raise Malformed(f"front matter line {number} is not `key: value`: {line[:80]}")
        if any(k == key for k, _, _ in entries):
            raise Malformed(f"front matter key {key!r} appears twice")
        entries.append((key, rest.strip(), []))
    return entries


def _value(rest: str, lines: list[str]) -> Any:
    """One field's value from the rest of its line and the lines under it."""
    if rest in _BLOCK_SCALARS:
        text = _dedent(lines)
        if rest.startswith(">"):  # folded: lines join with spaces, a blank line is a newline
            text = "\n".join(" ".join(p.split("\n")) for p in text.split("\n\n"))
        return text.strip()
    more = [line.strip() for line in lines if line.strip()]
    if rest and more:  # a scalar continued on indented lines folds into one line
        return _scalar(" ".join([rest, *more]))
    if not more:
        return _scalar(rest)
    if all(item == "-" or item.startswith("- ") for item in more):
        return [_scalar(item[1:].strip()) for item in more]
    return _mapping(_dedent(lines))


def _scalar(raw: str) -> Any:
    """A flow value as `markdown.parse_front_matter` reads it, less a trailing ` # comment`."""
    if not raw.startswith(("'", '"', "[")):
        raw = raw.split(" #", 1)[0].rstrip()
    return parse_front_matter(f"value: {raw}")["value"]


def _dedent(lines: list[str]) -> str:
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return "\n".join(line[indent:] for line in lines).strip("\n")


# Resources ----------------------------------------------------------------------------------


def media_type(path: str) -> str:
    return _MEDIA_TYPES.get(os.path.splitext(path)[1].lower(), BINARY)


class ResourceEntry(TypedDict):
    """One file of a skill package besides its SKILL.md."""

    path: str
    size: int
    media_type: str


def resources(root: Path, main: Path) -> list[ResourceEntry]:
    """The package's other files (`{path, size, media_type}`, sorted, at most 512); symbolic
    links are left out, as Foya does."""
    found: list[ResourceEntry] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if len(found) >= MAX_RESOURCES:
                return sorted(found, key=lambda r: r["path"])
            try:
                st = path.lstat()
            except OSError:
                continue
            if path == main or not stat.S_ISREG(st.st_mode):
                continue
            rel = path.relative_to(root).as_posix()
            found.append({"path": rel, "size": st.st_size, "media_type": media_type(rel)})
    return sorted(found, key=lambda r: r["path"])


def resource_path(raw: str) -> str:
    """`raw` as a clean path relative to a skill package. Raises `Malformed` for an absolute
    path, a `..` part, a NUL or an empty path (what Foya's `cleanResourcePath` refuses)."""
    text = raw.strip().replace("\\", "/")
    if not text:
        raise Malformed("resource path is required")
    if text.startswith("/") or "\0" in text:
        raise Malformed("resource path must be relative")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise Malformed("resource path must stay inside the skill package")
    return "/".join(parts)
