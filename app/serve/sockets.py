"""The listening sockets of `foya serve`, bound by us before hypercorn is handed them.

A Unix socket lives in a 0700 directory with mode 0600 (no window in which others can reach
it: the umask is tightened around `bind`); a live socket at the path is refused, a stale one (a
killed kernel's, nobody accepting) replaced, and the file is removed on exit unless something
else took its place. A TCP listener resolves `host:port` (port 0 picks a free one, shown in the
log) with `TCP_NODELAY` on; plain HTTP on a non-loopback address is served with a warning.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from app.errors import ConfigError
from app.logs import get_logger
from app.settings import ServePlan

STALE_DIAL_SECONDS = 0.2


@dataclass
class Listener:
    """A bound, listening socket and what it takes to describe and clean it up."""

    sock: socket.socket
    address: str
    unix_path: Path | None = None
    unix_inode: tuple[int, int] | None = None

    def remove(self) -> None:
        """Unlink our Unix socket file, unless something else has replaced it meanwhile."""
        if self.unix_path is None:
            return
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(self.unix_path)
            if (st.st_dev, st.st_ino) == self.unix_inode:
                self.unix_path.unlink()


def open_unix(path: Path) -> Listener:
    """Bind the Unix socket: 0700 dir, refuse a live socket, replace a stale one."""
    if len(os.fsencode(path)) > 107:
        raise ConfigError(f"--socket (FOYA_SOCKET_PATH): path too long for a Unix socket: {path}")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise ConfigError(f"--socket {path}: something that is not a socket is there")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(STALE_DIAL_SECONDS)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            path.unlink()  # nobody listens: a stale socket left by a killed kernel
        except OSError as exc:
            raise ConfigError(f"--socket {path}: cannot probe it: {exc.strerror}") from exc
        else:
            raise ConfigError(f"--socket {path}: a kernel is already listening there")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # no window in which the socket is reachable by others
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--socket {path}: cannot listen: {exc.strerror}") from exc
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(1024)
    st = os.stat(path)
    return Listener(sock, f"unix:{path}", path, (st.st_dev, st.st_ino))


def open_tcp(plan: ServePlan) -> Listener:
    """Bind `host:port` (a port of 0 picks a free one; the log line shows the real port)."""
    try:
        infos = socket.getaddrinfo(
            plan.host, plan.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise ConfigError(f"--listen: cannot resolve {plan.host!r}: {exc.strerror}") from exc
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--listen {plan.host}:{plan.port}: {exc.strerror}") from exc
    sock.listen(1024)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    return Listener(sock, f"{'https' if plan.tls else 'http'}://{shown}:{port}")


def warn_if_exposed(plan: ServePlan, listener: Listener) -> None:
    """Log a warning when the token would cross the network in plain text."""
    if plan.tls or plan.socket_path is not None:
        return
    host = str(listener.sock.getsockname()[0]).partition("%")[0]
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).is_loopback:
            return
    get_logger().warning(
        "plaintext HTTP on a non-loopback address: the bearer token and every request cross "
        "the network unencrypted; serve behind a TLS proxy or give --tls-cert and --tls-key",
        address=listener.address,
    )
