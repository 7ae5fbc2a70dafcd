"""`foya serve` end to end: flags and env, startup refusals, Unix socket rules, probes, metrics,
logs, TLS and graceful shutdown. Every kernel here is a real subprocess (see helpers.Kernel)."""

from __future__ import annotations

import base64
import re
import signal
import socket
import ssl
import stat
import subprocess
import sys
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.helpers import (
    REPO,
    SECURITY_HEADERS,
    UNAUTHORIZED,
    Fleet,
    Kernel,
    Launcher,
    TlsFiles,
    UnixSetup,
    app_endpoints,
    base_env,
    free_ports,
    is_listening,
    sha256_hex,
    wait_until,
    write_tls_pair,
)

import app

# --------------------------------------------------------------------------- startup refusals

DIGEST = "ab" * 32  # a well-formed digest for cases that must get past the digest rules


@dataclass(frozen=True)
class Refusal:
    """A `foya serve` invocation that must be refused before anything listens.

    `{port}`, `{busy}` and `{files}` in args and env values are filled in by the fixture, and
    `{files}` in names by the test.
    """

    id: str
    args: tuple[str, ...]
    names: tuple[str, ...]  # what the one stderr line must name
    env: dict[str, str] = field(default_factory=dict)
    port_is_ours: bool = True  # False when the case's port is held by the test itself


TCP = ("serve", "--listen", "127.0.0.1:{port}")
PLAIN = (*TCP, "--allow-plaintext")
OK_DIGEST = {"FOYA_AUTH_TOKEN_SHA256": DIGEST}
CERT, KEY = "{files}/cert.pem", "{files}/key.pem"

