"""Everything a bundle holds checked before an import stores anything (app.kernel.imports).

One rule for every source (a Foya archive, a ChatBuddy backup, a transcript): each message must
be a message the kernel itself would store (`messageshape.problems`), every value bounded as
`app.imports.safejson` bounds JSON (depth, 64-bit integers, string sizes), times within what
the clock and SQLite take, rules valid rule text, connections valid connections. The first
problem refuses the whole import with `InvalidImport` (400 `invalid_import`) naming where it is.
"""

from __future__ import annotations

from typing import Any

from app.errors import BadRequest
from app.imports import safejson
from app.imports.model import (
    ImportBundle,
    ImportedConnection,
    ImportedFileChange,
    ImportedMessage,
    ImportedSession,
    InvalidImport,
)
from app.kernel.connections import check_api_key, check_base_url
from app.kernel.messageshape import problems
from app.kernel.usercontext.items import MAX_RULE_CHARS, clean_content

MAX_TIME_NS = 2**63 - 1
MAX_NAME = 1000  # characters of a title, a rule's or a connection's name, an image's name


def validate(bundle: ImportBundle) -> None:
    """`InvalidImport` for the first thing in `bundle` that the kernel would not store."""
    for session in bundle.sessions:
        _session(session)
    for index, rule in enumerate(bundle.rules):
        where = f"rule {index + 1}"
        for name in ("key", "name", "content"):
            _text(getattr(rule, name), f"{where}: {name}", None if name == "content" else MAX_NAME)
        try:
            clean_content(rule.content, MAX_RULE_CHARS)
        except BadRequest as exc:
            raise InvalidImport(f"{where}: {exc.message}") from None
    for index, conn in enumerate(bundle.connections):
        _connection(conn, f"connection {index + 1}")


def _session(session: ImportedSession) -> None:
    where = f"session {session.source!r}"[:200]
    _text(session.source, "a session's source", MAX_NAME)
    if not session.source:
        raise InvalidImport("a session's source must not be empty")
    if session.title is not None:
        _text(session.title, f"{where}: title", MAX_NAME)
    for name in ("created_at_ns", "updated_at_ns"):
        value = getattr(session, name)
        if type(value) is not int or not 0 <= value <= MAX_TIME_NS:
            raise InvalidImport(f"{where}: {name} must be a time in nanoseconds since 1970")
    _text(session.model, f"{where}: model", MAX_NAME)
    for name in ("rule", "cwd"):
        if getattr(session, name) is not None:
            _text(getattr(session, name), f"{where}: {name}", None)
    for number, message in enumerate(session.messages, 1):
        _message(message, f"{where} message {number}")


def _message(imported: ImportedMessage, where: str) -> None:
    _text(imported.source_id, f"{where}: source_id", MAX_NAME)
    message = imported.message
    if not isinstance(message, dict):
        raise InvalidImport(f"{where}: a message must be an object")
    try:
        safejson.check(message)
    except safejson.UnsafeJSON as exc:
        raise InvalidImport(f"{where}: {exc}") from None
    # The importer supplies these two itself (from `images` and `file_change`).
    shaped = {k: v for k, v in message.items() if k not in ("attachments", "file_change")}
    found = problems(shaped)
    if found:
        raise InvalidImport(f"{where}: {'; '.join(found[:3])}")
    for image in imported.images:
        if not isinstance(image.data, bytes):
            raise InvalidImport(f"{where}: an image must be bytes")
        _text(image.name, f"{where}: image name", MAX_NAME)
    if imported.file_change is not None:
        _file_change(imported.file_change, where)


def _file_change(change: ImportedFileChange, where: str) -> None:
    _text(change.path, f"{where}: file_change path", 4096)
    for side in (change.before, change.after):
        if side is not None and not isinstance(side, bytes):
            raise InvalidImport(f"{where}: file contents must be bytes")
    for mode in (change.before_mode, change.after_mode):
        if mode is not None and (type(mode) is not int or not 0 <= mode <= 0o7777):
            raise InvalidImport(f"{where}: a file mode must be a permission number (0 to 0o7777)")


def _connection(conn: ImportedConnection, where: str) -> None:
    _text(conn.name, f"{where}: name", MAX_NAME)
    _text(conn.base_url, f"{where}: base_url", 4096)
    _text(conn.api_key, f"{where}: api_key", 4096)
    if not isinstance(conn.models, list) or not all(
        isinstance(m, str) and len(m) <= MAX_NAME for m in conn.models
    ):
        raise InvalidImport(f"{where}: models must be a list of model names")
    try:
        check_base_url(conn.base_url)
        check_api_key(conn.api_key)
    except BadRequest as exc:
        # The message names the field, never the key's value.
        raise InvalidImport(f"{where} ({conn.name[:100]}): {exc.message}") from None


def _text(value: Any, where: str, limit: int | None) -> None:
    if not isinstance(value, str):
        raise InvalidImport(f"{where} must be a string")
    if len(value) > (limit or safejson.MAX_STRING):
        raise InvalidImport(f"{where} is too long")
