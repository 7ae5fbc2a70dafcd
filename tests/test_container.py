"""The Dockerfile, .dockerignore and deploy/compose.yaml, checked without Docker.

No Docker daemon (nor `docker compose`) runs where these tests do, so the image is never built.
What can be checked without one is:

- the files' structure, parsed here (a Dockerfile instruction reader and a reader for the plain
  block-style YAML subset compose.yaml is written in: no PyYAML dependency just for this), and
  that the three files agree with each other (secret path, volume, port, service names);
- that the image's command runs as the image would run it: the same ENTRYPOINT/CMD arguments and
  ENV, as a real `foya serve` in a private mount namespace (`unshare --mount`) whose root file
  system is read-only, with a tmpfs on /tmp and one writable directory standing in for the
  volume, exactly what compose's `read_only: true` + `tmpfs` + volume give the container. Root
  ignores file modes, so only a read-only mount makes that a real test; the launcher checks that
  its read-only mounts do refuse writes before it starts the kernel.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.helpers import REPO, STOP_DEADLINE, free_port, sha256_hex, wait_until

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
COMPOSE = REPO / "deploy" / "compose.yaml"
VENV_BIN = Path(sys.executable).parent
IMAGE_PREFIX = "/opt/foya/bin/"
VOLUME = "/var/lib/foya"
SECRET = "/run/secrets/foya_token_sha256"


# ------------------------------------------------------------------------------ Dockerfile


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"no {keyword} in the stage FROM {self.base}"
        return found[-1]

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for args in self.all("ENV"):
            for item in shlex.split(args):
                key, sep, value = item.partition("=")
                assert sep, f"ENV {args!r}: use the KEY=value form"
                out[key] = value
        return out


def dockerfile_stages(text: str) -> list[Stage]:
    """Instructions per stage: comments dropped, `\\` continuations joined."""
    stages: list[Stage] = []
    logical = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not logical and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        keyword, _, args = logical.partition(" ")
        keyword, args, logical = keyword.upper(), args.strip(), ""
        if keyword == "FROM":
            parts = args.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(parts[0], name))
        else:
            assert stages, f"{keyword} before FROM"
            stages[-1].instructions.append((keyword, args))
    return stages


def exec_form(args: str) -> list[str]:
    """A JSON-array (exec form) argument list; shell form is refused."""
    assert args.startswith("["), f"not exec form: {args}"
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(a, str) for a in value), args
    return value


def healthcheck(stage: Stage) -> tuple[dict[str, str], list[str]]:
    """(options, exec-form command) of the stage's HEALTHCHECK."""
    options, _, command = stage.last("HEALTHCHECK").partition("CMD ")
    opts = dict(o.removeprefix("--").split("=", 1) for o in options.split())
    return opts, exec_form(command.strip())


# ------------------------------------------------------------------------------- YAML subset


def _scalar(text: str) -> Any:
    if text == "{}":
        return {}
    if text == "[]":
        return []
    if text[:1] in "\"'" and text[-1:] == text[:1]:
        return text[1:-1]
    return {"true": True, "false": False}.get(text, text)


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def yaml_subset(text: str) -> Any:
    """Block mappings, block sequences of scalars, quoted/plain scalars, `{}`, `[]`, booleans.

    Enough for compose.yaml as written; anything else (anchors, flow collections with content,
    multi-line strings, sequences of mappings) fails loudly rather than being misread."""
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        content = _strip_comment(raw)
        if content.strip():
            assert "\t" not in raw[: len(raw) - len(raw.lstrip())], f"tab indent: {raw!r}"
            assert not re.search(r"[&*|>]\s*$|^\s*[&*!]", content), f"unsupported: {raw!r}"
            lines.append((len(content) - len(content.lstrip()), content.strip()))
    value, end = _block(lines, 0, 0)
    assert end == len(lines), f"unparsed from line {lines[end]}"
    return value


