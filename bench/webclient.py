"""Web client benchmark: the shell's first load, a 10,000-message session, 20,000 deltas, in
Debian's Chromium (Playwright, `executable_path=/usr/bin/chromium`, headless) against a real
`foya serve --listen 127.0.0.1:PORT --allow-plaintext` with a bearer token.

Run from the repository root:

    .venv/bin/python -m bench.webclient               # 3 rounds: table on stdout
    .venv/bin/python -m bench.webclient --json        # the same results as JSON on stdout
    .venv/bin/python -m bench.webclient --quick       # 1 long-session round, 3 stream ones (~25 s)
    .venv/bin/python -m bench.webclient --screenshots # docs/images/ui-*.png, then exit

The kernel's data dir is seeded before it starts, with the real store (as bench.context does):
a connection to the tests' fake provider (tests/support/fake_provider.py, in this process) and
one session of 10,000 stored messages (user and assistant in turn, ~150 bytes of plain text
each). Each part runs in a browser context of its own (no HTTP cache, no service worker yet).

1. First load. A fresh desktop context loads `/ui/`; at the `load` event the page's own
   Resource Timing (navigation entry plus resource entries under /ui/) gives the bytes on the
   wire (`transferSize`: compressed bodies plus headers) and the decoded bytes. Target (the
   issue's): <= 150 KB transferred. The decoded size is the baseline (ratio = compression).
   Also shown: the same after the network is idle (lazy modules), the API bytes the sign-in view
   fetched, and the sum of the gzip bodies the server answers for every file `/ui/shell.json`
   lists (what the service worker precaches; the terminal's library excluded).
2. Open a 10,000-message session. Signed in on the sessions list, the page routes to
   `#/s/<id>`; a requestAnimationFrame loop started just before looks for the last message's
   text in the last `[data-testid=message]` and stops at the frame after it appears (the frame
   that paints it). Reported: that time (ms, from the route change), whether the message is in
   the viewport then (the view opens at its end), how many messages the page fetched from
   `/sessions/{id}/history` until then (every response's JSON length summed) and how many it
   rendered. Targets (ours): <= 1,000 ms, and a page of messages (<= 500), not 10,000.
   Baseline: in the same page, a bare `fetch` of the whole history and its `json()`.
3. 20,000 deltas. The fake streams 20,000 content deltas of 6 characters ("00000 " ...), each
   frame encoded once and sent by itself; it notes the wall-clock time it sent the frames of
   deltas 5,000, 10,000 and 19,999 (marks). UI side: the chat view of a fresh session is open
   and subscribed (its events response has arrived); the turn is posted over the API; a
   requestAnimationFrame loop notes (Date.now()) when each mark's text is in the last
   assistant message. Lag = on screen - sent. Long tasks (PerformanceObserver `longtask`,
   registered before the page loads) that started during the turn are counted, with the
   longest and the total blocking time (the part of each beyond 50 ms). Baseline: the same
   stream read by a bare fetch loop (`getReader`, `TextDecoder`, a scan for each mark) in a
   plain page of the same origin (`/healthz`, no client code): its lag for the same marks.
   The lag includes the kernel's own backlog (the fake's writes land in socket buffers while
   the kernel still works through earlier frames), which the baseline shares: the target
   (ours) is on the difference, the UI at most 100 ms (a few frames) behind the bare reader at
   the last delta; longest task <= 200 ms. Deltas are lossy in the kernel (a full subscriber
   buffer drops them; the assistant `message_end` carries the whole text): the broker's
   dropped-delta counter over each run is shown.

Sides alternate (UI first in odd rounds, baseline first in even ones), after one uncounted
warm-up run of each; figures are medians over rounds. With 2 cores or more the browser runs on
core 0 and the kernel, the fake and this process on core 1, as a phone and a server are two
machines: otherwise the page's rendering slows the kernel that feeds both sides, and the lag
measures the contention more than the page. Console errors, page errors and CSP
violations the pages reported are counted in the details. Traffic goes only to 127.0.0.1; the
kernel is stopped by PID (SIGTERM, then SIGKILL), the browser by Playwright. Nothing asserts on
a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import secrets
import signal
import socket
import statistics
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from app import events as k
from app.events import EventDraft, Message
from app.kernel.connections import Connections
from app.kernel.ids import new_id
from app.store import Store
from app.store import events as log
from app.store import sessions as rows
from bench.fakes import Chunk, FakeProvider, Script, answer, encode, garbage, usage
from bench.harness import ROOT, KernelProcess, Processes, say, workspace
from bench.report import Row, at_most, finish, python, text

# tests/ is not a package (see bench/fakes.py); appended, so it shadows nothing.
_TESTS = os.path.join(ROOT, "tests")
if _TESTS not in sys.path:
    sys.path.append(_TESTS)

from support.browser import Browser, UiPage  # noqa: E402
from support.fake_provider import call, reasoning, tools, wait  # noqa: E402
from support.fake_push import FakeBrowser  # noqa: E402

MODEL = "bench-ui"
MESSAGES = 10_000
DELTAS = 20_000
MARKS = (5_000, 10_000, DELTAS - 1)
SHELL_TARGET_KB = 150.0
OPEN_TARGET_MS = 1_000.0
PAGE_TARGET = 500
LAG_TARGET_MS = 100.0  # on screen at most this long after a bare reader has it
LONGTASK_TARGET_MS = 200.0
WAIT_MS = 60_000  # any one wait inside a page
IMAGES = Path(ROOT) / "docs" / "images"
LAST_TEXT = "This is the last message of the long session"


def delta_text(i: int) -> str:
    return f"{i % 100_000:05d} "


# ------------------------------------------------------------------------------- the world


class TimedFake(FakeProvider):
    """The fake provider, noting the wall-clock time (s) at which each marked frame went out."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: dict[bytes, str] = {}
        self.sent_at: dict[str, float] = {}

    async def _stream(self, model: str, script: Script, send: Any, gone: asyncio.Event) -> None:
        async def timed(message: dict[str, Any]) -> None:
            await send(message)
            body = message.get("body", b"")
            if self.marks and body:
                for needle, name in self.marks.items():
                    if needle in body:
                        self.sent_at[name] = time.time()

        await super()._stream(model, script, timed, gone)