REFUSALS = [
    # the listen address; a valid FOYA_LISTEN_ADDR must not rescue a bad --listen
    Refusal("listen_nonsense", ("serve", "--listen", "nonsense", "--allow-plaintext"),
            ("--listen",), {**OK_DIGEST, "FOYA_LISTEN_ADDR": "127.0.0.1:{port}"}),
    Refusal("listen_host_without_port_via_env", ("serve", "--allow-plaintext"),
            ("--listen", "FOYA_LISTEN_ADDR"), {**OK_DIGEST, "FOYA_LISTEN_ADDR": "host:"}),
    Refusal("listen_port_out_of_range", ("serve", "--listen", "host:99999", "--allow-plaintext"),
            ("--listen",), OK_DIGEST),
    Refusal("listen_port_in_use", ("serve", "--listen", "127.0.0.1:{busy}", "--allow-plaintext"),
            ("--listen",), OK_DIGEST, port_is_ours=False),
    Refusal("listen_unicode_digit_port",
            ("serve", "--listen", "127.0.0.1:\u00b2", "--allow-plaintext"), ("--listen",),
            OK_DIGEST),
    # the token digest
    Refusal("no_digest", PLAIN, ("FOYA_AUTH_TOKEN_SHA256", "--auth-token-hash-file")),
    Refusal("digest_not_64_hex", PLAIN, ("FOYA_AUTH_TOKEN_SHA256",),
            {"FOYA_AUTH_TOKEN_SHA256": "g" * 64}),
    Refusal("digest_env_and_file", (*PLAIN, "--auth-token-hash-file", "{files}/good"),
            ("FOYA_AUTH_TOKEN_SHA256", "--auth-token-hash-file"), OK_DIGEST),
    # root reads any file whatever its mode, so "unreadable" is a path that cannot be read
    Refusal("digest_file_unreadable", (*PLAIN, "--auth-token-hash-file", "{files}/missing"),
            ("--auth-token-hash-file",)),
    # TLS
    Refusal("cert_without_key", (*TCP, "--tls-cert", CERT), ("--tls-cert", "--tls-key"),
            OK_DIGEST),
    Refusal("cert_not_pem", (*TCP, "--tls-cert", "{files}/not-pem", "--tls-key", KEY),
            ("--tls-cert", "{files}/not-pem", "holds no PEM certificate"), OK_DIGEST),
    # what each TLS file holds, in words rather than OpenSSL's "[SSL] PEM lib"
    Refusal("cert_and_key_swapped", (*TCP, "--tls-cert", KEY, "--tls-key", CERT),
            ("--tls-key", CERT, "holds a certificate, not a private key", "--tls-cert", KEY,
             "swap them"), OK_DIGEST),
    Refusal("key_is_a_certificate", (*TCP, "--tls-cert", CERT, "--tls-key", CERT),
            ("--tls-key", CERT, "holds a certificate, not a private key"), OK_DIGEST),
    Refusal("cert_is_a_key", (*TCP, "--tls-cert", KEY, "--tls-key", KEY),
            ("--tls-cert", KEY, "holds a private key, not a certificate"), OK_DIGEST),
    Refusal("key_not_pem", (*TCP, "--tls-cert", CERT, "--tls-key", "{files}/not-pem-0600"),
            ("--tls-key", "{files}/not-pem-0600", "holds no PEM private key"), OK_DIGEST),
    Refusal("key_of_another_certificate",
            (*TCP, "--tls-cert", CERT, "--tls-key", "{files}/other/key.pem"),
            ("--tls-cert", CERT, "--tls-key", "{files}/other/key.pem",
             "do not belong together"), OK_DIGEST),
    Refusal("key_readable_by_others",
            (*TCP, "--tls-cert", CERT, "--tls-key", "{files}/key-0644.pem"),
            ("--tls-key", "chmod 600", "0644"), OK_DIGEST),
    # a digest others may write lets them choose the token: refused, not just warned about
    Refusal("digest_file_world_writable",
            (*PLAIN, "--auth-token-hash-file", "{files}/digest-0666"),
            ("--auth-token-hash-file", "chmod 600", "0666")),
    # plaintext
    Refusal("no_tls_no_allow_plaintext", TCP, ("--allow-plaintext",), OK_DIGEST),
    # a log level foya does not know
    Refusal("log_level_unknown", PLAIN, ("FOYA_LOG_LEVEL", "verbose", "debug, info, warning"),
            {**OK_DIGEST, "FOYA_LOG_LEVEL": "verbose"}),
]  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    returncode: int | None  # None: still running when the deadline passed (then killed)
    stderr: str
    port: int
    listening_after: bool
    files: Path  # what `{files}` stands for in the case's names


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    """Run every refusal case at once (they are independent) and collect how each ended."""
    files = tmp_path_factory.mktemp("refusal-files")
    write_tls_pair(files)
    (files / "good").write_text(DIGEST + "\n")
    (files / "not-pem").write_text("this is not a certificate\n")
    (files / "not-pem-0600").write_text("this is not a key\n")
    (files / "not-pem-0600").chmod(0o600)
    write_tls_pair(files / "other")
    (files / "key-0644.pem").write_bytes((files / "key.pem").read_bytes())
    (files / "key-0644.pem").chmod(0o644)
    (files / "digest-0666").write_text(DIGEST + "\n")
    (files / "digest-0666").chmod(0o666)

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    ports = free_ports(len(REFUSALS))
    launcher = Launcher(files / "procs")
    started: list[tuple[Refusal, int, Kernel]] = []
    try:
        for case, port in zip(REFUSALS, ports, strict=True):

            def fill(value: str, port: int = port) -> str:
                return value.format(port=port, busy=busy.getsockname()[1], files=files)

            env = base_env(
                FOYA_DATA_DIR=str(files / "data" / case.id),
                **{k: fill(v) for k, v in case.env.items()},
            )
            kernel = launcher([fill(a) for a in case.args], env=env, ready=False)
            started.append((case, port, kernel))
        outcomes = {}
        for case, port, kernel in started:
            code = kernel.wait_exit(timeout=60)
            if code is None:
                kernel.stop(signal.SIGKILL)
            listening = is_listening(port) if case.port_is_ours else False
            outcomes[case.id] = Outcome(code, kernel.stderr(), port, listening, files)
        yield outcomes
    finally:
        launcher.close()
        busy.close()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in REFUSALS])
def test_tcp_startup_refusal(refusals: dict[str, Outcome], case: Refusal) -> None:
    outcome = refusals[case.id]
    assert outcome.returncode is not None, f"kept running: {outcome.stderr}"
    assert outcome.returncode == 2, outcome.stderr  # cli.EXIT_CONFIG: non-zero, a usage refusal
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("foya: ")
    for name in case.names:
        assert name.format(files=outcome.files) in lines[0]
    assert not outcome.listening_after, f"something listens on {outcome.port}"


