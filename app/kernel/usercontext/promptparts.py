"""The pieces the prompt's user-context sections are made of: user text made safe inside
markup, bounded bullet listings, and whether a rule applies to a session's activity.

User text never opens or closes a tag: `escape` and `attr` turn `<`, `>`, `&` (and quotes in an
attribute) into entities, and `clean` drops control characters but tab and newline. A listing
longer than its budget is cut, and says so.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from app.kernel.usercontext.items import Rule

TRUNCATED = " [truncated]"
MIN_PART = 200  # the shortest cut of an item worth sending
_CONTROL = {c: None for c in (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)}


def clean(text: str) -> str:
    """Control characters (but tab and newline) removed, then trimmed."""
    return text.translate(_CONTROL).strip()


def escape(text: str) -> str:
    """`text` safe as element content: no tag can be opened or closed in it."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def attr(text: str) -> str:
    """`text` safe inside a quoted attribute value."""
    return escape(text).replace('"', "&quot;").replace("'", "&apos;")


def listing(tag: str, preamble: str, items: Iterable[str], limit: int) -> str:
    """`<tag>` with one bullet per item, cut (and said so) at `limit` characters."""
    lines = [f'<{tag} source="user_controlled">', preamble]
    used = 0
    for raw in items:
        content = clean(raw)
        if not content:
            continue
        line = f"- {escape(content)}"
        if used + len(line) + 1 > limit:
            room = limit - used - len(TRUNCATED) - 1
            if room >= MIN_PART:  # a long item is cut rather than dropped whole
                lines.append(line[:room] + TRUNCATED)
            lines.append("[additional items omitted]")
            break
        lines.append(line)
        used += len(line) + 1
    if len(lines) == 2:
        return ""
    return "\n".join([*lines, f"</{tag}>"])


@functools.lru_cache(maxsize=512)
def glob_pattern(glob: str) -> re.Pattern[str]:
    """A rule glob as a pattern that finds a path inside free text: `**` crosses directories,
    `*` and `?` do not, and the match must stand alone (bounded by space, quotes, `=`, `:`,
    `,` or brackets), as Foya matches globs against a session's activity."""
    out = [r"(?:^|[\s\"'=:,(])"]
    i = 0
    while i < len(glob):
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append(r"[^/\s\"'=:,)]*")
            i += 1
        elif glob[i] == "?":
            out.append(r"[^/\s\"'=:,)]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    out.append(r"(?:$|[\s\"'=:,)])")
    return re.compile("".join(out), re.MULTILINE)


def active(rule: Rule, activity: str) -> bool:
    """Whether `rule` applies to a session with this activity."""
    if rule.error is not None:
        return False
    if rule.trigger == "always":
        return True
    if rule.trigger == "glob":
        return any(glob_pattern(g).search(activity) for g in rule.globs or ())
    if rule.trigger == "manual":
        return f"@{rule.name}" in activity or f"@{rule.id}" in activity
    return False