def _block(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[Any, int]:
    if lines[i][1].startswith("- "):
        items: list[Any] = []
        while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
            item = lines[i][1][2:].strip()
            assert not re.match(r"[\w.-]+:(\s|$)", item), f"sequence of mappings: {lines[i]}"
            items.append(_scalar(item))
            i += 1
        return items, i
    mapping: dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == indent:
        match = re.fullmatch(r"([\w.-]+):(?:\s+(.*))?", lines[i][1])
        assert match, f"not a `key: value` line: {lines[i]}"
        key, rest = match.group(1), match.group(2)
        assert key not in mapping, f"duplicate key {key}"
        i += 1
        if rest:
            mapping[key] = _scalar(rest)
        elif i < len(lines) and lines[i][0] > indent:
            mapping[key], i = _block(lines, i, lines[i][0])
        elif i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
            mapping[key], i = _block(lines, i, indent)  # a sequence indented like its key
        else:
            mapping[key] = None
    assert i == len(lines) or lines[i][0] < indent, f"bad indentation at {lines[i]}"
    return mapping, i


# ---------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return dockerfile_stages(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def runtime(stages: list[Stage]) -> Stage:
    return stages[-1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    parsed = yaml_subset(COMPOSE.read_text())
    assert isinstance(parsed, dict)
    return parsed


def image_command(runtime: Stage) -> list[str]:
    return exec_form(runtime.last("ENTRYPOINT")) + exec_form(runtime.last("CMD"))


def option(argv: list[str], name: str) -> str:
    assert name in argv, f"{name} missing from {argv}"
    return argv[argv.index(name) + 1]


# --------------------------------------------------------------------------- static checks


def test_yaml_subset_reader_reads_what_compose_needs() -> None:
    text = """
a:
  b: "80:80"   # comment
  c:
    - x:/y
    - 'z # not a comment'
  d: {}
  e: true
f:
- g
"""
    assert yaml_subset(text) == {
        "a": {"b": "80:80", "c": ["x:/y", "z # not a comment"], "d": {}, "e": True},
        "f": ["g"],
    }
    with pytest.raises(AssertionError):
        yaml_subset("a:\n  - b: c\n")  # a sequence of mappings would be misread: refused


def test_dockerfile_builds_a_venv_and_runs_slim_as_uid_10001(stages: list[Stage]) -> None:
    assert len(stages) == 2, [s.base for s in stages]
    build, runtime = stages
    # Both stages on the same slim image, on the Python this suite runs on (hypercorn's
    # shutdown differs between Pythons: test it on the one the Dockerfile uses).
    version = "{}.{}".format(*sys.version_info[:2])
    for stage in stages:
        assert stage.base == f"python:{version}-slim-bookworm", stage.base
    assert build.name
    copied = [a.split() for a in runtime.all("COPY")]
    assert [f"--from={build.name}", "/opt/foya", "/opt/foya"] in copied, copied
    assert any("/opt/foya/bin/pip install ." in run for run in build.all("RUN")), build.all("RUN")

    assert runtime.last("USER") == "10001:10001"
    assert "--uid 10001" in " ".join(runtime.all("RUN"))
    assert "curl" not in " ".join(runtime.all("RUN")), "the healthcheck needs no curl"
    assert "rm -rf /var/lib/apt/lists/*" in " ".join(runtime.all("RUN"))
    assert exec_form(runtime.last("VOLUME")) == [VOLUME]
    assert runtime.last("EXPOSE") == "8787"
    assert not runtime.all("WORKDIR"), "the launcher below assumes the default cwd /"


def test_dockerfile_keeps_every_write_in_the_volume(runtime: Stage) -> None:
    env = runtime.env()
    assert env["FOYA_DATA_DIR"].startswith(VOLUME + "/"), env
    assert env["HOME"] == VOLUME, "tools write caches under HOME: it must be in the volume"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "/opt/foya" not in env.get("PATH", ""), "the agent's python/pip must not be the venv"

    argv = image_command(runtime)
    assert argv[:3] == ["/usr/bin/tini", "--", IMAGE_PREFIX + "foya"], argv
    assert argv[3] == "serve"
    assert option(argv, "--listen") == "0.0.0.0:8787"
    assert option(argv, "--auth-token-hash-file") == SECRET
    assert "--allow-plaintext" in argv
    assert "--data-dir" not in argv, "FOYA_DATA_DIR from ENV decides"

    opts, probe = healthcheck(runtime)
    assert probe[0] == IMAGE_PREFIX + "python", probe
    assert "http://127.0.0.1:8787/healthz" in probe[-1], probe
    assert opts["timeout"] == "3s" and "timeout=2" in probe[-1], "urllib gives up before Docker"


def test_dockerignore_lets_exactly_the_build_inputs_through(stages: list[Stage]) -> None:
    patterns = [
        p for p in DOCKERIGNORE.read_text().splitlines() if p.strip() and not p.startswith("#")
    ]
    assert patterns[0] == "*", "an allow-list keeps .venv, .git and data out of the context"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    sources = []
    for stage in stages:
        for args in stage.all("COPY"):
            parts = args.split()
            if not parts[0].startswith("--from="):
                sources += parts[:-1]
    assert sources, "no COPY from the context"
    assert set(sources) <= allowed, f"COPY sources {sources} not all in {allowed}"
    for source in sources:
        assert (REPO / source).exists(), source


def test_compose_puts_caddy_in_front_of_a_read_only_kernel(
    compose: dict[str, Any], runtime: Stage
) -> None:
    services = compose["services"]
    assert set(services) == {"foya", "caddy"}
    foya, caddy = services["foya"], services["caddy"]
    networks = compose["networks"]

    # The kernel publishes nothing and shares only an internal network with Caddy.
    assert "ports" not in foya and "expose" not in foya
    shared = set(foya["networks"]) & set(caddy["networks"])
    assert shared and all(networks[n].get("internal") is True for n in shared), shared
    assert any(not (networks[n] or {}).get("internal") for n in caddy["networks"])
    assert sorted(caddy["ports"]) == ["443:443", "443:443/udp", "80:80"]

    # Read-only root, /tmp in memory, state in a named volume at the image's VOLUME.
    assert foya["read_only"] is True
    assert any(t == "/tmp" or t.startswith("/tmp:") for t in foya["tmpfs"]), foya["tmpfs"]
    mounts = dict(v.split(":", 1) for v in foya["volumes"])
    assert {v for v in mounts.values()} == set(exec_form(runtime.last("VOLUME")))
    assert set(mounts) <= set(compose["volumes"]), "a named volume, not a host directory"
    assert foya["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in foya["security_opt"]
    assert foya["build"]["context"] == ".." and (COMPOSE.parent / "../Dockerfile").exists()

    # The secret lands where the image's command reads the digest.
    (secret,) = foya["secrets"]
    assert secret in compose["secrets"]
    assert f"/run/secrets/{secret}" == option(image_command(runtime), "--auth-token-hash-file")

    # Caddy mounts this repository's Caddyfile and proxies to the service on the image's port.
    volumes = dict(v.split(":", 1) for v in caddy["volumes"])
    assert volumes["../Caddyfile"] == "/etc/caddy/Caddyfile:ro"
    assert (COMPOSE.parent / "../Caddyfile").resolve() == REPO / "Caddyfile"
    port = option(image_command(runtime), "--listen").rsplit(":", 1)[1]
    assert caddy["environment"]["FOYA_UPSTREAM"] == f"foya:{port}"
    assert caddy["environment"]["FOYA_DOMAIN"].startswith("${FOYA_DOMAIN:?")
    assert caddy["depends_on"]["foya"]["condition"] == "service_healthy"
    assert {"/data", "/config"} <= {v.split(":")[0] for v in volumes.values()}


# ---------------------------------------------------------------------- the image's command

# Runs inside `unshare --mount`: the volume stand-in stays writable, /tmp becomes a tmpfs, and
# every mount holding a path the kernel could write to becomes read-only. Then it proves that a
# write is refused, and execs the kernel (same PID, so the test stops it by PID).
UNSHARE = ("unshare", "--mount", "--propagation", "private", "--")
LAUNCHER = r"""
import errno, os, subprocess, sys
volume, repo, *argv = sys.argv[1:]
def mount(*args):
    subprocess.run(["mount", *args], check=True)
def mount_point(path):
    points = [line.split()[4] for line in open("/proc/self/mountinfo")]
    return max((p for p in points if path == p or path.startswith(p.rstrip("/") + "/")), key=len)
mount("--bind", volume, volume)
# A checkout under /tmp (a CI clone) holds the venv and the sources the kernel runs from: keep it
# visible through the tmpfs by binding it back (read-only below, like every other path).
in_tmp = repo.startswith("/tmp/")
if in_tmp:
    host = os.path.join(os.path.dirname(volume), "host-tmp")
    os.makedirs(host)
    mount("--bind", "/tmp", host)
mount("-t", "tmpfs", "-o", "mode=1777,size=64m", "tmpfs", "/tmp")
if in_tmp:
    os.makedirs(repo)
    mount("--bind", os.path.join(host, os.path.relpath(repo, "/tmp")), repo)
paths = ["/", "/etc", "/var", "/usr", "/run", os.getcwd(), os.path.dirname(volume), repo]
paths += [sys.prefix, os.path.realpath(sys.executable)]
for point in sorted({mount_point(p) for p in paths} - {volume, "/tmp"}):
    mount("-o", "remount,bind,ro", point)
for probe in (os.getcwd(), os.path.dirname(volume), sys.prefix):
    path = os.path.join(probe, ".foya-ro-probe")
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY))
    except OSError as exc:
        assert exc.errno == errno.EROFS, exc
    else:
        os.unlink(path)
        sys.exit(f"launcher: {probe} is still writable")
os.execv(argv[0], argv)
"""


def on_host(value: str, volume: Path, secret: Path, port: int) -> str:
    """An image path or address, as this test maps it onto the host."""
    return (
        value.replace(SECRET, str(secret))
        .replace(VOLUME, str(volume))
        .replace(IMAGE_PREFIX, f"{VENV_BIN}/")
        .replace("0.0.0.0:8787", f"127.0.0.1:{port}")
        .replace("127.0.0.1:8787", f"127.0.0.1:{port}")
    )


@contextlib.contextmanager
def var_tmpdir() -> Iterator[Path]:
    """A directory outside /tmp, which the launcher hides under its tmpfs."""
    path = Path(tempfile.mkdtemp(prefix="foya-ro-", dir="/var/tmp"))
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


def test_image_command_serves_from_a_read_only_root(runtime: Stage, token: str) -> None:
    with var_tmpdir() as root:
        volume, secret = root / "volume", root / "secrets" / "foya_token_sha256"
        volume.mkdir()
        secret.parent.mkdir()
        secret.write_text(sha256_hex(token) + "\n")
        port = free_port()
        argv = image_command(runtime)[2:]  # tini only forwards signals
        argv = [on_host(a, volume, secret, port) for a in argv]
        env = {k: on_host(v, volume, secret, port) for k, v in runtime.env().items()}
        env["PATH"] = os.environ["PATH"]
        log = root / "kernel.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*UNSHARE, sys.executable, "-c", LAUNCHER, str(volume), str(REPO), *argv],
                cwd="/",
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            _, probe = healthcheck(runtime)
            probe = [sys.executable, *(on_host(a, volume, secret, port) for a in probe[1:])]

            def healthy() -> bool:
                assert proc.poll() is None, f"exited {proc.returncode}: {log.read_text()}"
                return subprocess.run(probe, capture_output=True, check=False).returncode == 0

            wait_until(healthy, "the image's HEALTHCHECK to pass")
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            ) as client:
                assert client.get("/readyz").status_code == 200, client.get("/readyz").text
                created = client.post("/sessions", json={})
                assert created.status_code == 200, created.text
                assert client.get("/sessions").json()[0]["id"] == created.json()["id"]
            # The tmpfs is the kernel's own /tmp, seen through its mount namespace.
            scratch = sorted(os.listdir(f"/proc/{proc.pid}/root/tmp"))
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
            try:
                code = proc.wait(timeout=STOP_DEADLINE)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        output = log.read_text()
        assert code == 0, output
        assert "Read-only file system" not in output and "Errno 30" not in output, output
        # Everything the kernel wrote is in its data directory; HOME (the volume) gained nothing
        # else and /tmp nothing at all.
        data = Path(env["FOYA_DATA_DIR"])
        assert [p.name for p in volume.iterdir()] == [data.name]
        assert (data / "foya.db").is_file()
        # (Beside the checkout's mount point, when the checkout lives under /tmp.)
        checkout = [REPO.relative_to("/tmp").parts[0]] if REPO.is_relative_to("/tmp") else []
        assert scratch == checkout, scratch
        assert subprocess.run(probe, capture_output=True, check=False).returncode != 0


def test_unshare_launcher_refuses_a_writable_root() -> None:
    """The launcher's own guard: with nothing remounted read-only it must not start anything."""
    with var_tmpdir() as root:
        volume = root / "volume"
        volume.mkdir()
        weakened = LAUNCHER.replace('mount("-o", "remount,bind,ro", point)', "pass")
        done = subprocess.run(
            [*UNSHARE, sys.executable, "-c", weakened, str(volume), str(REPO), "/bin/true"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert done.returncode != 0 and "still writable" in done.stderr, done