# --------------------------------------------------------------------------- TCP flags and env


def test_tcp_configured_entirely_through_env(fleet: Fleet, token: str) -> None:
    """FOYA_LISTEN_ADDR, FOYA_DATA_DIR, FOYA_AUTH_TOKEN_HASH_FILE, FOYA_ALLOW_PLAINTEXT=1."""
    kernel = fleet.ready("env_only")
    with kernel.client() as anonymous, kernel.client(token) as authed:
        assert anonymous.get("/readyz").status_code == 401
        assert authed.get("/readyz").status_code == 200
    assert (fleet.env_data_dir / "kernel.lock").read_text().strip() == str(kernel.pid)
    assert not (fleet.env_data_dir / "kernel.sock").exists()  # TCP mode opens no Unix socket


@pytest.mark.parametrize("name", ["env_only", "tls"])
def test_digest_is_trimmed_and_lowercased(fleet: Fleet, token: str, name: str) -> None:
    """Both kernels get the digest uppercase between blanks: env_only through its hash file,
    tls through FOYA_AUTH_TOKEN_SHA256."""
    kernel = fleet.ready(name)
    with kernel.client(token) as authed, kernel.client("x" * 43) as wrong:
        assert authed.get("/readyz").status_code == 200
        assert wrong.get("/readyz").status_code == 401


# --------------------------------------------------------------------------- Unix socket mode


def assert_serves(kernel: Kernel) -> None:
    with kernel.client() as client:
        response = client.get("/readyz")
    assert response.status_code == 200, response.text


def test_unix_lock_file_holds_pid(unix: UnixSetup) -> None:
    assert (unix.data_dir / "kernel.lock").read_text().strip() == str(unix.kernel.pid)


def test_unix_modes(unix: UnixSetup) -> None:
    assert stat.S_IMODE(unix.data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(unix.socket.parent.stat().st_mode) == 0o700
    st = unix.socket.lstat()
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600


def test_unix_needs_no_token(unix: UnixSetup) -> None:
    with unix.kernel.client() as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert {c["name"] for c in ready.json()["checks"]} >= {"data_dir", "disk"}
        assert client.get("/metrics").status_code == 200
        missing = client.get("/nope")
        assert missing.status_code == 404
        assert missing.json()["code"] == "not_found"
        for name, value in SECURITY_HEADERS.items():
            assert ready.headers[name] == value
            assert missing.headers[name] == value


def test_unix_socket_flag_overrides_env(unix: UnixSetup) -> None:
    assert not unix.env_socket.exists()


def test_unix_listening_log_line(unix: UnixSetup) -> None:
    events = [line.get("event") for line in unix.kernel.logs()]
    assert f"foya kernel listening on unix:{unix.socket}" in events


def test_second_kernel_on_same_data_dir_is_refused(unix: UnixSetup) -> None:
    other_socket = unix.root / "other.sock"
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--data-dir", str(unix.data_dir),
         "--socket", str(other_socket)],
        cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "--data-dir" in lines[0]
    assert f"pid {unix.kernel.pid}" in lines[0]
    assert not other_socket.exists()
    assert (unix.data_dir / "kernel.lock").read_text().strip() == str(unix.kernel.pid)
    assert_serves(unix.kernel)


