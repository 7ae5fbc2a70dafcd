"""`TunnelConfig`: where a tunnelled kernel runs and how to reach it.

Shared by `local` (the ssh supervisor) and `remote` (the start script), which import it and not
each other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TunnelConfig:
    """Where the kernel runs and how to reach it. Remote paths may start with `~/`."""

    destination: str  # user@host, or a Host alias: anything ssh accepts
    token: str  # the raw bearer token; only its SHA-256 lives on the remote
    remote_port: int = 8787
    local_port: int = 0  # 0: a free port, kept across reconnections
    remote_foya: str = "foya"  # resolved by the remote's non-interactive PATH unless a path
    remote_data_dir: str | None = None  # None: the remote's default (app.ops.tunnel.remote)
    remote_token_hash_file: str = "~/.config/foya/auth-token.sha256"  # noqa: S105 (a path)
    remote_log_file: str | None = None  # None: <data-dir>/kernel.log
    ssh: str = "ssh"
    ssh_options: tuple[str, ...] = ()  # e.g. ("-p", "2222", "-i", key, "-o", "User=me")
    ready_timeout: float = 30.0
    health_interval: float = 15.0  # how often a live tunnel re-checks /readyz
