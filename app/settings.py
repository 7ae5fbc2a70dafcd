"""Settings: one pydantic-settings object built by the CLI from flags and FOYA_* variables.

`serve_plan()` applies the startup rules of `foya serve` and turns the settings into
the one transport the server will use. Every refusal is a `ConfigError` whose message names the
flag or variable to fix.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.errors import ConfigError

_HEX64 = re.compile(r"[0-9a-f]{64}")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
_PEM_LABEL = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")


def default_data_dir() -> Path:
    """`<user config dir>/foya`, where Foya keeps its own configuration too."""
    return Path(platformdirs.user_config_dir()) / "foya"


class Settings(BaseSettings):
    """Everything the service is configured with. Built once, in the CLI, and passed down."""

    model_config = SettingsConfigDict(env_prefix="FOYA_", extra="ignore")

    listen_addr: str | None = None
    socket_path: Path | None = None
    data_dir: Path = Field(default_factory=default_data_dir)
    auth_token_hash_file: Path | None = None
    auth_token_sha256: str | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    allow_plaintext: bool = False
    parent_pid: int | None = None
    log_format: Literal["auto", "json", "console"] = "auto"
    log_level: str = "info"  # one of LOG_LEVELS, any case
    min_free_disk_mb: int = 256
    # Transport limits of `--listen` (app.serve.admission, app.http.sse); see app.serve.listeners.
    head_timeout: float = Field(10.0, gt=0, le=60)
    max_connections: int | None = Field(None, ge=1)
    max_streams_per_client: int = Field(64, ge=1)
    # Terminals (app.kernel.terminals): running or exited, until deleted.
    max_terminals_per_session: int = Field(32, ge=1)
    max_terminals: int = Field(64, ge=1)
    # The largest archive `POST /imports` takes (it is read into memory to be checked whole).
    max_import_mb: int = Field(512, ge=1, le=16384)
    # Sub-agents (app.kernel.agents.limits): defaults until PUT /settings/agent-limits.
    agent_max_global_concurrency: int = Field(4, ge=1, le=256)
    agent_max_per_root: int = Field(4, ge=1, le=256)
    agent_max_tree_tokens: int = Field(0, ge=0)
    # Browser tools (app.kernel.interactions): seconds a browser action waits for its client.
    browser_action_timeout: float = Field(120.0, gt=0, le=3600)
    # web_fetch (app.kernel.web.guard): private hosts, IPs or networks it may reach anyway.
    web_fetch_allow_hosts: str = ""
    # Web Push (app.kernel.push): the VAPID `sub`, how a push service reaches the operator.
    push_contact: str = Field("mailto:push@example.com", pattern=r"^(mailto:\S+@\S+|https://\S+)$")
    # MCP servers (app.kernel.mcp): seconds to connect or answer a ping, for one tool call,
    # between two pings; and the public registry behind GET /mcp/registry.
    mcp_connect_timeout: float = Field(30.0, gt=0, le=600)
    mcp_call_timeout: float = Field(300.0, gt=0, le=3600)
    mcp_ping_interval: float = Field(30.0, gt=0, le=3600)
    mcp_registry_url: str = "https://registry.modelcontextprotocol.io/v0.1/servers"
    # Continuous replication (app.ops.replicate): the replica's base URL turns it on; the
    # files snapshot's interval; the lag beyond which /readyz fails (none: never); the
    # litestream binary; the sftp key file and the sftp server's public host key (a line of
    # its `ssh_host_*_key.pub`, or a file holding one).
    replica_url: str | None = None
    replica_files_interval: float = Field(5.0, gt=0, le=3600)
    replica_max_lag: float | None = Field(None, gt=0)
    litestream_bin: Path | None = None
    replica_sftp_key: Path | None = None
    replica_sftp_host_key: str | None = None
    # Feishu channels (app.kernel.channels.feishu): the OpenAPI host (Lark: open.larksuite.com).
    feishu_api_url: str = "https://open.feishu.cn"
    # Telegram channels (app.kernel.channels.telegram): the Bot API host (or a local server).
    telegram_api_url: str = "https://api.telegram.org"

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, value: str) -> str:
        if value.lower() not in LOG_LEVELS:
            raise PydanticCustomError(
                "log_level",
                "must be one of {levels} (got '{value}')",
                {"levels": ", ".join(LOG_LEVELS), "value": value},
            )
        return value.lower()

    @property
    def resolved_socket_path(self) -> Path:
        return self.socket_path or self.data_dir / "kernel.sock"

    @property
    def protected_paths(self) -> tuple[Path, ...]:
        """What no workspace route or file tool may read or change, whatever project contains
        it: the data dir, `~/.foya`, the TLS key and certificate, the token digest file."""
        paths = [self.data_dir]
        with contextlib.suppress(RuntimeError):  # no home directory to speak of
            paths.append(Path.home() / ".foya")
        files = (self.tls_key_file, self.tls_cert_file, self.auth_token_hash_file)
        return (*paths, *(f for f in files if f is not None))


@dataclass(frozen=True)
class ServePlan:
    """The one listener `foya serve` will open, after every startup rule passed."""

    transport: Literal["unix", "tcp"]
    socket_path: Path | None = None
    host: str = ""
    port: int = 0
    token_sha256: str | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


def serve_plan(settings: Settings) -> ServePlan:
    """Validate the serve rules; raise `ConfigError` naming what to fix."""
    if not settings.listen_addr:
        return ServePlan(transport="unix", socket_path=settings.resolved_socket_path)
    host, port = parse_listen_addr(settings.listen_addr)
    digest = _token_digest(settings)
    cert, key = settings.tls_cert_file, settings.tls_key_file
    if (cert is None) != (key is None):
        raise ConfigError(
            "--tls-cert (FOYA_TLS_CERT_FILE) and --tls-key (FOYA_TLS_KEY_FILE) "
            "must be given together"
        )
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not path.is_file():
            raise ConfigError(f"{flag}: cannot read {path}")
    if cert is not None and key is not None:
        _check_pem_pair(cert, key)
    if key is not None and (mode := _mode(key)) & 0o077:
        raise ConfigError(
            f"--tls-key (FOYA_TLS_KEY_FILE): {key} has mode {mode:04o}, so other users may read "
            f"the private key; run `chmod 600 {key}`"
        )
    if cert is None and not settings.allow_plaintext:
        raise ConfigError(
            "--listen without TLS needs --allow-plaintext (FOYA_ALLOW_PLAINTEXT=1); "
            "use it only behind a TLS proxy such as Caddy, or give --tls-cert and --tls-key"
        )
    return ServePlan("tcp", host=host, port=port, token_sha256=digest, tls_cert=cert, tls_key=key)


def _pem(path: Path, flag: str) -> tuple[set[str], bytes]:
    """The kinds of PEM blocks in `path` (`CERTIFICATE`, `PRIVATE KEY`, …) and its bytes."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{flag}: cannot read {path}: {exc.strerror}") from exc
    return {m.decode() for m in _PEM_LABEL.findall(data)}, data


