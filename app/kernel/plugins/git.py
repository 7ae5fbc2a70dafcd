"""Where a plugin or marketplace comes from, and fetching it with the `git` binary.

A source is a local directory, `owner/repo` (GitHub over HTTPS), `git@host:owner/repo`, an
`https://` URL without credentials, query or fragment, or (ours, for a repository on this host)
a `file://` URL. Anything else is refused before git runs.

Git runs as a subprocess in a session of its own, killed with its children after `TIMEOUT`
seconds or when the request is cancelled. It never runs code from what it fetches: clones are
shallow, take no template (so no hooks are copied in), run with `core.hooksPath=/dev/null`
(so no hook of the user's configuration runs either), never recurse into submodules, never
prompt for credentials, and leave Git LFS files as pointers.
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


async def clone(url: str, target: Path, revision: str = "") -> None:
    """A shallow checkout of `url` (at `revision`, a ref or commit, if given) in the new
    directory `target`."""
    if not revision:
        await _git("clone", "--depth", "1", "--no-recurse-submodules", "--template=", "--",
                   url, str(target))  # fmt: skip
        return
    await _git("init", "--quiet", "--template=", str(target))
    here = ("-C", str(target))
    await _git(*here, "remote", "add", "origin", url)
    await _git(*here, "fetch", "--depth", "1", "--no-recurse-submodules", "origin", revision)
    await _git(*here, "checkout", "--quiet", "--detach", "FETCH_HEAD")


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
