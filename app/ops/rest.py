"""The thin REST client of a kernel: where it listens (`Target`), one JSON call at a time
(`Rest`), and one line saying why it gave no answer and what to do (`unreachable`).

Built on the standard library's `http.client`, not httpx: importing httpx costs ~90 ms here,
more than half of the 150 ms a command like `foya status` may take to start. `foya exec`
streams with httpx (app.ops.client) and shares `Target`, `kernel_error` and `unreachable`.

Errors, one class per outcome:
- `KernelError`: the kernel answered an error status with its `{"code", "message"}` body.
- `Unreachable`: no answer at all (refused, no socket, TLS failure, timeout, a bad --cacert);
  its message says what to try.

Exit codes every client shares: `OK` 0, `FAILED` 1 (the kernel answered an error),
`UNREACHABLE` 2 (no answer, or a wrong command line).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

OK, FAILED, UNREACHABLE = 0, 1, 2
TIMEOUT = 30.0
_HOSTNAME_MISMATCH = 62  # X509_V_ERR_HOSTNAME_MISMATCH


class KernelError(Exception):
    """The kernel answered with an error status and its `{"code", "message"}` body."""

    def __init__(self, status: int, code: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.body = status, code, message, body


class Unreachable(Exception):
    """No answer from the kernel; the message is one line saying why and what to do."""


def kernel_error(status: int, raw: bytes, reason: str) -> KernelError:
    """The `KernelError` for an error answer (a body that is not the kernel's shape included:
    a proxy's page, say)."""
    try:
        body = json.loads(raw)
        code, message = str(body["code"]), str(body["message"])
    except (ValueError, KeyError, TypeError):
        text = raw.decode(errors="replace").strip()[:200]
        return KernelError(status, "http_error", text or reason)
    return KernelError(status, code, message, body)


@dataclass(frozen=True)
class Target:
    """Where the kernel listens: a Unix socket, or a URL with an optional token and CA file."""

    socket: Path | None = None
    url: str | None = None
    token: str | None = None
    cacert: Path | None = None

    def where(self) -> str:
        return self.url if self.url else str(self.socket)

    def ssl_context(self) -> ssl.SSLContext:
        """A verifying client context: the system's CAs, or only `--cacert`."""
        try:
            return ssl.create_default_context(cafile=None if self.cacert is None else self.cacert)
        except (ssl.SSLError, OSError) as exc:
            raise Unreachable(f"--cacert: cannot load {self.cacert} ({exc})") from None

    def explain(self, error: KernelError) -> str:
        """`the kernel answered <status> <code>: <message>`, with a hint where one helps."""
        line = f"the kernel answered {error.status} {error.code}: {error.message}"
        if error.status == 401 and self.url is not None:
            line += "; pass --token-file FILE (or set FOYA_TOKEN) with the kernel's token"
        return line


def default_socket(data_dir: Path | None = None) -> Path:
    """The Unix socket `foya serve` listens on by default: FOYA_SOCKET_PATH, else
    `<data-dir>/kernel.sock` (`data_dir`, else FOYA_DATA_DIR, else `<user-config-dir>/foya`).

    The same rule as `app.settings.Settings.resolved_socket_path` (a test holds them equal),
    without loading pydantic-settings (~100 ms)."""
    if path := os.environ.get("FOYA_SOCKET_PATH"):
        return Path(path)
    if data_dir is None and (env := os.environ.get("FOYA_DATA_DIR")):
        data_dir = Path(env)
    if data_dir is None:
        import platformdirs

        data_dir = Path(platformdirs.user_config_dir()) / "foya"
    return data_dir / "kernel.sock"


def unreachable(target: Target, exc: BaseException, *, connecting: bool = True) -> str:
    """One line: why `target` gave no answer (`exc`, or what it wraps), and what to do."""
    where, cause = target.where(), _innermost(exc)
    if isinstance(cause, ssl.SSLCertVerificationError):
        reason = cause.verify_message or str(cause)
        if cause.verify_code == _HOSTNAME_MISMATCH:
            fix = "use a host name the certificate names"
        elif target.cacert is None:
            fix = "pass --cacert CERT (the server's certificate)"
        else:
            fix = f"--cacert {target.cacert} is not the certificate that server presents"
        return f"cannot verify the TLS certificate of {where} ({reason}); {fix}"
    if isinstance(cause, ssl.SSLError):
        reason = cause.reason or str(cause)
        return f"TLS with {where} failed ({reason}); for a plaintext port use http://"
    reason = _reason(cause)
    if isinstance(cause, TimeoutError):
        return f"no answer from the kernel at {where} within {TIMEOUT:g} s"
    if connecting:
        return f"cannot reach the kernel at {where} ({reason}); is `foya serve` running?"
    return f"lost the connection to the kernel at {where} ({reason})"


def _innermost(exc: BaseException) -> BaseException:
    """The exception at the root of `exc`: httpx raises its own from httpcore's, which httpcore
    raised while handling the ssl module's or the OS's (and re-raised `from None`)."""
    while (inner := exc.__cause__ or exc.__context__) is not None:
        exc = inner
    return exc


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the Host header says `foya`)."""

    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("foya", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(str(self.socket_path))
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class Rest:
    """JSON calls to one kernel over one kept-alive connection; `close()` it when done."""

    def __init__(self, target: Target, timeout: float = TIMEOUT) -> None:
        self.target = target
        self.prefix = ""
        self.headers = {"Accept": "application/json"}
        if target.token:
            self.headers["Authorization"] = f"Bearer {target.token}"
        self.conn: http.client.HTTPConnection
        if target.url is None:
            assert target.socket is not None
            self.conn = _UnixConnection(target.socket, timeout)
            return
        url = urlsplit(target.url)
        self.prefix = url.path.rstrip("/")
        if url.scheme == "https":
            context = target.ssl_context()
            self.conn = http.client.HTTPSConnection(
                url.hostname or "", url.port, timeout=timeout, context=context
            )
        else:
            self.conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None, **query: str) -> Any:
        """The decoded JSON answer (None for an empty one); raise `KernelError` for an error
        status and `Unreachable` without an answer."""
        url = self.prefix + quote(path)
        if query:
            url += "?" + "&".join(f"{k}={quote(v)}" for k, v in query.items())
        headers, data = dict(self.headers), None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            if self.conn.sock is None:
                self.conn.connect()
        except OSError as exc:
            self.conn.close()
            raise Unreachable(unreachable(self.target, exc)) from None
        try:
            self.conn.request(method, url, body=data, headers=headers)
            response = self.conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            raise Unreachable(unreachable(self.target, exc, connecting=False)) from None
        if response.status >= 400:
            raise kernel_error(response.status, raw, response.reason)
        try:
            return json.loads(raw) if raw else None
        except ValueError:  # not the kernel: a proxy's page, say
            text = raw.decode(errors="replace").strip()[:100]
            raise KernelError(response.status, "http_error", f"not JSON: {text!r}") from None

    def close(self) -> None:
        self.conn.close()
