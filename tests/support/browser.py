"""Debian's Chromium under Playwright (sync API) for the web client's end-to-end tests.

Nothing is downloaded: `Browser.running()` launches `/usr/bin/chromium` headless through
`executable_path` (never `playwright install`). One browser per test module; each test gets
fresh contexts (no shared storage, cookies or service worker) from `Browser.page`, at the
desktop viewport (1280x800) or the phone one (360x740, `is_mobile`, `has_touch`).

Every page watches itself (`Watch`): console messages of type error, uncaught page errors, and
Content-Security-Policy violations. The violations are caught by an init script listening to
`securitypolicyviolation` (capture phase, on the document): each is stored on
`window.__foyaCsp` and reported at once through an exposed binding, so a violation before a
navigation is not lost with its window. `Browser.page` asserts at the end of the `with` block
that the page saw none of them; a test that provokes an expected error (a cut connection logs
`net::ERR_…`) says so with `ui.watch.allow(pattern)`. A `confirm()` or `alert()` is accepted
(and its text kept in `ui.dialogs`).

Every wait is bounded: the contexts' default timeout is `DEADLINE`, and `wait_for` polls a
predicate until a deadline. No assertion is made on how long anything took.

`CutProxy` is a TCP proxy between the browser and a kernel that a test can cut (every open
connection reset) and hold shut (new connections reset at once), to drop a stream mid-reply
on a real TCP connection.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Self

from playwright.sync_api import Browser as PwBrowser
from playwright.sync_api import (
    BrowserContext,
    ConsoleMessage,
    Dialog,
    Error,
    Locator,
    Playwright,
    expect,
    sync_playwright,
)

CHROMIUM = "/usr/bin/chromium"
DEADLINE = 15.0  # seconds: upper bound on any one wait on a page (never a timing assertion)
DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 800}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 360, "height": 740},
    "is_mobile": True,
    "has_touch": True,
    "device_scale_factor": 2,
}
TOUCH_MIN = 44.0  # CSS px, both sides of a main button

_CSP_SCRIPT = """
(() => {
  const seen = (window.__foyaCsp = window.__foyaCsp || []);
  document.addEventListener('securitypolicyviolation', (e) => {
    const v = {
      directive: e.violatedDirective, blocked: e.blockedURI, source: e.sourceFile,
      line: e.lineNumber, sample: e.sample, page: location.href,
    };
    seen.push(v);
    try { window.__foyaReportCsp(v); } catch (_) { /* binding not there: the list keeps it */ }
  }, true);
})();
"""


@dataclass
class Watch:
    """What a page did wrong: console errors, page errors, CSP violations."""

    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    csp: list[dict[str, Any]] = field(default_factory=list)
    allowed: list[re.Pattern[str]] = field(default_factory=list)

    def allow(self, pattern: str) -> None:
        """Console errors matching `pattern` (a regex, searched) are expected from now on."""
        self.allowed.append(re.compile(pattern))

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            where = message.location.get("url", "") if message.location else ""
            self.console.append(f"{message.text} ({where})")

    def on_csp(self, violation: dict[str, Any]) -> None:
        if violation not in self.csp:
            self.csp.append(violation)

    def problems(self) -> list[str]:
        out = [f"console error: {c}" for c in self.console if not self._allowed(c)]
        out += [f"page error: {e}" for e in self.errors]
        out += [f"CSP violation: {v}" for v in self.csp]
        return out

    def _allowed(self, text: str) -> bool:
        return any(p.search(text) for p in self.allowed)


class UiPage:
    """A page of the web client in a context of its own, with its watch."""

    def __init__(self, context: BrowserContext, base_url: str, watch: Watch) -> None:
        self.context = context
        self.base_url = base_url.rstrip("/")
        self.watch = watch
        self.page = context.new_page()
        self.page.on("console", watch.on_console)
        self.page.on("pageerror", lambda exc: watch.errors.append(str(exc)))
        self.dialogs: list[str] = []  # confirm()/alert() texts, each accepted
        self.page.on("dialog", self._accept)

    def _accept(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.accept()

    # -- navigation -----------------------------------------------------------------------------

    def open(self, hash: str = "#/") -> None:
        """Load the shell at `/ui/` with `hash`."""
        self.page.goto(f"{self.base_url}/ui/{hash}")

    def go(self, hash: str) -> None:
        """Route inside the loaded shell (no reload)."""
        self.page.evaluate("(h) => { location.hash = h; }", hash)

    def sign_in(self, token: str) -> None:
        """Load the shell if needed, paste `token` into the sign-in view and submit; returns
        once the sign-in view is gone and the shell shows its sessions."""
        if not self.page.url.startswith(f"{self.base_url}/ui/"):
            self.open()
        self.testid("token-input").fill(token)
        self.testid("signin-submit").click()
        expect(self.testid("token-input")).to_have_count(0)
        expect(self.testid("signin-error")).to_have_count(0)

    # -- finding things -------------------------------------------------------------------------

    def testid(self, name: str) -> Locator:
        return self.page.get_by_test_id(name)

    def messages(self, role: str | None = None) -> Locator:
        if role is None:
            return self.testid("message")
        return self.page.locator(f'[data-testid="message"][data-role="{role}"]')

    def last_text(self, role: str = "assistant") -> str:
        """innerText of the `message-text` of the last message with `role` ("" if none)."""
        text: str = self.page.evaluate(
            """(role) => {
                const all = document.querySelectorAll(
                    `[data-testid="message"][data-role="${role}"]`);
                const last = all[all.length - 1];
                const body = last && last.querySelector('[data-testid="message-text"]');
                return body ? body.innerText : '';
            }""",
            role,
        )
        return text

    def wait_for(
        self, predicate: Callable[[], bool], what: str, deadline: float = DEADLINE
    ) -> None:
        """Poll `predicate` (it may read the page) until it holds; fail naming `what`."""
        end = time.monotonic() + deadline
        while not predicate():
            if time.monotonic() > end:
                raise AssertionError(f"timed out after {deadline:g} s waiting for {what}")
            self.page.wait_for_timeout(50)

    # -- layout checks --------------------------------------------------------------------------

    def horizontal_overflow(self) -> int:
        """scrollWidth of the document minus the viewport's width (> 0: horizontal scroll)."""
        width: int = self.page.evaluate(
            "() => document.documentElement.scrollWidth - window.innerWidth"
        )
        return width

    def small_targets(self, *testids: str) -> list[str]:
        """Of the visible elements with these test ids, those smaller than 44x44 CSS px."""
        out = []
        for name in testids:
            for element in self.testid(name).all():
                if not element.is_visible():
                    continue
                box = element.bounding_box()
                if box and (box["width"] < TOUCH_MIN or box["height"] < TOUCH_MIN):
                    out.append(f"{name} {box['width']:.0f}x{box['height']:.0f}")
        return out

    # -- the watch ------------------------------------------------------------------------------

    def collect_csp(self) -> None:
        """Merge the violations stored on the current window (if it still has its script)."""
        with contextlib.suppress(Error):
            for v in self.page.evaluate("() => window.__foyaCsp || []"):
                self.watch.on_csp(v)

    def assert_clean(self) -> None:
        self.collect_csp()
        problems = self.watch.problems()
        assert not problems, "the page reported problems:\n" + "\n".join(problems)