def stream_script(model: str) -> Script:
    """The 20,000-delta answer, each frame encoded once (the fake then only sends bytes)."""
    ident = "chatcmpl-webclient"
    chunks = [Chunk({"role": "assistant", "content": ""})]
    chunks += [Chunk({"content": delta_text(i)}) for i in range(DELTAS)]
    chunks.append(Chunk({}, "stop"))
    frames = [encode(c, ident, model) for c in chunks]
    frames.append(encode(usage(10, DELTAS), ident, model))
    return [garbage(f) for f in frames]


def long_messages(count: int) -> list[Message]:
    out: list[Message] = []
    for i in range(count):
        user = i % 2 == 0
        content = (
            f"Question {i // 2}: what does the module number {i % 97} do with the items?"
            if user
            else f"Answer {i // 2}: it reads the items, sorts them by key and writes them back "
            f"in batches of {i % 13 + 1}."
        )
        if i == count - 1:
            content = LAST_TEXT
        out.append(
            {
                "role": "user" if user else "assistant",
                "content": content,
                "created_at": "2025-01-01T00:00:00.000000Z",
            }
        )
    return out


async def seed(data_dir: Path, base_url: str, messages: int) -> dict[str, str]:
    """A connection to the fake and one session of `messages` stored messages."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    connections = Connections(data_dir)
    connections.load()
    connection = await connections.create(
        {"name": "fake", "base_url": base_url, "api_key": "bench", "models": [MODEL]}
    )
    sid, now = new_id(), time.time_ns()
    drafts = long_messages(messages)

    def fill(conn: Any) -> None:
        ws = data_dir / "workspaces" / sid
        ws.mkdir(parents=True, exist_ok=True, mode=0o700)
        rows.insert(
            conn,
            {
                "id": sid, "phase": "idle", "approval_mode": "full_access",
                "connection_id": connection["id"], "model": MODEL,
                "title": f"{messages:,} messages", "title_is_manual": 1,
                "workspace": str(ws), "created_at_ns": now, "updated_at_ns": now,
            },
        )  # fmt: skip
        for m in drafts:
            log.append(conn, EventDraft(sid, k.MESSAGE_END, m))

    store = Store(data_dir)
    await asyncio.to_thread(store.open)
    try:
        await store.db.write(fill)
    finally:
        await asyncio.to_thread(store.close)
    return {"connection": str(connection["id"]), "session": sid}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class World:
    """The fake, the kernel (token auth, plaintext on 127.0.0.1) and its API client."""

    def __init__(
        self, procs: Processes, work: str, fake: TimedFake, messages: int, cpu: int | None = None
    ) -> None:
        self.token = secrets.token_urlsafe(32)
        digest = hashlib.sha256(self.token.encode()).hexdigest()
        data_dir = Path(work) / "data"
        started = time.perf_counter()
        # A thread of its own: Playwright's sync API keeps an event loop running in this one.
        with ThreadPoolExecutor(1) as pool:
            self.seeded = pool.submit(asyncio.run, seed(data_dir, fake.base_url, messages)).result()
        self.seed_s = round(time.perf_counter() - started, 2)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.kernel = KernelProcess(
            procs, work, "webclient", data_dir=str(data_dir), listen=f"127.0.0.1:{port}",
            env={"FOYA_AUTH_TOKEN_SHA256": digest}, cpu=cpu,
        )  # fmt: skip
        self.kernel.http.headers["Authorization"] = f"Bearer {self.token}"
        self.fake = fake
        self.data_dir = data_dir

    @property
    def connection(self) -> str:
        return self.seeded["connection"]

    def session(self, title: str, model: str = MODEL, mode: str = "full_access") -> str:
        body = {"connection_id": self.connection, "model": model, "approval_mode": mode}
        sid = str(self.kernel.post("/sessions", body)["id"])
        patched = self.kernel.http.patch(f"/sessions/{sid}", json={"title": title})
        patched.raise_for_status()
        return sid

    def phase(self, sid: str) -> str:
        listed = self.kernel.http.get("/sessions").json()
        return str(next(s for s in listed if s["id"] == sid)["phase"])

    def turn(self, sid: str, message: str, wait_idle: bool = True) -> None:
        self.kernel.post(f"/sessions/{sid}/turns", {"message": message})
        if wait_idle:
            self.wait_idle(sid)

    def wait_idle(self, sid: str) -> None:
        deadline = time.monotonic() + WAIT_MS / 1000
        time.sleep(0.05)
        while self.phase(sid) != "idle":
            if time.monotonic() > deadline:
                raise RuntimeError(f"session {sid} still busy")
            time.sleep(0.05)

    def dropped(self) -> float:
        return self.kernel.metric("foya_broker_dropped_deltas_total")


def sign_in(ui: UiPage, world: World) -> None:
    ui.open()
    ui.sign_in(world.token)


# -------------------------------------------------------------------------- 1. first load

_LOADED = """() => {
  const under = (u) => new URL(u).pathname.startsWith('/ui/');
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const shell = res.filter((e) => under(e.name));
  const api = res.filter((e) => !under(e.name));
  const sum = (list, key) => list.reduce((n, e) => n + (e[key] || 0), 0);
  return {
    transfer: nav.transferSize + sum(shell, 'transferSize'),
    decoded: nav.decodedBodySize + sum(shell, 'decodedBodySize'),
    files: 1 + shell.length,
    api_transfer: sum(api, 'transferSize'),
    api_requests: api.length,
    names: shell.map((e) => new URL(e.name).pathname),
  };
}"""


def first_load(browser: Browser, world: World) -> dict[str, Any]:
    with browser.page(world.url, check=False) as ui:
        ui.page.goto(f"{world.url}/ui/", wait_until="load")
        at_load = ui.page.evaluate(_LOADED)
        ui.page.wait_for_load_state("networkidle")
        idle = ui.page.evaluate(_LOADED)
        problems = ui.watch.problems()
    listed = httpx.get(f"{world.url}/ui/shell.json", timeout=10).json()
    precache = 0
    with httpx.Client(base_url=world.url, timeout=10) as client:
        for entry in listed["files"]:  # the bytes on the wire: gzip bodies where served so
            with client.stream("GET", entry["url"], headers={"Accept-Encoding": "gzip"}) as got:
                precache += sum(len(part) for part in got.iter_raw())
    return {"load": at_load, "idle": idle, "precache_bytes": precache,
            "precache_files": len(listed["files"]), "problems": problems}  # fmt: skip


# ---------------------------------------------------------------------- 2. a long session

_OPEN_AT_END = """({sid, marker, ms}) => new Promise((resolve, reject) => {
  const t0 = performance.now();
  const stop = setTimeout(() => reject(new Error('the last message never showed')), ms);
  const check = () => {
    const all = document.querySelectorAll('[data-testid="message"]');
    const last = all[all.length - 1];
    if (last && last.textContent.includes(marker)) {
      const box = last.getBoundingClientRect();
      const inView = box.bottom > 0 && box.top < innerHeight && box.height > 0;
      requestAnimationFrame(() => {
        clearTimeout(stop);
        resolve({ms: performance.now() - t0, in_view: inView, rendered: all.length});
      });
      return;
    }
    requestAnimationFrame(check);
  };
  location.hash = '#/s/' + sid;
  requestAnimationFrame(check);
})"""

_FETCH_ALL = """async ({sid, token}) => {
  const t0 = performance.now();
  const r = await fetch(`/sessions/${sid}/history`, {headers: {Authorization: 'Bearer ' + token}});
  const all = await r.json();
  return {ms: performance.now() - t0, messages: all.length};
}"""


def open_long(ui: UiPage, world: World) -> dict[str, Any]:
    sid = world.seeded["session"]
    sign_in(ui, world)
    fetched: list[Any] = []

    def seen(response: Any) -> None:
        if f"/sessions/{sid}/history" in response.url:
            fetched.append(response)

    ui.page.on("response", seen)
    args = {"sid": sid, "marker": LAST_TEXT, "ms": WAIT_MS}
    out: dict[str, Any] = ui.page.evaluate(_OPEN_AT_END, args)
    ui.page.remove_listener("response", seen)
    out["fetched"] = sum(len(r.json()) for r in fetched if r.ok)
    out["requests"] = [r.url.split("/history", 1)[1] or "(no query)" for r in fetched]
    return out


def long_session(browser: Browser, world: World, rounds: int) -> dict[str, Any]:
    ui_runs: list[dict[str, Any]] = []
    bare_runs: list[dict[str, Any]] = []
    problems: list[str] = []
    for r in range(rounds):
        order = ("ui", "bare") if r % 2 == 0 else ("bare", "ui")
        for side in order:
            with browser.page(world.url, check=False) as ui:
                if side == "ui":
                    ui_runs.append(open_long(ui, world))
                else:
                    sign_in(ui, world)
                    args = {"sid": world.seeded["session"], "token": world.token}
                    bare_runs.append(ui.page.evaluate(_FETCH_ALL, args))
                problems += ui.watch.problems()
        say(f"  long session round {r + 1}/{rounds}: {ui_runs[-1]['ms']:.0f} ms, "
            f"fetched {ui_runs[-1]['fetched']:,}")  # fmt: skip
    return {"ui": ui_runs, "bare": bare_runs, "problems": problems}


# ------------------------------------------------------------------------- 3. 20,000 deltas

_LONGTASKS = """
(() => {
  window.__foyaLong = [];
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        window.__foyaLong.push({start: performance.timeOrigin + e.startTime, ms: e.duration});
      }
    }).observe({type: 'longtask', buffered: true});
  } catch (_) { /* no longtask entries in this browser */ }
})();
"""

_WATCH_SCREEN = """({marks, ms}) => {
  window.__foyaSeen = new Promise((resolve, reject) => {
    const seen = {};
    const stop = setTimeout(() => reject(new Error('marks not on screen: ' +
        marks.filter((m) => !(m in seen)).join(','))), ms);
    const check = () => {
      const all = document.querySelectorAll('[data-testid="message"][data-role="assistant"]');
      const last = all[all.length - 1];
      const body = last && (last.querySelector('[data-testid="message-text"]') || last);
      const now = body ? body.textContent : '';
      const at = Date.now();
      for (const m of marks) if (!(m in seen) && now.includes(m)) seen[m] = at;
      if (marks.every((m) => m in seen)) { clearTimeout(stop); resolve(seen); return; }
      requestAnimationFrame(check);
    };
    requestAnimationFrame(check);
  });
  return true;
}"""

_BARE_READER = """({sid, token, marks, ms}) => new Promise((ready, fail) => {
  const late = new Promise((_, no) => setTimeout(() => no(new Error('bare reader: timeout')), ms));
  late.catch(fail);  // also fails the wait for the stream's first bytes
  const reading = (async () => {
    const seen = {};
    let deltas = 0, tail = '';
    const r = await fetch(`/sessions/${sid}/events`, {headers: {Authorization: 'Bearer ' + token}});
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let first = true;
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      if (first) { first = false; ready(true); }
      const buffer = tail + decoder.decode(value, {stream: true});
      const end = buffer.lastIndexOf('\\n\\n');
      const cut = end < 0 ? 0 : end + 2;  // only whole frames are scanned
      const frames = buffer.slice(0, cut);
      tail = buffer.slice(cut);
      const at = Date.now();
      // A delta's payload is `"05000 "`; in a message_end's content the number has a space
      // before it. Digits of seqs and times never follow a quote or a space.
      for (const m of marks) {
        if (!(m in seen) && (frames.includes(`"${m} `) || frames.includes(` ${m} `))) seen[m] = at;
      }
      deltas += frames.split('event: message_delta').length - 1;
      if (frames.includes('event: turn_complete')) break;
    }
    reader.cancel();
    return {seen, deltas};
  })();
  window.__foyaSeen = Promise.race([reading, late]);
})"""


def mark_names() -> list[str]:
    return [delta_text(i).strip() for i in MARKS]


def lags(sent: dict[str, float], seen: dict[str, float]) -> dict[str, float]:
    return {m: round(seen[m] - sent[m] * 1000, 1) for m in mark_names() if m in seen and m in sent}


def stream_once(browser: Browser, world: World, side: str) -> dict[str, Any]:
    fake = world.fake
    fake.sent_at.clear()
    fake.marks = {f'"{delta_text(i)}"'.encode(): delta_text(i).strip() for i in MARKS}
    sid = world.session(f"stream {side}")
    marks = mark_names()
    with browser.page(world.url, check=False) as ui:
        if side == "ui":
            ui.context.add_init_script(_LONGTASKS)
            subscribed: list[str] = []
            ui.page.on("response", lambda r: subscribed.append(r.url))
            sign_in(ui, world)
            ui.go(f"#/s/{sid}")
            ui.testid("composer-input").wait_for()
            ui.wait_for(lambda: any(f"/sessions/{sid}/events" in u for u in subscribed),
                        "the chat's event stream")  # fmt: skip
            ui.page.evaluate(_WATCH_SCREEN, {"marks": marks, "ms": WAIT_MS})
        else:
            ui.page.goto(f"{world.url}/healthz")
            args = {"sid": sid, "token": world.token, "marks": marks, "ms": WAIT_MS}
            ui.page.evaluate(_BARE_READER, args)
        fake.push(MODEL, stream_script(MODEL))
        dropped0 = world.dropped()
        started = time.time()
        world.turn(sid, f"stream {DELTAS} deltas", wait_idle=False)
        result = ui.page.evaluate("() => window.__foyaSeen")
        seen = result if side == "ui" else result["seen"]
        out: dict[str, Any] = {"lag_ms": lags(fake.sent_at, seen)}
        if side == "bare":
            out["deltas_received"] = result["deltas"]
        else:
            tasks = ui.page.evaluate("() => window.__foyaLong || []")
            during = [t["ms"] for t in tasks if t["start"] >= started * 1000]
            out["longtasks"] = len(during)
            out["longest_ms"] = round(max(during, default=0.0), 1)
            out["blocking_ms"] = round(sum(max(0.0, t - 50) for t in during), 1)
            out["problems"] = ui.watch.problems()
        world.wait_idle(sid)
        out["dropped"] = world.dropped() - dropped0
    return out


def stream(browser: Browser, world: World, rounds: int) -> dict[str, Any]:
    # One uncounted run of each side first: the first stream of a fresh kernel and browser
    # (cold caches, code not yet optimised) is the slowest by far, whichever side runs it.
    for side in ("ui", "bare"):
        stream_once(browser, world, side)
    runs: dict[str, list[dict[str, Any]]] = {"ui": [], "bare": []}
    for r in range(rounds):
        order = ("ui", "bare") if r % 2 == 0 else ("bare", "ui")
        for side in order:
            runs[side].append(stream_once(browser, world, side))
        last = mark_names()[-1]
        say(f"  stream round {r + 1}/{rounds}: lag ui {runs['ui'][-1]['lag_ms'].get(last)} ms, "
            f"bare {runs['bare'][-1]['lag_ms'].get(last)} ms")  # fmt: skip
    return runs


# ------------------------------------------------------------------------------------ report


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def table_rows(results: dict[str, Any]) -> list[Row]:
    load = results["first_load"]["load"]
    kb, raw_kb = load["transfer"] / 1024, load["decoded"] / 1024
    long = results["long_session"]
    open_ms = median([r["ms"] for r in long["ui"]])
    bare_ms = median([r["ms"] for r in long["bare"]])
    fetched = max(r["fetched"] for r in long["ui"])
    last = mark_names()[-1]
    st = results["stream"]
    ui_lag = median([r["lag_ms"].get(last, float("nan")) for r in st["ui"]])
    bare_lag = median([r["lag_ms"].get(last, float("nan")) for r in st["bare"]])
    longest = max(r["longest_ms"] for r in st["ui"])
    return [
        Row("shell first load, KB transferred (until load)", f"{kb:.1f}", f"{raw_kb:.1f} raw",
            f"{kb / raw_kb:.2f}x", f"<= {SHELL_TARGET_KB:g}", at_most(kb, SHELL_TARGET_KB)),
        Row(f"{MESSAGES:,}-message session: last message painted, ms", f"{open_ms:.0f}",
            f"{bare_ms:.0f} fetch all", f"{open_ms / bare_ms:.2f}x", f"<= {OPEN_TARGET_MS:g}",
            at_most(open_ms, OPEN_TARGET_MS)),
        Row(f"{MESSAGES:,}-message session: messages fetched", f"{fetched:,}",
            f"{MESSAGES:,}", f"{fetched / MESSAGES:.3f}x", f"<= {PAGE_TARGET}",
            at_most(fetched, PAGE_TARGET)),
        Row(f"{DELTAS:,} deltas: last delta sent -> on screen, ms", f"{ui_lag:.0f}",
            f"{bare_lag:.0f} bare fetch", f"{ui_lag - bare_lag:+.0f} ms",
            f"<= +{LAG_TARGET_MS:g} ms", at_most(ui_lag - bare_lag, LAG_TARGET_MS)),
        Row(f"{DELTAS:,} deltas: longest long task, ms", f"{longest:.0f}",
            target=f"<= {LONGTASK_TARGET_MS:g}", meets=at_most(longest, LONGTASK_TARGET_MS)),
    ]  # fmt: skip


def render(results: dict[str, Any]) -> str:
    fl = results["first_load"]
    long, st = results["long_session"], results["stream"]
    ui0 = long["ui"][0]
    problems = fl["problems"] + long["problems"] + [p for r in st["ui"] for p in r["problems"]]
    details = [
        f"first load: {fl['load']['files']} files until load, {fl['idle']['files']} at network "
        f"idle ({fl['idle']['transfer'] / 1024:.1f} KB); API before load: "
        f"{fl['load']['api_requests']} requests, {fl['load']['api_transfer']:,} B; service "
        f"worker precache: {fl['precache_files']} files, {fl['precache_bytes'] / 1024:.1f} KB "
        "gzip bodies",
        f"long session: last message in view {[r['in_view'] for r in long['ui']]}; rendered "
        f"{ui0['rendered']:,} messages; history requests {ui0['requests']}; bare fetch of all: "
        f"{long['bare'][0]['messages']:,} messages",
        "stream lag per mark (ms), ui: "
        + "; ".join(str(r["lag_ms"]) for r in st["ui"])
        + " | bare: "
        + "; ".join(str(r["lag_ms"]) for r in st["bare"]),
        f"stream: long tasks during the turn {[r['longtasks'] for r in st['ui']]}, total "
        f"blocking ms {[r['blocking_ms'] for r in st['ui']]}; deltas the bare reader got "
        f"{[r['deltas_received'] for r in st['bare']]} of {DELTAS:,}; broker dropped "
        f"(ui runs) {[r['dropped'] for r in st['ui']]}, "
        f"(bare) {[r['dropped'] for r in st['bare']]}",
        f"page problems (console/page errors, CSP): {len(problems)}"
        + (f" e.g. {problems[0][:200]}" if problems else ""),
        f"seeded {MESSAGES:,} messages in {results['seed_s']} s; chromium "
        f"{results['chromium']}; python {results['python']}; pinning: {results['pinning']}",
        "",
    ]
    title = ["Web client in Chromium: first load, a 10,000-message session, 20,000 deltas"]
    return text(title, table_rows(results), details)


# ------------------------------------------------------------------------------ screenshots


def screenshots(browser: Browser, world: World, out: Path) -> list[str]:
    """The main views as docs/images/ui-*.png (redone by `--screenshots`)."""
    out.mkdir(parents=True, exist_ok=True)
    made: list[str] = []

    def shot(ui: UiPage, name: str) -> None:
        ui.page.wait_for_timeout(300)  # let transitions settle; a picture, not a measurement
        path = out / f"ui-{name}.png"
        ui.page.screenshot(path=str(path))
        made.append(str(path.relative_to(ROOT)))

    fake = world.fake
    world.kernel.http.delete(f"/sessions/{world.seeded['session']}")  # the empty seeded one
    for title in ("Refactor the store writer", "Why is the SSE test flaky?", "Release notes"):
        sid = world.session(title, model=f"shot-{title[:6]}")
        fake.push(f"shot-{title[:6]}", answer(f"Notes on {title.lower()} follow"))
        world.turn(sid, title)
    chat_model = "shot-chat"
    chat = world.session("Count the Python files", model=chat_model)
    fake.push(
        chat_model,
        [reasoning("The user wants a count; find lists them. "), *tools(call(
            "c1", "bash", {"command": "find . -name '*.py' | wc -l"}), before="Let me count.")],
        answer("There are **42** Python files.\n\n- `app/`: 30\n- `tests/`: 12\n\n"
               "Run `find . -name '*.py'` to list them."),
    )  # fmt: skip
    world.turn(chat, "How many Python files are in this project?")
    approval_model = "shot-approve"
    appr = world.session("Clean the build directory", model=approval_model, mode="manual")
    fake.push(approval_model, tools(call("c2", "bash", {"command": "rm -rf build/"}),
                                    before="I will remove the build directory."))  # fmt: skip
    review_model = "shot-review"
    rev = world.session("Tidy the README", model=review_model)
    ws = world.data_dir / "workspaces" / rev
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "README.md").write_text("# Demo\n\nA demo project.\n\nRun it with make.\n")
    readme = "# Demo\n\nA small demo project.\n\n## Usage\n\nRun it with `make run`.\n"
    fake.push(review_model, tools(
        call("w1", "write", {"path": "README.md", "content": readme}),
        call("w2", "write", {"path": "CHANGES.md", "content": "## 0.2\n\n- README tidied\n"}),
    ), answer("The README is tidied and CHANGES.md started."))  # fmt: skip
    world.turn(rev, "Tidy the README and start a changelog")
    for label in ("Chrome on Android", "Firefox on Linux"):  # devices with push turned on
        sub = FakeBrowser().subscription(f"https://push.example/{label[:6]}", label=label)
        world.kernel.http.post("/push/subscriptions", json=sub).raise_for_status()

    with browser.page(world.url, check=False) as ui:
        ui.open()
        ui.testid("token-input").wait_for()
        shot(ui, "signin")
        ui.sign_in(world.token)
        ui.testid("session-list").wait_for()
        shot(ui, "sessions")
        ui.go(f"#/s/{chat}")
        ui.page.get_by_text("Python files.").first.wait_for()
        gate = fake.gate()
        fake.push(chat_model, [*answer("Streaming a second answer word by word")[:4], wait(gate),
                               *answer(" and the rest.")])  # fmt: skip
        ui.testid("composer-input").fill("And the tests?")
        ui.testid("composer-send").click()
        ui.wait_for(lambda: "second" in ui.last_text(), "the streamed words")
        shot(ui, "chat")
        gate.set()
        world.wait_idle(chat)
        ui.go(f"#/s/{appr}")
        ui.testid("composer-input").fill("Clean the build directory")
        ui.testid("composer-send").click()
        ui.testid("approval").wait_for()
        shot(ui, "approval")
        ui.testid("deny").click()
        ui.go(f"#/s/{rev}/review")
        ui.testid("review-file").first.wait_for()
        shot(ui, "review")
    with browser.page(world.url, phone=True, check=False) as ui:
        sign_in(ui, world)
        ui.testid("session-list").wait_for()
        shot(ui, "phone-sessions")
        ui.go(f"#/s/{chat}")
        ui.page.get_by_text("and the rest.").first.wait_for()
        shot(ui, "phone-chat")
        ui.go("#/settings")
        ui.testid("push-device").first.wait_for()
        ui.testid("push").scroll_into_view_if_needed()
        shot(ui, "phone-push")
    return made


# ------------------------------------------------------------------------------------- main


@contextlib.contextmanager
def browser_on(cpu: int | None) -> Iterator[Browser]:
    """Chromium (and Playwright's driver) started on `cpu`, which they keep; this thread goes
    back to its own cores once they are running."""
    with contextlib.ExitStack() as stack:
        mine = os.sched_getaffinity(0)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        try:
            browser = stack.enter_context(Browser.running())
        finally:
            os.sched_setaffinity(0, mine)
        yield browser


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--screenshots", action="store_true", help="write docs/images/ui-*.png")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    # The stream's lag is the noisiest figure on a loaded 2-core machine: 3 rounds even quick.
    stream_rounds = args.rounds or 3
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    results: dict[str, Any] = {"python": python(), "quick": args.quick, "cpus": os.cpu_count()}
    # A phone and a home server are two machines: with 2 cores or more the browser gets one of
    # its own and the server side (the kernel, the fake provider, this process) the other, so
    # the page's rendering and the stream it reads do not compete for one core.
    pin = (os.cpu_count() or 1) >= 2 and not args.screenshots
    if pin:
        os.sched_setaffinity(0, {1})  # this thread, and the fake's threads started from it
    results["pinning"] = "browser cpu 0; kernel, fake and bench cpu 1" if pin else "off"
    procs = Processes()
    with (
        workspace() as work,
        TimedFake.running() as fake,
        browser_on(0 if pin else None) as browser,
    ):
        fake.models = [MODEL]
        fake.keep_alive_timeout = 300
        world = World(procs, work, fake, 0 if args.screenshots else MESSAGES, 1 if pin else None)
        try:
            world.kernel.wait_ready()
            results["chromium"] = browser.browser.version
            if args.screenshots:
                for path in screenshots(browser, world, IMAGES):
                    say(f"wrote {path}")
                return 0
            results["seed_s"] = world.seed_s
            say("first load ...")
            results["first_load"] = first_load(browser, world)
            say(f"a {MESSAGES:,}-message session, {rounds} round(s) ...")
            results["long_session"] = long_session(browser, world, rounds)
            say(f"{DELTAS:,} deltas, {stream_rounds} round(s) per side ...")
            results["stream"] = stream(browser, world, stream_rounds)
            results["kernel_log_problems"] = world.kernel.log_problems()
        finally:
            world.kernel.close()
            procs.stop_all()
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
