"""Where a plugin or marketplace comes from, and fetching it with the `git` binary.

A source is a local directory, `owner/repo` (GitHub over HTTPS), `git@host:owner/repo`, an
`https://` URL without credentials, query or fragment, or (ours, for a repository on this host)
a `file://` URL. Anything else is refused before git runs.

Git runs as a subprocess in a session of its own, killed with its children after `TIMEOUT`
seconds or when the request is cancelled. It never runs code from what it fetches: clones are
shallow, take no template (so no hooks are copied in), run with `core.hooksPath=/dev/null`
(so no hook of the user's configuration runs either), never recurse into submodules, never
prompt for credentials, and leave Git LFS files as pointers.

A remote is someone else's say-so (a marketplace's entry names any URL), so before git runs its
host is resolved and checked by web_fetch's rule (`app.kernel.web.guard.resolve`: no private,
loopback, link-local or reserved address unless `FOYA_WEB_FETCH_ALLOW_HOSTS` allows it). Git
does its own networking, so what else can be bound is bound by configuration: for HTTPS, curl
is pinned to exactly the checked addresses (`http.curloptResolve`: a name that resolves
elsewhere a moment later changes nothing) and redirects are not followed
(`http.followRedirects=false`); only the https, ssh and file transports are allowed at all
(`protocol.allow=never`), so nothing downgrades to plain http or git://. For SSH the host is
checked but cannot be pinned (ssh resolves it again itself), and a proxy configured for git by
the user is the user's and is not overridden.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from app.kernel.plugins.models import Problem
from app.kernel.web.guard import AllowList, Blocked, resolve

TIMEOUT = 120.0
MAX_MESSAGE = 400
GITHUB_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SSH = re.compile(r"git@[A-Za-z0-9.-]+:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(?:\.git)?")
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
_COMMIT = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")
SAFE = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "submodule.recurse=false",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "protocol.allow=never",
    "-c", "protocol.https.allow=always",
    "-c", "protocol.ssh.allow=always",
    "-c", "protocol.file.allow=always",
    "-c", "http.followRedirects=false",
)  # fmt: skip


@dataclass(frozen=True)
class Source:
    """A parsed source: a local directory (its absolute path) or a URL git can clone."""

    kind: Literal["local", "git"]
    location: str
    label: str


def parse_source(raw: str) -> Source:
    """What `raw` names, or `Problem` saying which sources are accepted."""
    raw = raw.strip()
    if not raw:
        raise Problem("source is required")
    if "://" not in raw:
        path = os.path.abspath(os.path.expanduser(raw))
        if os.path.isdir(path):
            return Source("local", path, path)
    if GITHUB_REPO.fullmatch(raw) and not raw.startswith("."):
        return Source("git", f"https://github.com/{raw}.git", raw)
    if _SSH.fullmatch(raw):
        return Source("git", raw, raw)
    try:
        parts = urlsplit(raw)
        credentials = parts.username is not None or parts.password is not None
    except ValueError:
        parts, credentials = urlsplit(""), True
    plain = not credentials and not parts.query and not parts.fragment
    if plain and parts.scheme == "https" and parts.hostname:
        return Source("git", raw, raw)
    if plain and parts.scheme == "file" and parts.path.startswith("/") and not parts.netloc:
        return Source("git", raw, raw)
    if parts.scheme:
        raise Problem(
            "only credential-free HTTPS Git URLs, Git SSH URLs and file:// URLs are allowed"
        )
    raise Problem(
        "expected a local directory, owner/repo, an HTTPS or file:// Git URL, or a Git SSH URL"
    )


def check_revision(value: str, what: str = "Git ref") -> str:
    """`value` trimmed if it is a ref or commit git may be asked for (never an option)."""
    value = value.strip()
    ok = _REVISION.fullmatch(value) and ".." not in value and "//" not in value
    if value and not (ok and not value.endswith(("/", "."))):
        raise Problem(f"invalid {what}")
    return value


def is_commit(value: str) -> bool:
    return _COMMIT.fullmatch(value) is not None


async def clone(url: str, target: Path, revision: str = "", *, allow: AllowList) -> None:
    """A shallow checkout of `url` (at `revision`, a ref or commit, if given) in the new
    directory `target`; `Problem` before git runs when `url`'s host is one `allow` refuses."""
    pin = await remote_pin(url, allow)
    if not revision:
        await _git(*pin, "clone", "--depth", "1", "--no-recurse-submodules", "--template=", "--",
                   url, str(target))  # fmt: skip
        return
    await _git("init", "--quiet", "--template=", str(target))
    here = ("-C", str(target))
    await _git(*here, "remote", "add", "origin", url)
    await _git(*pin, *here, "fetch", "--depth", "1", "--no-recurse-submodules", "origin", revision)
    await _git(*here, "checkout", "--quiet", "--detach", "FETCH_HEAD")


async def remote_pin(url: str, allow: AllowList) -> tuple[str, ...]:
    """The git options that bind a fetch of `url` to its host's checked addresses (none for
    `file://` and SSH), or `Problem` when the host is refused or cannot be resolved."""
    ssh = _SSH.fullmatch(url)
    if ssh:
        host, port = url[4 : url.index(":")], 22
    else:
        parts = urlsplit(url)
        if parts.scheme == "file":
            return ()
        try:
            host, port = parts.hostname or "", parts.port or 443
        except ValueError:
            raise Problem("invalid Git URL") from None
        if parts.scheme != "https" or not host:
            raise Problem("only HTTPS, Git SSH and file:// Git URLs are fetched")
    try:
        found = await resolve(allow, host, port)
    except Blocked as exc:
        raise Problem(
            f"refused to fetch from {host}: {exc}; FOYA_WEB_FETCH_ALLOW_HOSTS can allow it"
        ) from None
    except OSError as exc:
        raise Problem(f"cannot resolve {host}: {exc.strerror or exc}") from None
    if ssh:
        return ()
    unique = dict.fromkeys(f"[{r.address}]" if ":" in r.address else r.address for r in found)
    addresses = ",".join(unique)
    return ("-c", f"http.curloptResolve={host}:{port}:{addresses}")


async def head(target: Path) -> str:
    """The commit checked out in `target`."""
    return await _git("-C", str(target), "rev-parse", "HEAD")


async def _git(*args: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1"}
    try:
        proc = await asyncio.create_subprocess_exec(
            "git", *SAFE, *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )  # fmt: skip
    except FileNotFoundError:
        raise Problem("git is not installed on the kernel's host") from None
    try:
        async with asyncio.timeout(TIMEOUT):
            out, _ = await proc.communicate()
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        if isinstance(exc, TimeoutError):
            raise Problem(f"git did not finish within {TIMEOUT:.0f} s") from None
        raise
    text = out.decode("utf-8", errors="replace").strip()
    if proc.returncode != 0:
        raise Problem(f"git: {text[-MAX_MESSAGE:] or f'exit status {proc.returncode}'}")
    return text