def _check_pem_pair(cert: Path, key: Path) -> None:
    """Each file holds what its flag says, named in words (the TLS library only says "PEM
    lib"). Whether the key belongs to the certificate is checked when it is loaded."""
    (in_cert, _), (in_key, key_pem) = _pem(cert, "--tls-cert"), _pem(key, "--tls-key")
    cert_has_key = any(label.endswith("PRIVATE KEY") for label in in_cert)
    key_has_key = any(label.endswith("PRIVATE KEY") for label in in_key)
    if "CERTIFICATE" not in in_cert and cert_has_key and "CERTIFICATE" in in_key:
        raise ConfigError(
            f"--tls-key {key} holds a certificate, not a private key, and --tls-cert {cert} "
            "holds the private key: swap them (FOYA_TLS_KEY_FILE, FOYA_TLS_CERT_FILE)"
        )
    if "CERTIFICATE" not in in_cert:
        what = "a private key, not a certificate" if cert_has_key else "no PEM certificate"
        raise ConfigError(f"--tls-cert (FOYA_TLS_CERT_FILE): {cert} holds {what}")
    if not key_has_key:
        what = "a certificate, not a private key" if in_key else "no PEM private key"
        raise ConfigError(f"--tls-key (FOYA_TLS_KEY_FILE): {key} holds {what}")
    # OpenSSL would ask for the passphrase on the terminal, or fail with "PEM lib" without one.
    if "ENCRYPTED PRIVATE KEY" in in_key or b"Proc-Type: 4,ENCRYPTED" in key_pem:
        raise ConfigError(
            f"--tls-key (FOYA_TLS_KEY_FILE): {key} is protected by a passphrase; give the key "
            f"unencrypted (`openssl pkey -in {key} -out key.pem`, then `chmod 600 key.pem`)"
        )


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def parse_listen_addr(value: str) -> tuple[str, int]:
    """Parse `host:port` or `[v6]:port`; the host must be a name or an IP literal."""
    error = ConfigError(f"--listen (FOYA_LISTEN_ADDR): expected host:port, got {value!r}")
    if value.startswith("["):
        host, sep, rest = value[1:].partition("]:")
        if not sep:
            raise error
        try:
            ipaddress.IPv6Address(host)
        except ValueError as exc:
            raise error from exc
    else:
        host, sep, rest = value.rpartition(":")
        if not sep or not host or ":" in host:
            raise error
    if not (rest.isascii() and rest.isdigit()) or not 0 <= int(rest) <= 65535:
        raise error
    return host, int(rest)


def _token_digest(settings: Settings) -> str:
    env, file = settings.auth_token_sha256, settings.auth_token_hash_file
    if env and file:
        raise ConfigError(
            "set only one of FOYA_AUTH_TOKEN_SHA256 and --auth-token-hash-file "
            "(FOYA_AUTH_TOKEN_HASH_FILE)"
        )
    if file is not None:
        # Whoever can write the digest chooses the token the next start accepts.
        if file.is_file() and (mode := _mode(file)) & 0o022:
            raise ConfigError(
                f"--auth-token-hash-file (FOYA_AUTH_TOKEN_HASH_FILE): {file} has mode {mode:04o}, "
                f"so other users may replace the digest; run `chmod 600 {file}`"
            )
        try:
            raw = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"--auth-token-hash-file: cannot read {file}: {getattr(exc, 'strerror', exc)}"
            ) from exc
        source = "--auth-token-hash-file"
    elif env:
        raw, source = env, "FOYA_AUTH_TOKEN_SHA256"
    else:
        raise ConfigError(
            "--listen needs a token digest: --auth-token-hash-file (FOYA_AUTH_TOKEN_HASH_FILE) "
            "or FOYA_AUTH_TOKEN_SHA256; create one with `foya token --auth-token-hash-file PATH`"
        )
    digest = raw.strip().lower()
    if not _HEX64.fullmatch(digest):
        raise ConfigError(f"{source}: the token digest must be exactly 64 hex characters (SHA-256)")
    return digest
