"""The web client's files (`app/ui/static`), served at `/ui/…`.

- `/ui` and `/ui/` answer `index.html`; `/` redirects (307) to `/ui/`. app.http.app sends these
  paths here, importing this module on the first of them (a start that serves no page imports
  and reads nothing); `BearerAuth` lets their GET and HEAD through without a token: the files
  hold no data, every API route still needs one.
- The files are read once, when this is built, into a table keyed by URL path. A request's path
  is looked up there and never joined to a file system path, so `..`, `%2e%2e` (the server
  decodes it before we see it), `//etc/passwd` and backslashes find nothing; symbolic links are
  never followed while reading (nor are dot-files read). A changed file is served after a
  restart.
- Each file has a strong ETag from its SHA-256 (its gzip form another one); `If-None-Match`
  answers 304. `index.html`, `sw.js`, the manifest, `shell.json` and the client's own modules
  are `no-cache` (revalidated on every use, so an upgrade shows at once); the pinned libraries
  under `vendor/` and the icons may be kept a day.
- Text types are gzipped when the request accepts gzip: each compressed once, when first asked
  for, and kept (and only where it saves bytes); `Vary: Accept-Encoding` on those.
- Every answer carries the client's strict CSP and `X-Frame-Options: DENY`; `Observe`
  (app.http.middleware) adds `X-Content-Type-Options` and `Referrer-Policy` to every response.
  `sw.js` carries `Service-Worker-Allowed: /ui/`.
- `/ui/shell.json` is made here: the files the service worker precaches (`in_shell`), each with
  its SHA-256, and a `version`, the hash of that list, naming the worker's cache. The list lives
  only here, so a changed file changes the version and the worker fetches the new shell.
- Errors have the API's shape: 404 `not_found`, 405 `method_not_allowed` (with `Allow`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from starlette.types import Receive, Scope, Send

from app.http.middleware import header

PREFIX = "/ui/"
SHELL = "shell.json"
CSP = (
    b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    b"connect-src 'self'; font-src 'self'; manifest-src 'self'; worker-src 'self'; "
    b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_SECURITY = ((b"content-security-policy", CSP), (b"x-frame-options", b"DENY"))
_TEXT = "; charset=utf-8"
TYPES = {
    ".html": "text/html" + _TEXT,
    ".js": "text/javascript" + _TEXT,
    ".mjs": "text/javascript" + _TEXT,
    ".css": "text/css" + _TEXT,
    ".json": "application/json",
    ".map": "application/json",
    ".webmanifest": "application/manifest+json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".txt": "text/plain" + _TEXT,
    "": "text/plain" + _TEXT,  # LICENSE and its kin
}
_COMPRESSIBLE = ("text/", "application/json", "application/manifest+json", "image/svg+xml")
_REVALIDATE = b"no-cache"
_KEEP_A_DAY = b"public, max-age=86400"
_KEPT = ("vendor/", "icons/")
_NO_FOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)


def content_type(path: str) -> str:
    """The Content-Type a file is served with, by its suffix."""
    name = path.rsplit("/", 1)[-1]
    suffix = name[name.rfind(".") :] if "." in name else ""
    return TYPES.get(suffix, "application/octet-stream")


def in_shell(path: str) -> bool:
    """Whether the service worker precaches the file at `path` (relative to `static/`): all a
    page loads, except the terminal's library (fetched with the terminal view), the worker and
    this list themselves, and what no page loads (licences, the vendor manifest)."""
    name = path.rsplit("/", 1)[-1]
    return not (
        path in ("sw.js", SHELL, "vendor/MANIFEST.json")
        or path.startswith("vendor/xterm/")
        or name.startswith("LICENSE")
    )


def read_tree(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` by its path relative to it (`js/main.js`); symbolic links
    (to files or directories) and dot-files are left out."""
    files: dict[str, bytes] = {}
    for top, dirs, names in os.walk(root):  # a linked directory is listed, never entered
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith("."):
                continue
            path = Path(top, name)
            try:
                fd = os.open(path, _NO_FOLLOW)  # a link (even one swapped in now) fails here
            except OSError:
                continue
            with os.fdopen(fd, "rb") as file:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    files[path.relative_to(root).as_posix()] = file.read()
    return files


def shell_document(files: dict[str, bytes]) -> bytes:
    """`/ui/shell.json`: `{"version", "files": [{"url", "sha256"}]}` for the files `in_shell`,
    `/ui/` (the page itself, `index.html`) first; the version is the list's own hash."""
    entries = [
        {"url": PREFIX + path, "sha256": hashlib.sha256(body).hexdigest()}
        for path, body in sorted(files.items())
        if in_shell(path)
    ]
    if (index := files.get("index.html")) is not None:
        entries.insert(0, {"url": PREFIX, "sha256": hashlib.sha256(index).hexdigest()})
    listing = json.dumps(entries, sort_keys=True).encode()
    version = hashlib.sha256(listing).hexdigest()[:16]
    return json.dumps({"version": version, "files": entries}, indent=1).encode() + b"\n"


