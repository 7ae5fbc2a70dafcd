"""Hook configuration: the `Hook` model, Foya's rules for it, and the files that hold it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, WithJsonSchema

from app.bodies import Strict
from app.errors import BadRequest, FoyaError

EVENTS = (
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "Stop",
    "TurnComplete",
    "Notification",
)
FILE_NAME = "hooks.json"
HOOKS_FILE = f".foya/{FILE_NAME}"  # a project's, relative to its directory
MAX_TIMEOUT = 600
MAX_FILE_BYTES = 1024 * 1024


class InvalidHooks(BadRequest):
    """A hook configuration that breaks the rules (Foya answers these `bad_request`)."""


class HooksUnreadable(FoyaError):
    """A hooks file that cannot be read (too large, not JSON, or unreadable)."""

    status = 500
    code = "context_item_failed"


class Hook(Strict):
    """One configured command. Empty or default fields are left out when written or served;
    unknown fields are refused, as Foya's hooks handler does."""

    model_config = ConfigDict(strict=True)

    id: str = ""
    name: str = ""
    event: Annotated[str, WithJsonSchema({"type": "string", "enum": list(EVENTS)})]
    matcher: str = ""
    command: str
    timeout: Annotated[int, Field(description="Seconds; 0 means 30, at most 600.")] = 0
    run_async: bool = Field(False, alias="async")
    enabled: bool | None = None
    may_approve: Annotated[
        bool,
        Field(
            description="PermissionRequest only: this hook's `allow` approves the tool call "
            "(without it an allow is ignored and the mode decides). Honoured only for trusted "
            "hooks: the user's own, or a project's once the user trusts the project."
        ),
    ] = False

    def label(self) -> str:
        return self.name or self.id or self.command

    def applies(self, event: str, subject: str | None) -> bool:
        """Enabled for `event`, and its matcher (if any) found in `subject`; a `subject` of None
        (events Foya matches on nothing) ignores the matcher."""
        if self.event != event or self.enabled is False:
            return False
        return subject is None or not self.matcher or re.search(self.matcher, subject) is not None


_HOOK_LIST = TypeAdapter(list[Hook])


def checked(hooks: list[Hook]) -> list[Hook]:
    """`hooks` with their strings trimmed, or `InvalidHooks` naming the first one that has an
    unknown event, no command, a timeout outside 0-600 s or a matcher that does not compile."""
    out = []
    for index, hook in enumerate(hooks):
        trimmed = {f: str(getattr(hook, f)).strip() for f in ("id", "name", "event", "matcher")}
        hook = hook.model_copy(update={**trimmed, "command": hook.command.strip()})
        where = f"invalid hooks configuration: hooks[{index}]"
        if hook.event not in EVENTS:
            raise InvalidHooks(f"{where}.event {hook.event!r}: one of {', '.join(EVENTS)}")
        if not hook.command or "\0" in hook.command:
            raise InvalidHooks(f"{where}.command is required (and may not contain NUL)")
        if not 0 <= hook.timeout <= MAX_TIMEOUT:
            raise InvalidHooks(f"{where}.timeout must be between 0 and {MAX_TIMEOUT} seconds")
        try:
            re.compile(hook.matcher)
        except re.error as exc:
            raise InvalidHooks(f"{where}.matcher: {exc}") from None
        out.append(hook)
    return out


def encoded(hooks: list[Hook]) -> bytes:
    """A file's bytes: an indented JSON array, defaults left out."""
    items = [h.model_dump(by_alias=True, exclude_defaults=True) for h in hooks]
    return json.dumps(items, indent=2, ensure_ascii=False).encode() + b"\n"


def first_error(exc: ValidationError) -> str:
    """The first problem pydantic found, as `where: what`."""
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])


def parse(data: bytes, where: Path | str) -> list[Hook]:
    """The hooks a file's bytes hold, or `HooksUnreadable` saying what is wrong (`where` names
    the file)."""
    if len(data) > MAX_FILE_BYTES:
        raise HooksUnreadable(f"{where}: larger than {MAX_FILE_BYTES} bytes")
    data = data.strip()
    try:
        # Foya writes `null` for an empty list.
        return checked(_HOOK_LIST.validate_json(data)) if data not in (b"", b"null") else []
    except (ValidationError, InvalidHooks) as exc:
        reason = first_error(exc) if isinstance(exc, ValidationError) else str(exc)
        raise HooksUnreadable(f"{where}: {reason}") from None


@dataclass
class HookFiles:
    """Hook files, each parsed once per change (keyed by mtime, size and inode)."""

    cache: dict[Path, tuple[tuple[int, int, int], list[Hook]]] = field(default_factory=dict)

    def load(self, path: Path) -> list[Hook]:
        """The hooks in `path` (none if it is absent); `HooksUnreadable` if it is not valid."""
        try:
            st = path.stat()
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            cached = self.cache.get(path)
            if cached is not None and cached[0] == key:
                return cached[1]
            if st.st_size > MAX_FILE_BYTES:
                raise HooksUnreadable(f"{path}: larger than {MAX_FILE_BYTES} bytes")
            hooks = parse(path.read_bytes(), path)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise HooksUnreadable(f"{path}: {exc.strerror or exc}") from None
        self.cache[path] = (key, hooks)
        return hooks
