"""The local half of `foya tunnel`: reach a kernel on another machine through `ssh -L`.

Each (re)connection runs one `ssh <dest> sh -c <script>` that starts the remote kernel on the
remote's loopback (`foya serve --listen 127.0.0.1:<port> --allow-plaintext`) unless something
already listens there, then opens `ssh -N -L 127.0.0.1:<local>:127.0.0.1:<port>` and polls
`GET /readyz` with the token through it. A 200 whose body says `ready` (not merely any 200: Caddy
answers an empty 200 to unknown hosts) is reported once per connection through
`on_ready`. When ssh exits, or the kernel stops answering, the tunnel reconnects with a capped
exponential backoff; the remote kernel is detached (nohup, setsid, stdin from /dev/null, output to
a log file) and outlives both ssh and this process.

Known limits:
- "Running" means "something listens on 127.0.0.1:<port>" (read from /proc/net/tcp, Linux). A
  running kernel is never restarted: a new foya binary or a new token digest on the remote takes
  effect only once that kernel has stopped; we track neither.
- The token only travels in the `Authorization` header of the probes: never in a process's
  arguments, never in a message. ssh itself never sees it.
- ssh runs with BatchMode=yes (a key or an agent; no password prompt) and without connection
  sharing (ControlPath=none). It runs in its own session, so a terminal's Ctrl-C reaches only us,
  and we always terminate it; a SIGKILL of this process leaves its current ssh child behind.

Exit codes: 0 stopped (`stop`, SIGINT, SIGTERM); 1 ssh failed or the kernel never became ready;
2 bad configuration (no ssh, local port taken, token rejected, remote foya or digest missing).

`stop_remote` (`foya tunnel --stop`) is the other way out: one ssh run of `remote.stop_script`,
which stops the kernel a tunnel started there. Exit codes: 0 stopped (or none was running),
1 ssh failed, 2 that PID is no kernel a tunnel started, or it did not stop.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, TextIO

import httpx

from app.ops.tunnel.config import TunnelConfig
from app.ops.tunnel.remote import start_script, stop_script
from app.ops.tunnel.ssh import last_line, refused, remote_sh, spawn, ssh_argv, terminate

OK, FAILED, CONFIG = 0, 1, 2
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 10.0
AUTH_FAILURES_MAX = 3  # consecutive ssh refusals after a drop before giving up
PROBE_TIMEOUT = httpx.Timeout(5.0)


class TunnelError(Exception):
    """A failure that ends the tunnel: a one-line message and an exit code."""

    def __init__(self, message: str, exit_code: int = FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class _Dropped(Exception):
    """The connection is gone (ssh exited, or the kernel stopped answering); retry may help."""

    def __init__(self, reason: str, refused: bool = False) -> None:
        super().__init__(reason)
        self.refused = refused  # ssh authentication or host key refused


class Tunnel:
    """One supervised tunnel. `run()` blocks until `stop` is set, a signal, or a fatal error."""

    def __init__(
        self,
        config: TunnelConfig,
        *,
        on_ready: Callable[[str], None],
        stop: threading.Event | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.config, self.on_ready = config, on_ready
        self.stop = stop if stop is not None else threading.Event()
        self.stderr = stderr if stderr is not None else sys.stderr
        self.local_port = config.local_port
        self._proc: subprocess.Popen[bytes] | None = None  # the current `ssh -N`
        self._errors: IO[bytes] | None = None  # its stderr

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    @property
    def ssh_pid(self) -> int | None:
        """PID of the current `ssh -N` process, if one runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def say(self, message: str) -> None:
        print(f"foya tunnel: {message}", file=self.stderr, flush=True)

    def run(self) -> int:
        """Connect, report readiness, reconnect on drops; the exit code (see module docstring)."""
        try:
            with _stop_on_signals(self.stop):
                self._check()
                self._supervise()
        except TunnelError as exc:
            self.say(str(exc))
            return exc.exit_code
        self.say("stopped")
        return OK

    def _check(self) -> None:
        c = self.config
        if shutil.which(c.ssh) is None:
            raise TunnelError(f"{c.ssh}: command not found", CONFIG)
        if not c.destination or c.destination.startswith("-"):
            raise TunnelError(f"bad ssh destination {c.destination!r}", CONFIG)
        if len(c.token) < 32 or not c.token.isprintable() or c.token.strip() != c.token:
            raise TunnelError("the token must be at least 32 printable characters", CONFIG)
        if not 0 < c.remote_port < 65536 or not 0 <= c.local_port < 65536:
            raise TunnelError("ports must be between 1 and 65535", CONFIG)
        with socket.socket() as s:  # ssh binds with SO_REUSEADDR too
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", c.local_port))
            except OSError as exc:
                raise TunnelError(f"local port {c.local_port}: {exc.strerror}", CONFIG) from None
            self.local_port = s.getsockname()[1]

    def _supervise(self) -> None:
        delay, refusals, ever_ready = BACKOFF_FIRST, 0, False
        headers = {"Authorization": f"Bearer {self.config.token}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=PROBE_TIMEOUT) as client:
            while not self.stop.is_set():
                try:
                    self._ensure_kernel()
                    with spawn(self._tunnel_argv(), stdout=subprocess.DEVNULL) as (proc, errors):
                        self._proc, self._errors = proc, errors
                        if not self._await_ready(client, first=not ever_ready):
                            return
                        ever_ready, delay, refusals = True, BACKOFF_FIRST, 0
                        self.on_ready(self.url)
                        self._watch(client)
                except _Dropped as exc:
                    if self.stop.is_set():
                        return
                    if not ever_ready:
                        raise TunnelError(str(exc)) from None
                    refusals = refusals + 1 if exc.refused else 0
                    if refusals >= AUTH_FAILURES_MAX:
                        raise TunnelError(f"{exc} ({refusals} times in a row)") from None
                    self.say(f"{exc}; reconnecting in {delay:g} s")
                if self.stop.wait(delay):
                    return
                delay = min(delay * 2, BACKOFF_MAX)

    def _ensure_kernel(self) -> None:
        argv = remote_sh(self.config, start_script(self.config))
        with spawn(argv, stdout=subprocess.PIPE) as (proc, errors):
            code = self._wait(proc, timeout=self.config.ready_timeout + 20)
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            err = last_line(errors)
        if code is None:
            raise _Dropped(f"ssh {self.config.destination}: no answer to the start command")
        if code == 255:
            raise _Dropped(f"ssh {self.config.destination}: {err}", refused(err))
        if code != 0:
            raise TunnelError(f"{self.config.destination}: {err}", CONFIG)
        if out.strip():
            self.say(out.strip().splitlines()[-1])

    def _tunnel_argv(self) -> list[str]:
        forward = f"127.0.0.1:{self.local_port}:127.0.0.1:{self.config.remote_port}"
        argv = ssh_argv(self.config, "-N", "-o", "ExitOnForwardFailure=yes", "-L", forward, "--")
        return [*argv, self.config.destination]

    def _await_ready(self, client: httpx.Client, *, first: bool) -> bool:
        """Poll /readyz until 200 (True) or `stop` (False); raise when ssh or the kernel fail."""
        deadline, last = time.monotonic() + self.config.ready_timeout, "no answer"
        while not self.stop.is_set():
            self._check_ssh()
            answer = self._probe(client)
            if answer == "ready":
                return True
            last = answer or "no answer"
            if time.monotonic() > deadline:
                msg = f"{self.config.destination}: /readyz not ready within "
                msg += f"{self.config.ready_timeout:g} s (last: {last}"
                msg += f"; ssh: {last_line(self._errors)})" if self._errors else ")"
                if first:
                    raise TunnelError(msg + "; see the kernel log on the remote")
                raise _Dropped(msg)
            self.stop.wait(0.1)
        return False

    def _watch(self, client: httpx.Client) -> None:
        """Return on `stop`; raise `_Dropped` when ssh exits or the kernel stops answering."""
        next_probe = time.monotonic() + self.config.health_interval
        while not self.stop.wait(0.1):
            self._check_ssh()
            if time.monotonic() >= next_probe:
                if self._probe(client) is None:
                    raise _Dropped("the kernel stopped answering")
                next_probe = time.monotonic() + self.config.health_interval

    def _probe(self, client: httpx.Client) -> str | None:
        """`ready`, or what /readyz answered instead; None without an HTTP answer."""
        try:
            response = client.get("/readyz")
        except httpx.TransportError:
            return None
        if response.status_code == 401:
            raise TunnelError(
                f"the kernel on {self.config.destination} rejected the token (401)", CONFIG
            )
        with contextlib.suppress(ValueError, AttributeError):
            if response.status_code == 200 and response.json().get("status") == "ready":
                return "ready"
        return f"HTTP {response.status_code}"  # 503 not ready yet, or another server there

    def _check_ssh(self) -> None:
        proc, errors = self._proc, self._errors
        if proc is None or errors is None or proc.poll() is None:
            return
        err = last_line(errors)
        if "Address already in use" in err or "local forwarding" in err:
            raise TunnelError(f"local port {self.local_port}: {err}", CONFIG)
        code = proc.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        raise _Dropped(f"tunnel closed (ssh {how}: {err})", refused(err))

    def _wait(self, proc: subprocess.Popen[bytes], timeout: float) -> int | None:
        end = time.monotonic() + timeout
        while proc.poll() is None:
            if time.monotonic() > end or self.stop.wait(0.05):
                terminate(proc)
                return None
        return proc.returncode


def run(
    config: TunnelConfig,
    *,
    on_ready: Callable[[str], None],
    stop: threading.Event | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run a tunnel until stopped; messages go to `stderr` as `foya tunnel: …` lines."""
    return Tunnel(config, on_ready=on_ready, stop=stop, stderr=stderr).run()


def stop_remote(
    config: TunnelConfig, *, on_done: Callable[[str], None], stderr: TextIO | None = None
) -> int:
    """Stop the kernel a tunnel started on `config.destination` (see the module docstring);
    `on_done` gets the remote's one-line report, failures go to `stderr`."""
    err = stderr if stderr is not None else sys.stderr
    if shutil.which(config.ssh) is None:
        print(f"foya tunnel: {config.ssh}: command not found", file=err, flush=True)
        return CONFIG
    with spawn(remote_sh(config, stop_script(config)), stdout=subprocess.PIPE) as (proc, errors):
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = None
        out = proc.stdout.read().decode(errors="replace").strip() if proc.stdout else ""
        message = last_line(errors)
    if code == 0:
        on_done(out.splitlines()[-1] if out else "stopped")
        return OK
    where = f"ssh {config.destination}" if code in (None, 255) else config.destination
    print(f"foya tunnel: {where}: {message}", file=err, flush=True)
    return FAILED if code in (None, 255) else CONFIG


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set `stop` while we run (signal handlers exist only in the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