def test_second_kernel_on_same_live_socket_is_refused(unix: UnixSetup) -> None:
    inode = unix.socket.stat().st_ino
    result = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--data-dir", str(unix.root / "data2"),
         "--socket", str(unix.socket)],
        cwd=REPO, env=base_env(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "already listening" in lines[0]
    assert "--socket" in lines[0]
    assert unix.socket.stat().st_ino == inode  # the live socket was left alone
    assert_serves(unix.kernel)


def test_bare_foya_serves_on_default_socket_and_removes_it_on_sigterm(
    short_dir: Path, spawn: Launcher
) -> None:
    """No subcommand, only FOYA_DATA_DIR: the socket is `<data-dir>/kernel.sock`."""
    data_dir = short_dir / "data"
    sock = data_dir / "kernel.sock"
    kernel = spawn([], uds=sock, env=base_env(FOYA_DATA_DIR=str(data_dir)))
    assert_serves(kernel)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert (data_dir / "kernel.lock").read_text().strip() == str(kernel.pid)
    assert kernel.stop(signal.SIGTERM) == 0
    assert not sock.exists()


def test_stale_socket_after_kill_9_is_replaced(short_dir: Path, spawn: Launcher) -> None:
    data_dir, sock = short_dir / "data", short_dir / "k.sock"
    args = ["serve", "--data-dir", str(data_dir), "--socket", str(sock)]
    first = spawn(args, uds=sock)
    first.send(signal.SIGKILL)
    assert first.wait_exit() == -signal.SIGKILL
    assert stat.S_ISSOCK(sock.lstat().st_mode)  # left behind ...
    with socket.socket(socket.AF_UNIX) as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(str(sock))  # ... and nobody answers on it

    second = spawn(args, uds=sock)
    assert_serves(second)
    assert (data_dir / "kernel.lock").read_text().strip() == str(second.pid)


def test_regular_file_at_socket_path_is_not_deleted(short_dir: Path, spawn: Launcher) -> None:
    target = short_dir / "important.txt"
    target.write_text("keep me\n")
    kernel = spawn(
        ["serve", "--data-dir", str(short_dir / "data"), "--socket", str(target)],
        uds=target,
        ready=False,
    )
    wait_until(
        lambda: kernel.proc.poll() is not None or not target.is_file(),
        "the kernel to refuse or to replace the file",
    )
    assert target.is_file()
    assert target.read_text() == "keep me\n"
    assert kernel.wait_exit() != 0
    assert "--socket" in kernel.stderr()


# ----------------------------------------------------------------------- probes, metrics, errors


def test_readyz_reports_its_checks(tcp_kernel: Kernel, token: str) -> None:
    with tcp_kernel.client(token) as client:
        response = client.get("/readyz")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == "ready"
    checks = {c["name"]: c for c in body["checks"]}
    assert {"data_dir", "disk"} <= set(checks)
    assert all(c["ok"] for c in checks.values())


def test_readyz_503_when_disk_floor_not_met(fleet: Fleet, token: str) -> None:
    kernel = fleet.ready("disk")  # FOYA_MIN_FREE_DISK_MB=10**12
    with kernel.client(token) as client:
        response = client.get("/readyz")
        assert client.get("/healthz").status_code == 200  # liveness is not readiness
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "not_ready"
    assert "disk" in body["message"]
    checks = {c["name"]: c["ok"] for c in body["checks"]}
    assert checks["disk"] is False
    assert checks["data_dir"] is True
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value


def test_not_found_and_method_not_allowed(tcp_kernel: Kernel, token: str) -> None:
    with tcp_kernel.client(token) as client:
        missing = client.get("/no/such/route")
        wrong_method = client.post("/healthz")
    assert missing.status_code == 404
    assert missing.json()["code"] == "not_found"
    assert isinstance(missing.json()["message"], str)
    assert wrong_method.status_code == 405
    assert wrong_method.json()["code"] == "method_not_allowed"
    assert isinstance(wrong_method.json()["message"], str)


def test_the_garbage_collector_runs_once_the_server_listens(tcp_kernel: Kernel, token: str) -> None:
    """Start-up runs without it (app.__main__); a server left without it would only grow."""

    def young_collections(client: httpx.Client) -> float:
        families = text_string_to_metric_families(client.get("/metrics").text)
        (gc_runs,) = [f for f in families if f.name == "python_gc_collections"]
        return next(s.value for s in gc_runs.samples if s.labels["generation"] == "0")

    with tcp_kernel.client(token) as client:
        before = young_collections(client)
        for _ in range(300):  # error answers leave exceptions' reference cycles behind
            assert client.get("/no/such/route").status_code == 404
            bad = client.post(
                "/sessions", content=b"{bad", headers={"content-type": "application/json"}
            )
            assert bad.status_code == 400
        assert young_collections(client) > before


def test_metrics_exposition(tcp_kernel: Kernel, token: str, digest: str, tmp_path: Path) -> None:
    unknown = f"/unknown-{uuid.uuid4().hex}"
    with tcp_kernel.client(token) as client:
        assert client.get("/readyz").status_code == 200
        assert client.get(unknown).status_code == 404
        assert client.get("/openapi.json").status_code == 200
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert unknown.lstrip("/") not in text  # never the raw path of an unmatched request
    families = {f.name: f for f in text_string_to_metric_families(text)}

    requests = families["foya_http_requests"]
    assert requests.type == "counter"
    totals = [s for s in requests.samples if s.name == "foya_http_requests_total"]
    assert totals
    templates = {path for _, path in app_endpoints(tmp_path / "routes", digest)}
    for sample in totals:
        assert set(sample.labels) == {"method", "route", "status"}
        assert sample.labels["route"] in templates | {"unmatched"}
    by_labels = {(s.labels["method"], s.labels["route"], s.labels["status"]) for s in totals}
    assert ("GET", "/readyz", "200") in by_labels
    assert ("GET", "/openapi.json", "200") in by_labels
    assert ("GET", "unmatched", "404") in by_labels

    latency = families["foya_http_request_duration_seconds"]
    assert latency.type == "histogram"
    buckets = [s for s in latency.samples if s.name.endswith("_bucket")]
    assert any(s.labels.get("route") == "/readyz" and s.labels.get("method") == "GET"
               for s in buckets)  # fmt: skip

    in_flight = families["foya_http_requests_in_flight"]
    assert in_flight.type == "gauge"
    assert in_flight.samples[0].value >= 1  # the /metrics request itself

    assert families["process_resident_memory_bytes"].samples[0].value > 0

    build = [s for f in families.values() for s in f.samples if s.name == "foya_build_info"]
    assert len(build) == 1
    assert build[0].labels["version"] == app.__version__
    assert build[0].value == 1


def ready_gauge(client: httpx.Client) -> dict[str, float]:
    """`foya_ready{check}` from one scrape of /metrics."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    (family,) = [f for f in text_string_to_metric_families(response.text) if f.name == "foya_ready"]
    assert family.type == "gauge"
    return {s.labels["check"]: s.value for s in family.samples}


def test_foya_ready_is_current_on_metrics_without_a_readyz_poll(
    spawn: Launcher, tmp_path: Path, tcp_kernel: Kernel, token: str
) -> None:
    """A scrape evaluates the checks itself, so `foya_ready == 0` alerts even when nobody polls
    /readyz; /readyz then agrees with it."""
    full = spawn.tcp(
        ["--allow-plaintext", "--data-dir", str(tmp_path / "data")],
        env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(token), FOYA_MIN_FREE_DISK_MB=str(10**12)),
    )
    with full.client(token) as client:
        assert ready_gauge(client) == {"database": 1, "data_dir": 1, "disk": 0}
        assert client.get("/readyz").status_code == 503
        assert ready_gauge(client)["disk"] == 0
    with tcp_kernel.client(token) as client:
        assert ready_gauge(client) == {"database": 1, "data_dir": 1, "disk": 1}


# --------------------------------------------------------------------------- logs


def test_log_level_is_case_insensitive_and_filters(short_dir: Path, spawn: Launcher) -> None:
    """FOYA_LOG_LEVEL=Warning: no info lines (request, listening), warnings still go out."""
    sock = short_dir / "k.sock"
    kernel = spawn(
        ["serve", "--data-dir", str(short_dir / "data"), "--socket", str(sock)],
        uds=sock,
        env=base_env(FOYA_LOG_LEVEL="Warning"),
    )
    with kernel.client() as client:
        session = client.post("/sessions", json={}).json()["id"]
        decided = client.post(f"/sessions/{session}/approvals/nope", json={"decision": "denied"})
        assert decided.status_code == 204  # an unknown approval id: logged as a warning
    assert kernel.stop() == 0
    lines = kernel.logs()
    assert {line["level"] for line in lines} == {"warning"}, lines
    assert any(line["event"].startswith("approval decision ignored") for line in lines), lines


def request_lines(kernel: Kernel, request_id: str) -> list[dict[str, object]]:
    return [
        line
        for line in kernel.logs()
        if line.get("event") == "request" and line.get("request_id") == request_id
    ]


def test_one_json_log_line_per_request(tcp_kernel: Kernel, token: str) -> None:
    tag = uuid.uuid4().hex[:12]
    unknown = f"/raw-path-{tag}"
    calls = {
        f"ok-{tag}": ("GET", "/readyz", True, 200, "/readyz"),
        f"missing-{tag}": ("GET", unknown, True, 404, "unmatched"),
        f"method-{tag}": ("POST", "/healthz", True, 405, "/healthz"),
        f"anon-{tag}": ("GET", "/metrics", False, 401, "unmatched"),
    }
    with tcp_kernel.client() as client:
        for request_id, (method, path, authed, status, _) in calls.items():
            headers = {"X-Request-ID": request_id}
            if authed:
                headers["Authorization"] = f"Bearer {token}"
            response = client.request(method, path, headers=headers)
            assert response.status_code == status
            assert response.headers["x-request-id"] == request_id

    wait_until(
        lambda: all(request_lines(tcp_kernel, rid) for rid in calls), "the request log lines"
    )
    for request_id, (method, _, _, status, route) in calls.items():
        lines = request_lines(tcp_kernel, request_id)
        assert len(lines) == 1, lines
        line = lines[0]
        assert line["method"] == method
        assert line["route"] == route
        assert line["status"] == status
        assert isinstance(line["duration_ms"], int | float)
        assert line["duration_ms"] >= 0
    assert unknown not in tcp_kernel.stdout()  # the route template, never the raw path


def test_bad_request_id_is_replaced(tcp_kernel: Kernel) -> None:
    with tcp_kernel.client() as client:
        response = client.get("/healthz", headers={"X-Request-ID": "not ok; " + "x" * 80})
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])


def test_stdout_is_json_with_listening_line(tcp_kernel: Kernel) -> None:
    events = [line.get("event") for line in tcp_kernel.logs()]  # fails on a non-JSON line
    assert f"foya kernel listening on {tcp_kernel.url}" in events


def test_token_never_logged(tcp_kernel: Kernel, token: str) -> None:
    basic = base64.b64encode(f"user:{token}".encode()).decode()
    marker = f"last-{uuid.uuid4().hex}"
    with tcp_kernel.client() as client:
        client.get("/readyz", headers={"Authorization": f"Bearer {token}"})
        client.get("/readyz", headers={"Authorization": f"bearer {token}"})
        client.get("/readyz", headers={"Authorization": f"Bearer {token}x"})
        client.get("/readyz", headers={"Authorization": token})
        client.get("/nope", headers={"Authorization": f"Bearer {token}"})
        client.get("/readyz", headers={"Authorization": f"Basic {basic}"})
        client.get("/healthz", headers={"Authorization": f"Bearer {token}", "X-Request-ID": marker})
    wait_until(lambda: bool(request_lines(tcp_kernel, marker)), "the last request's log line")
    output = tcp_kernel.stdout() + tcp_kernel.stderr()
    assert token not in output
    assert f"Bearer {token}" not in output
    assert basic not in output


# --------------------------------------------------------------------------- TLS


def test_tls_verified_request(tls_kernel: Kernel, token: str) -> None:
    assert tls_kernel.url is not None
    assert tls_kernel.url.startswith("https://")
    with tls_kernel.client(token) as client:
        response = client.get("/readyz")
    assert response.status_code == 200
    events = [line.get("event") for line in tls_kernel.logs()]
    assert f"foya kernel listening on {tls_kernel.url}" in events


def test_tls_auth_still_required(tls_kernel: Kernel) -> None:
    with tls_kernel.client() as client:
        response = client.get("/readyz")
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED


def test_tls_negotiates_http2(tls_kernel: Kernel, tls_files: TlsFiles, token: str) -> None:
    with tls_kernel.client(token, http2=True) as client:
        response = client.get("/readyz")
    assert response.status_code == 200
    assert response.http_version == "HTTP/2"

    ctx = tls_files.client_context()
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with (
        socket.create_connection(("127.0.0.1", tls_kernel.port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.selected_alpn_protocol() == "h2"


def test_tls_untrusted_certificate_fails_verification(tls_kernel: Kernel) -> None:
    with (
        httpx.Client(verify=ssl.create_default_context(), timeout=10) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.get(f"{tls_kernel.url}/healthz")


def _legacy_context(tls_files: TlsFiles, maximum: ssl.TLSVersion) -> ssl.SSLContext:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = tls_files.client_context()
        # Security level 0 lets *this client* offer TLS 1.0/1.1, so the refusal is the server's.
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = maximum
    return ctx


def _handshake(tls_kernel: Kernel, ctx: ssl.SSLContext) -> str | None:
    with (
        socket.create_connection(("127.0.0.1", tls_kernel.port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        return tls.version()


def test_tls_1_1_client_is_refused(tls_kernel: Kernel, tls_files: TlsFiles) -> None:
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        _handshake(tls_kernel, _legacy_context(tls_files, ssl.TLSVersion.TLSv1_1))
    # The same client allowed TLS 1.2 connects: the refusal above is about the version.
    assert _handshake(tls_kernel, _legacy_context(tls_files, ssl.TLSVersion.TLSv1_2)) == "TLSv1.2"


# --------------------------------------------------------------------------- shutdown


def test_plaintext_on_all_interfaces_is_logged_as_a_warning(
    spawn: Launcher, tmp_path: Path, token: str
) -> None:
    port = free_ports(1)[0]
    kernel = spawn(
        ["serve", "--listen", f"0.0.0.0:{port}", "--allow-plaintext",
         "--data-dir", str(tmp_path / "data")],
        url=f"http://127.0.0.1:{port}",
        env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(token)),
    )  # fmt: skip
    warnings = [line for line in kernel.logs() if line.get("level") == "warning"]
    assert any(
        "plaintext HTTP on a non-loopback address" in line["event"]
        and line["address"] == f"http://0.0.0.0:{port}"
        for line in warnings
    ), warnings


def test_plaintext_on_loopback_is_not_warned_about(tcp_kernel: Kernel) -> None:
    assert not [line for line in tcp_kernel.logs() if "non-loopback" in line.get("event", "")]


def test_sigint_graceful_exit_over_tcp(spawn: Launcher, tmp_path: Path, token: str) -> None:
    """SIGINT here; SIGTERM is covered by the Unix-socket and sd_notify tests."""
    kernel = spawn.tcp(
        ["--allow-plaintext", "--data-dir", str(tmp_path / "data")],
        env=base_env(FOYA_AUTH_TOKEN_SHA256=sha256_hex(token)),
    )
    kernel.send(signal.SIGINT)
    assert kernel.wait_exit(timeout=10) == 0, kernel.describe()
    assert kernel.port is not None
    assert not is_listening(kernel.port)
    events = [line.get("event") for line in kernel.logs()]
    assert "shutting down" in events
    assert "stopped" in events


def test_sd_notify_ready_and_stopping_then_sigterm_exit(short_dir: Path, spawn: Launcher) -> None:
    """Also the one place FOYA_SOCKET_PATH is used."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(short_dir / "notify"))
        notify_env = str(short_dir / "notify")
        notify.settimeout(30)  # upper bound for a message to arrive, not a speed requirement
        sock = short_dir / "s" / "env.sock"
        kernel = spawn(
            ["serve", "--data-dir", str(short_dir / "data")],
            uds=sock,
            env=base_env(NOTIFY_SOCKET=notify_env, FOYA_SOCKET_PATH=str(sock)),
        )
        assert notify.recv(4096) == b"READY=1"
        assert_serves(kernel)
        kernel.send(signal.SIGTERM)
        assert notify.recv(4096) == b"STOPPING=1"
        assert kernel.wait_exit(timeout=10) == 0, kernel.describe()


def test_parent_exit_stops_kernel(short_dir: Path, spawn: Launcher) -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        sock = short_dir / "k.sock"
        kernel = spawn(
            ["serve", "--data-dir", str(short_dir / "data"), "--socket", str(sock)],
            uds=sock,
            env=base_env(FOYA_PARENT_PID=str(parent.pid)),
        )
        assert_serves(kernel)
    finally:
        parent.terminate()
        try:
            parent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            parent.kill()
            parent.wait()
    assert kernel.wait_exit(timeout=10) == 0, kernel.describe()
    assert not sock.exists()
    events = [line.get("event") for line in kernel.logs()]
    assert "parent process exited; shutting down" in events