def trusting(cert_pem: bytes) -> str:
    """The Chromium flag that trusts exactly this certificate's key (a self-signed one too).

    A context's `ignore_https_errors` is not enough for the service worker: Chromium refuses to
    register a worker whose script came over a certificate error ("An SSL certificate error
    occurred when fetching the script"), whatever the context ignores."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    key = x509.load_pem_x509_certificate(cert_pem).public_key()
    spki = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pin = base64.b64encode(hashlib.sha256(spki).digest()).decode()
    return f"--ignore-certificate-errors-spki-list={pin}"


class Browser:
    """One headless Chromium (Debian's) driven by Playwright; `page()` makes watched pages."""

    def __init__(self, playwright: Playwright, browser: PwBrowser) -> None:
        self.playwright = playwright
        self.browser = browser

    @classmethod
    @contextlib.contextmanager
    def running(cls, *args: str) -> Iterator[Self]:
        """Chromium for the duration of the block (extra command-line `args`)."""
        assert os.access(CHROMIUM, os.X_OK), (
            f"{CHROMIUM} is missing: install Debian's `chromium` package (.ci/run does)"
        )
        with sync_playwright() as playwright, cls._launched(playwright, args) as browser:
            yield browser

    @contextlib.contextmanager
    def sibling(self, *args: str) -> Iterator[Browser]:
        """A second Chromium with other command-line `args`, from the same Playwright (the
        sync API allows only one Playwright per thread)."""
        with self._launched(self.playwright, args) as browser:
            yield browser

    @classmethod
    @contextlib.contextmanager
    def _launched(cls, playwright: Playwright, args: tuple[str, ...]) -> Iterator[Self]:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--disable-dev-shm-usage", *args]
        )
        try:
            yield cls(playwright, browser)
        finally:
            browser.close()

    def context(self, *, phone: bool = False, **options: Any) -> BrowserContext:
        """A fresh context at the desktop (or phone) viewport, watched for CSP violations."""
        context = self.browser.new_context(**{**(PHONE if phone else DESKTOP), **options})
        context.set_default_timeout(DEADLINE * 1000)
        context.set_default_navigation_timeout(DEADLINE * 1000)
        return context

    @contextlib.contextmanager
    def page(
        self, base_url: str, *, phone: bool = False, check: bool = True, **options: Any
    ) -> Iterator[UiPage]:
        """A page of the client at `base_url` in a context of its own; at the end of the block
        (unless `check` is false or the block failed) asserts the page reported no console
        error, page error or CSP violation."""
        context = self.context(phone=phone, **options)
        watch = Watch()
        try:
            context.expose_binding("__foyaReportCsp", lambda _source, v: watch.on_csp(v))
            context.add_init_script(_CSP_SCRIPT)
            ui = UiPage(context, base_url, watch)
            yield ui
            if check:
                ui.assert_clean()
        finally:
            context.close()


