"""The options of `foya serve` (app.cli), each with its flag, metavar and environment variable,
kept apart so the command reads as what it does."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.ops.client_flags import env

# What to do instead of `--replicate URL-with-a-password` (app.ops.secretargs).
REPLICA_INSTEAD = (
    "set FOYA_REPLICA_URL to the URL instead (a process's environment is its user's only), "
    "or authenticate with a key: FOYA_REPLICA_SFTP_KEY for sftp, AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY for s3"
)

ListenOpt = Annotated[
    str | None,
    typer.Option(
        "--listen",
        metavar="HOST:PORT",
        help=env("Serve TCP instead of the Unix socket.", "FOYA_LISTEN_ADDR"),
    ),
]
SocketOpt = Annotated[
    Path | None,
    typer.Option(
        "--socket",
        metavar="PATH",
        help=env("Unix socket path (default: kernel.sock in the data dir).", "FOYA_SOCKET_PATH"),
    ),
]
AuthTokenHashFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--auth-token-hash-file",
        metavar="FILE",
        help=env("File holding the token's SHA-256 hex digest.", "FOYA_AUTH_TOKEN_HASH_FILE"),
    ),
]
TlsCertOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert", metavar="FILE", help=env("PEM certificate chain.", "FOYA_TLS_CERT_FILE")
    ),
]
TlsKeyOpt = Annotated[
    Path | None,
    typer.Option("--tls-key", metavar="FILE", help=env("PEM private key.", "FOYA_TLS_KEY_FILE")),
]
AllowPlaintextOpt = Annotated[
    bool,
    typer.Option(
        "--allow-plaintext",
        help=env("Serve TCP without TLS (behind a TLS proxy).", "FOYA_ALLOW_PLAINTEXT=1"),
    ),
]
ReplicateOpt = Annotated[
    str | None,
    typer.Option(
        "--replicate",
        metavar="URL",
        help=env(
            "Replicate the database and files continuously with Litestream to URL "
            "(file:///path, sftp://user@host/path, s3://bucket/prefix); a URL with a "
            "password only in FOYA_REPLICA_URL.",
            "FOYA_REPLICA_URL",
        ),
    ),
]
CheckOpt = Annotated[
    bool,
    typer.Option(
        "--check",
        help="Check the settings, TLS files, token digest and data dir, print what would be "
        "served, and exit (0 fine, 2 refused) without listening.",
    ),
]