def accepts_gzip(value: bytes | None) -> bool:
    """Whether an `Accept-Encoding` value accepts gzip (`gzip` or `*` with a q above 0)."""
    if not value:
        return False
    wildcard = False
    for item in value.lower().split(b","):
        coding, _, params = item.partition(b";")
        quality = 1.0
        for param in params.split(b";"):
            key, _, number = param.strip().partition(b"=")
            if key == b"q":
                try:
                    quality = float(number)
                except ValueError:
                    quality = 0.0
        coding = coding.strip()
        if coding in (b"gzip", b"x-gzip"):
            return quality > 0
        if coding == b"*":
            wildcard = quality > 0
    return wildcard


def _matches(value: bytes, tags: tuple[bytes, ...]) -> bool:
    """`If-None-Match` compares weakly (RFC 9110 §13.1.2): a `W/` prefix does not matter."""
    if value.strip() == b"*":
        return True
    return any(tag.strip().removeprefix(b"W/") in tags for tag in value.split(b","))


@dataclass
class Asset:
    """One file as served: its body, headers, ETags and (once asked for) its gzip form."""

    body: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    compressible: bool

    @cached_property
    def etag(self) -> bytes:
        return b'"' + hashlib.sha256(self.body).hexdigest()[:32].encode() + b'"'

    @cached_property
    def gzip_etag(self) -> bytes:
        return self.etag[:-1] + b'-gzip"'

    @cached_property
    def gzipped(self) -> bytes | None:
        """The gzip body (no timestamp: the same bytes each time), or None where it saves
        nothing or the type is not text."""
        if not self.compressible:
            return None
        packed = gzip.compress(self.body, compresslevel=9, mtime=0)
        return packed if len(packed) < len(self.body) else None


def asset(path: str, body: bytes) -> Asset:
    """`body` served as the file at `path` (relative to `static/`)."""
    kind = content_type(path)
    kept = path.startswith(_KEPT)
    headers = [
        (b"content-type", kind.encode()),
        (b"cache-control", _KEEP_A_DAY if kept else _REVALIDATE),
        *_SECURITY,
    ]
    if path == "sw.js":
        headers.append((b"service-worker-allowed", PREFIX.encode()))
    compressible = kind.startswith(_COMPRESSIBLE)
    if compressible:
        headers.append((b"vary", b"Accept-Encoding"))
    return Asset(body, tuple(headers), compressible)


@dataclass(frozen=True)
class _Route:
    """What `Observe` labels a request's metrics and log line with (`scope["route"].path`)."""

    path: str


_FILE_ROUTE = _Route(PREFIX + "{path}")
_ROOT_ROUTE = _Route("/")


class WebClient:
    """The ASGI app of `/`, `/ui` and `/ui/…`: the files of `root`, read when it is built."""

    def __init__(self, root: Path) -> None:
        files = read_tree(root)
        files[SHELL] = shell_document(files)
        self.assets = {PREFIX + path: asset(path, body) for path, body in files.items()}
        if (index := self.assets.get(PREFIX + "index.html")) is not None:
            self.assets["/ui"] = self.assets[PREFIX] = index

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        scope["route"] = _ROOT_ROUTE if path == "/" else _FILE_ROUTE
        reply = _Reply(send, head=scope["method"] == "HEAD")
        if scope["method"] not in ("GET", "HEAD"):
            await reply.error(405, "method_not_allowed", "method not allowed", b"GET, HEAD")
        elif path == "/":
            await reply(307, [(b"location", PREFIX.encode()), *_SECURITY], b"")
        elif (found := self.assets.get(path)) is None:
            await reply.error(404, "not_found", "not found")
        else:
            await _serve(scope, reply, found)


async def _serve(scope: Scope, reply: _Reply, found: Asset) -> None:
    body, etag = found.body, found.etag
    headers = list(found.headers)
    if found.gzipped is not None and accepts_gzip(header(scope, b"accept-encoding")):
        body, etag = found.gzipped, found.gzip_etag
        headers.append((b"content-encoding", b"gzip"))
    headers.append((b"etag", etag))
    condition = header(scope, b"if-none-match")
    if condition is not None and _matches(condition, (found.etag, found.gzip_etag)):
        # No Content-Encoding nor Content-Length: a 304 has no body.
        await reply(304, [(k, v) for k, v in headers if k != b"content-encoding"], None)
    else:
        await reply(200, headers, body)


@dataclass(frozen=True)
class _Reply:
    """Sends one response; for HEAD, its headers (Content-Length included) without the body."""

    send: Send
    head: bool

    async def __call__(
        self, status: int, headers: list[tuple[bytes, bytes]], body: bytes | None
    ) -> None:
        if body is not None:
            headers = [*headers, (b"content-length", str(len(body)).encode())]
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": b"" if self.head else body or b""})

    async def error(self, status: int, code: str, message: str, allow: bytes = b"") -> None:
        body = json.dumps({"code": code, "message": message}).encode()
        headers = [(b"content-type", b"application/json"), *_SECURITY]
        if allow:
            headers.append((b"allow", allow))
        await self(status, headers, body)