# ------------------------------------------------------------------------------------- proxy


class _Pair:
    """One proxied connection: the browser's socket, the kernel's, and their two pumps."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.sockets = (client, upstream)
        self.cutting = False
        self.pumps = [
            threading.Thread(target=self._pump, args=(a, b), daemon=True)
            for a, b in ((client, upstream), (upstream, client))
        ]
        for pump in self.pumps:
            pump.start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        if not self.cutting:  # the peer ended: pass its end on
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def reset(self) -> None:
        """Reset both sides: SO_LINGER 0, wake the pumps (SHUT_RD sends nothing), close."""
        self.cutting = True
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.shutdown(socket.SHUT_RD)
        for pump in self.pumps:
            pump.join(2)
        for s in self.sockets:
            s.close()


class CutProxy:
    """A TCP proxy on 127.0.0.1 to `target_port`, one pair of pump threads per connection.

    `cut()` resets every open connection (SO_LINGER 0, so both ends see a reset, not a clean
    end); while `shut` is set, new connections are reset as soon as they are accepted.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.shut = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="cut-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    @contextlib.contextmanager
    def running(cls, target_port: int) -> Iterator[Self]:
        proxy = cls(target_port)
        proxy._thread.start()
        try:
            yield proxy
        finally:
            proxy.close()

    def cut(self) -> int:
        """Reset every open connection; how many there were."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.reset()
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.cut()
        self._thread.join(5)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.shut.is_set():
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._pairs.append(_Pair(client, upstream))


def _reset(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
