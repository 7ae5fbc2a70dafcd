"""The shape every importer produces, and the errors a bad source gets.

Exception map (all `FoyaError`s, rendered as `{"code","message"}`):
- `InvalidImport` 400 `invalid_import`: not the format it claims, truncated, tampered with,
  a member name that escapes the archive, a duplicate, a count that does not add up.
- `UnsupportedImportVersion` 400 `unsupported_import_version`: a newer format than we read.
- `WrongPassphrase` 400 `wrong_passphrase`: an encrypted backup the passphrase does not open
  (or no passphrase given for one).
- `ImportTooLarge` 413 `import_too_large`: over the size limits (a ZIP bomb is this).
- `InvalidImportSource` 400 `invalid_import_source`: an upload's `source` no importer reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.errors import FoyaError
from app.jsontypes import JSONObject

# What a parser reports as it goes: (done, total); the CLI draws a bar with it.
Progress = Callable[[int, int], None]


class InvalidImport(FoyaError):
    status, code = 400, "invalid_import"


class UnsupportedImportVersion(FoyaError):
    status, code = 400, "unsupported_import_version"


class WrongPassphrase(FoyaError):
    status, code = 400, "wrong_passphrase"


class ImportTooLarge(FoyaError):
    status, code = 413, "import_too_large"


class InvalidImportSource(FoyaError):
    """An upload's `source` that names no importer of uploads."""

    status, code = 400, "invalid_import_source"


@dataclass
class ImportedImage:
    """Image bytes a message carried; stored as a session artifact (validated, re-encoded)."""

    data: bytes
    name: str


@dataclass
class ImportedFileChange:
    """A file a tool call changed, when the source carries both sides. `before` None: the file
    did not exist; `after` None: the call deleted it."""

    path: str
    before: bytes | None
    after: bytes | None
    before_mode: int | None = None
    after_mode: int | None = None


@dataclass
class ImportedMessage:
    """One message, in the kernel's Message shape (app.events.Message: role, content,
    created_at, reasoning, tool_calls, tool_call_id, name, is_error, model_content, `model`…).

    `source_id` is unique within its session and keys re-imports: a message already imported
    under the same session source and id is skipped. `images` become the message's
    attachments; `file_change` becomes a reviewable file change (tool messages only)."""

    message: JSONObject
    source_id: str
    images: list[ImportedImage] = field(default_factory=list)
    file_change: ImportedFileChange | None = None


@dataclass
class ImportedSession:
    """One conversation. `source` ("chatbuddy:<id>", "claude-code:<uuid>", …) is its key:
    importing it again adds only unseen messages. Times are ns since the epoch. `cwd` is the
    directory the source worked in (kept as metadata, never trusted as a project)."""

    source: str
    title: str | None
    created_at_ns: int
    updated_at_ns: int
    messages: list[ImportedMessage]
    model: str = ""
    rule: str | None = None  # the `ImportedRule.key` whose text applies to this session
    cwd: str | None = None


@dataclass
class ImportedRule:
    """A system prompt or instructions file, kept as a manual rule linked to its sessions."""

    key: str
    name: str
    content: str


@dataclass
class ImportedConnection:
    """An OpenAI-compatible provider with its key (only imported when the user asks)."""

    name: str
    base_url: str
    api_key: str
    models: list[str]


@dataclass
class ImportReport:
    """What a parse skipped and why; merged into the import's summary."""

    skipped: dict[str, int] = field(default_factory=dict)  # reason → count
    warnings: list[str] = field(default_factory=list)

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count


@dataclass
class ImportBundle:
    """Everything one source (archive, transcript directory) holds, ready to store."""

    source: str  # one of `app.imports.sources.SOURCES`
    sessions: list[ImportedSession] = field(default_factory=list)
    rules: list[ImportedRule] = field(default_factory=list)
    connections: list[ImportedConnection] = field(default_factory=list)
    report: ImportReport = field(default_factory=ImportReport)
