"""`foya serve --check`: what `foya serve` would do with these settings, found without serving.

By the time `describe` runs, `app.settings.serve_plan` has applied the serve rules (the token
digest included) and the CLI has loaded the TLS key pair as serving does. This module checks
the data directory as the start would meet it (a directory this user may write, or one it may
create; no running kernel holding it; a database schema this Foya knows) and describes the
plan. Nothing is created, written or bound.
"""

from __future__ import annotations

import os
from pathlib import Path

from app.errors import ConfigError
from app.files import in_use, lock_holder
from app.settings import ServePlan, Settings
from app.store import DB_NAME
from app.store.schema import VERSION

_SQLITE_MAGIC = b"SQLite format 3\0"


def describe(settings: Settings, plan: ServePlan) -> str:
    """The lines `foya serve --check` prints; raise `ConfigError` for what serve would refuse."""
    data = data_dir_state(settings.data_dir)
    if plan.transport == "unix":
        listen = f"Unix socket {plan.socket_path} (mode 0600; no token)"
        auth = "none: only this user can reach the socket"
    else:
        scheme = "https" if plan.tls else "http"
        host = f"[{plan.host}]" if ":" in plan.host else plan.host
        listen = f"{scheme}://{host}:{plan.port}"
        listen += f" (TLS: {plan.tls_cert}, {plan.tls_key})" if plan.tls else " (plaintext)"
        source = settings.auth_token_hash_file or "FOYA_AUTH_TOKEN_SHA256"
        auth = f"SHA-256 digest from {source}"
    return "\n".join(
        [
            "foya serve --check: the settings pass; `foya serve` would serve:",
            f"  listen:   {listen}",
            f"  token:    {auth}",
            f"  data dir: {data}",
        ]
    )


def data_dir_state(data_dir: Path) -> str:
    """How the start would find `data_dir`; raise `ConfigError` if it would refuse it."""
    flag = f"--data-dir (FOYA_DATA_DIR) {data_dir}"
    if not data_dir.exists():
        parent = data_dir.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise ConfigError(f"{flag}: cannot be created ({parent} is not writable)")
        return f"{data_dir} (created at start)"
    if not data_dir.is_dir():
        raise ConfigError(f"{flag}: not a directory")
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag}: not writable by this user")
    holder = lock_holder(data_dir)
    if holder is not None:
        raise in_use(data_dir, holder)
    database = data_dir / DB_NAME
    if not database.exists():
        return f"{data_dir} (no {DB_NAME} yet: created at start)"
    version = schema_version(database)
    if version > VERSION:
        raise ConfigError(
            f"--data-dir {data_dir}: the database schema is version {version}, but this Foya "
            f"knows only up to {VERSION}; upgrade Foya"
        )
    return f"{data_dir} ({DB_NAME} schema version {version}; this Foya knows up to {VERSION})"


def schema_version(database: Path) -> int:
    """`PRAGMA user_version`, read from the file's header: opening the database, even read-only,
    would leave -wal and -shm files beside it. (A crash can leave a newer version in the WAL
    only; the start then migrates or refuses as usual.)"""
    try:
        with database.open("rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise ConfigError(f"--data-dir: cannot read {database}: {exc.strerror}") from exc
    if len(header) < 64 or not header.startswith(_SQLITE_MAGIC):
        raise ConfigError(f"--data-dir: {database} is not an SQLite database")
    return int.from_bytes(header[60:64], "big")
