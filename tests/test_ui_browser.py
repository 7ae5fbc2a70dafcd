"""The web client end to end: Debian's Chromium (Playwright) against a real `foya serve`.

One kernel for the module listens on 127.0.0.1 with a bearer token and `--allow-plaintext`
(127.0.0.1 is a secure context, so the service worker registers); its connection points at the
fake OpenAI-compatible provider, and every session uses a model name of its own so scripts never
cross; one chat of 450 messages is stored before it starts (the paging test). The flows the
issue names run at the desktop and the phone viewport; at the phone one every view they pass
through is checked for sideways scrolling and 44 px touch targets. One test starts a second
kernel over real TLS (a self-signed certificate, its key trusted by that browser) and signs in
there. A drop mid-stream goes through a TCP
proxy the test cuts (`support.browser.CutProxy`): the browser's real connection is reset.

Every page is watched (support.browser): any console error, page error or CSP violation fails
the test that caused it. Every wait has a deadline; nothing is asserted about time. Replies are
plain words without markdown syntax, so a message's innerText equals its stored content.

The data-testid names are the client's own (`app/ui/static/js`); a renamed one fails here.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Locator, expect
from support.browser import PHONE, Browser, CutProxy, UiPage, trusting
from support.fake_provider import (
    FakeProvider,
    Script,
    answer,
    call,
    connect,
    finish,
    reply,
    split_words,
    text,
    tools,
    usage,
    wait,
)
from support.fake_push import FakeBrowser
from support.helpers import Kernel, Launcher, TlsFiles, base_env, wait_until
from support.streams_helpers import open_events, seed_store, session_row

from app.events import MESSAGE_END, EventDraft, Message
from app.store import Store

DEADLINE = 15.0
NEWCHAT_MODELS = ("ui-chat-desktop", "ui-chat-phone")
MAIN_BUTTONS = (
    "signin-submit",
    "new-chat",
    "newchat-create",
    "composer-send",
    "cancel-turn",
    "approve",
    "deny",
    "review-undo",
    "review-keep",
    "rewind-confirm",
    "push-on",
    "push-test",
    "question-answer",
    "queue-up",
    "queue-down",
    "queue-edit",
    "queue-dispatch",
    "queue-delete",
)
LONG_CHAT, LONG_COUNT = "seededlongchat0000000000", 450  # stored before the kernel starts
NET_ERRORS = r"net::ERR_"  # Chromium logs every request a cut connection failed


# ------------------------------------------------------------------------------------ the world


@dataclass
class World:
    """The module's kernel, its fake provider and an API client holding the token."""

    kernel: Kernel
    data_dir: Path
    fake: FakeProvider
    api: httpx.Client
    connection_id: str
    token: str

    @property
    def url(self) -> str:
        assert self.kernel.url is not None
        return self.kernel.url

    def session(self, approval_mode: str = "full_access", title: str = "ui test") -> Session:
        model = f"ui-{uuid.uuid4().hex[:10]}"
        body = {"connection_id": self.connection_id, "model": model, "approval_mode": approval_mode}
        made = self.api.post("/sessions", json=body)
        assert made.status_code == 200, made.text
        sid = made.json()["id"]
        titled = self.api.patch(f"/sessions/{sid}", json={"title": title})
        assert titled.status_code == 200, titled.text
        return Session(self, sid, model)

    def row(self, sid: str) -> dict[str, Any]:
        listed = self.api.get("/sessions")
        assert listed.status_code == 200, listed.text
        return next(s for s in listed.json() if s["id"] == sid)


@dataclass
class Session:
    world: World
    id: str
    model: str

    @property
    def workspace(self) -> Path:
        return self.world.data_dir / "workspaces" / self.id

    def push(self, *scripts: Script) -> None:
        self.world.fake.push(self.model, *scripts)

    def history(self) -> list[dict[str, Any]]:
        got = self.world.api.get(f"/sessions/{self.id}/history")
        assert got.status_code == 200, got.text
        return list(got.json())

    def idle(self) -> bool:
        return bool(self.world.row(self.id)["phase"] == "idle")

    def turn(self, message: str, *scripts: Script) -> None:
        """One turn through the API, waited for until the session is idle again."""
        self.push(*scripts)
        count = len(self.history())
        posted = self.world.api.post(f"/sessions/{self.id}/turns", json={"message": message})
        assert posted.status_code == 200, posted.text
        wait_until(lambda: len(self.history()) > count and self.idle(), "the turn to end")

    def last(self, role: str = "assistant") -> dict[str, Any]:
        return [m for m in self.history() if m["role"] == role][-1]


def long_text(i: int) -> str:
    return f"seeded message {i:04d}"


async def seed_long_chat(store: Store) -> None:
    await store.create_session(session_row(LONG_CHAT, model="seeded", title="A long chat"))
    for i in range(LONG_COUNT):
        m: Message = {"role": "assistant" if i % 2 else "user", "content": long_text(i)}
        await store.append(EventDraft(LONG_CHAT, MESSAGE_END, m))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, token: str, digest: str) -> Iterator[World]:
    base = tmp_path_factory.mktemp("ui")
    # In a thread: the module's browser (Playwright's sync API) may hold this thread's loop.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(seed_store, base / "data", seed_long_chat).result()
    launcher = Launcher(base / "procs")
    with FakeProvider.running() as fake:
        fake.models = [*NEWCHAT_MODELS]
        try:
            kernel = launcher.tcp(
                ["--allow-plaintext", "--data-dir", str(base / "data")],
                env=base_env(FOYA_AUTH_TOKEN_SHA256=digest),
            )
            with kernel.client(token) as api:
                connection = connect(api, fake, models=[*NEWCHAT_MODELS])
                yield World(kernel, base / "data", fake, api, connection["id"], token)
        finally:
            launcher.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser.running() as b:
        yield b


@pytest.fixture
def desktop(browser: Browser, world: World) -> Iterator[UiPage]:
    with browser.page(world.url) as ui:
        yield ui


@pytest.fixture(params=["desktop", "phone"])
def either(request: pytest.FixtureRequest, browser: Browser, world: World) -> Iterator[UiPage]:
    """A page at the desktop viewport, then (the test again) at the phone one."""
    with browser.page(world.url, phone=request.param == "phone") as ui:
        yield ui


def signed_in(ui: UiPage, world: World, hash: str = "#/") -> UiPage:
    ui.open()
    ui.sign_in(world.token)
    if hash != "#/":
        ui.go(hash)
    return ui


def open_chat(ui: UiPage, world: World, s: Session) -> None:
    signed_in(ui, world, f"#/s/{s.id}")
    expect(ui.testid("composer-input")).to_be_visible()


def choose(field: Locator, value: str) -> None:
    """Pick `value` in a select (by value, else by label) or type it into an input."""
    if field.evaluate("(e) => e.tagName") == "SELECT":
        try:
            field.select_option(value=value, timeout=2000)
        except Exception:
            field.select_option(label=value, timeout=2000)
    else:
        field.fill(value)


def send(ui: UiPage, message: str) -> None:
    ui.testid("composer-input").fill(message)
    ui.testid("composer-send").click()


def words(s: str) -> Script:
    return [text(w) for w in split_words(s) if w]


def on_phone(ui: UiPage) -> bool:
    size = ui.page.viewport_size
    return size is not None and size["width"] == PHONE["viewport"]["width"]


def layout_ok(ui: UiPage, where: str) -> None:
    """At the phone viewport: no horizontal scroll, main buttons at least 44x44 CSS px."""
    overflow = ui.horizontal_overflow()
    assert overflow <= 0, f"{where}: the page scrolls sideways by {overflow} px"
    small = ui.small_targets(*MAIN_BUTTONS)
    assert not small, f"{where}: touch targets under 44 px: {small}"


# ------------------------------------------------------------------------------------- sign-in


def test_sign_in_keeps_the_token_out_of_urls_and_sign_out_forgets_it(
    desktop: UiPage, world: World
) -> None:
    """A wrong token shows an error; the right one opens the shell, survives a reload, is sent
    only as a header (never in a URL); sign out forgets it and shows sign-in again."""
    ui = desktop
    ui.watch.allow(r"status of 401")  # the wrong token's answer, as Chromium logs it
    urls: list[str] = []
    ui.page.on("request", lambda r: urls.append(r.url))
    ui.open()
    ui.testid("token-input").fill("x" * 43)
    ui.testid("signin-submit").click()
    expect(ui.testid("signin-error")).to_be_visible()
    ui.sign_in(world.token)
    expect(ui.testid("session-list")).to_be_visible()
    assert ui.page.evaluate("() => localStorage.getItem('foya.token')") == world.token
    ui.page.reload()
    expect(ui.testid("session-list")).to_be_visible()
    expect(ui.testid("token-input")).to_have_count(0)
    ui.testid("signout").click()
    expect(ui.testid("token-input")).to_be_visible()
    assert ui.page.evaluate("() => localStorage.getItem('foya.token')") is None
    assert urls and not [u for u in urls if world.token in u], "the token appeared in a URL"


# ------------------------------------------------------------------------------- chat, stream


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_new_chat_then_a_streamed_reply(browser: Browser, world: World, viewport: str) -> None:
    """New chat with the chosen connection, model and approval mode; the reply shows while it
    streams (held half-way by the fake) and ends equal to the stored message. On the phone,
    every view has no horizontal scroll and 44 px touch targets."""
    phone = viewport == "phone"
    model = NEWCHAT_MODELS[phone]
    first = "Streaming has begun and these words arrive one by one"
    rest = "then the rest follows after the gate opens"
    if phone:  # a long unbroken word must wrap, not widen the page
        rest += " " + "x" * 120
    gate = world.fake.gate()
    world.fake.push(model, [*words(first + " "), wait(gate), *words(rest), finish(), usage()])
    world.fake.push_completion(model, reply("Streaming chat"))  # the background title
    with browser.page(world.url, phone=phone) as ui:
        signed_in(ui, world)
        expect(ui.testid("session-list")).to_be_visible()
        if phone:
            layout_ok(ui, "sessions list")
        ui.testid("new-chat").click()
        choose(ui.testid("newchat-connection"), world.connection_id)
        choose(ui.testid("newchat-model"), model)
        choose(ui.testid("newchat-approval"), "manual")
        if phone:
            layout_ok(ui, "new chat")
        ui.testid("newchat-create").click()
        ui.page.wait_for_url(re.compile(r"#/s/[^/]+$"))
        sid = urlsplit(ui.page.url).fragment.split("/")[2]
        row = world.row(sid)
        assert (row["connection_id"], row["model"], row["approval_mode"]) == (
            world.connection_id,
            model,
            "manual",
        )
        send(ui, "Tell me something")
        expect(ui.messages("user").last).to_contain_text("Tell me something")
        ui.wait_for(lambda: first in ui.last_text(), "the first half of the streamed reply")
        expect(ui.testid("cancel-turn")).to_be_visible()
        if phone:
            layout_ok(ui, "chat while a turn runs")
        gate.set()
        s = Session(world, sid, model)
        wait_until(s.idle, "the turn to end")
        stored = s.last()["content"]
        assert stored == f"{first} {rest}"
        ui.wait_for(lambda: ui.last_text().strip() == stored, "the whole reply on screen")
        expect(ui.testid("cancel-turn")).to_have_count(0)
        if phone:
            layout_ok(ui, "chat after the reply")


def test_a_long_code_block_streams_in_blocks_and_ends_as_code(
    desktop: UiPage, world: World
) -> None:
    """A reply that is one 30,000-character code block (longer than the client renders as
    markdown while it streams): while it streams the text on screen is exactly what arrived,
    kept in several few-KB blocks so each frame lays out only the last; once stored, it is one
    code block whose text equals the code."""
    s = world.session("full_access")
    code = "".join(f"line {i:05d} = compute({i})\n" for i in range(1200))  # 30,000 chars
    head, tail = code[: len(code) // 2], code[len(code) // 2 :]
    gate = world.fake.gate()
    fence, end = text("```python\n"), text("```")
    s.push([fence, text(head), wait(gate), text(tail), end, finish(), usage()])
    ui = desktop
    open_chat(ui, world, s)
    send(ui, "Write it all")
    live = '[data-testid="message"].is-live [data-testid="message-text"]'
    shown = f"() => document.querySelector('{live}')?.textContent"
    streamed = "```python\n" + head
    ui.wait_for(lambda: ui.page.evaluate(shown) == streamed, "the first half, exactly")
    blocks = ui.page.evaluate(f"() => document.querySelector('{live} .plain').children.length")
    assert blocks >= 2, blocks  # a sealed block of about 8 KB and the live one
    gate.set()
    wait_until(s.idle, "the turn to end")
    assert s.last()["content"] == f"```python\n{code}```"
    pre = ui.messages("assistant").last.locator("pre code")
    expect(pre).to_have_count(1)
    assert pre.inner_text() == code


# ----------------------------------------------------------------------------------- approval


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_a_tool_approval_from_the_page(browser: Browser, world: World, viewport: str) -> None:
    """Manual mode: the provider calls bash; the approval card shows; Approve runs the tool;
    its output and the final reply appear and the card goes."""
    s = world.session("manual")
    s.push(
        tools(call("c1", "bash", {"command": "echo approved-output"})),
        answer("The command printed its word"),
    )
    with browser.page(world.url, phone=viewport == "phone") as ui:
        open_chat(ui, world, s)
        send(ui, "Run the command")
        card = ui.testid("approval")
        expect(card).to_be_visible()
        expect(card).to_contain_text("echo approved-output")
        if viewport == "phone":
            layout_ok(ui, "approval")
        card.get_by_test_id("approve").click()
        tool = ui.page.locator('[data-testid="tool-call"][data-tool-call-id="c1"]')
        expect(tool).to_contain_text("approved-output")
        ui.wait_for(
            lambda: ui.last_text().strip() == "The command printed its word", "the final reply"
        )
        expect(ui.testid("approval")).to_have_count(0)
    wait_until(s.idle, "the turn to end")
    [result] = [m for m in s.history() if m["role"] == "tool"]
    assert "approved-output" in result["content"]


# ------------------------------------------------------------------- questions, queue, stop


def test_a_question_is_answered_from_the_page(either: UiPage, world: World) -> None:
    """`ask_user` with a choice and a free answer: the card shows both; the answers reach the
    tool's result and the turn goes on."""
    s = world.session("manual")
    scope = {
        "id": "scope",
        "question": "Which scope?",
        "options": [{"label": "small"}, {"label": "large"}],
    }
    notes = {"id": "notes", "question": "Any notes?", "allow_custom": True}
    s.push(
        tools(call("ask1", "ask_user", {"questions": [scope, notes]})), answer("Thanks for that")
    )
    ui = either
    open_chat(ui, world, s)
    send(ui, "Ask me first")
    card = ui.testid("question")
    expect(card).to_contain_text("Which scope?")
    expect(ui.testid("question-answer")).to_be_disabled()  # nothing answered yet
    if on_phone(ui):
        layout_ok(ui, "question")
    card.get_by_label("small").check()
    card.get_by_test_id("question-custom").last.fill("be brief")
    ui.testid("question-answer").click()
    ui.wait_for(lambda: ui.last_text().strip() == "Thanks for that", "the reply after the answer")
    expect(ui.testid("question")).to_have_count(0)
    wait_until(s.idle, "the turn to end")
    [result] = [m for m in s.history() if m["role"] == "tool"]
    assert "small" in result["content"] and "be brief" in result["content"], result


def test_the_queue_is_reordered_edited_and_dispatched(either: UiPage, world: World) -> None:
    """While a turn runs, two messages typed go to the queue; moved, edited, then one sent now:
    the running turn ends and the queue runs in its new order."""
    s = world.session("full_access")
    gate = world.fake.gate()
    s.push(
        [*words("Working on the first "), wait(gate), finish(), usage()],
        answer("Answer to the third"),
        answer("Answer to the second"),
    )
    ui = either
    open_chat(ui, world, s)
    send(ui, "first")
    ui.wait_for(lambda: "first" in ui.last_text(), "the first reply streaming")
    send(ui, "second")
    send(ui, "third")
    items = ui.testid("queue-item")
    expect(items).to_have_count(2)
    if on_phone(ui):
        layout_ok(ui, "queue")
    expect(items.nth(0)).to_contain_text("second")
    items.nth(0).get_by_test_id("queue-down").click()
    expect(items.nth(0)).to_contain_text("third")
    items.nth(0).get_by_test_id("queue-edit").click()
    ui.testid("queue-edit-input").fill("third, edited")
    ui.testid("queue-save").click()
    expect(items.nth(0)).to_contain_text("third, edited")
    queued = world.api.get(f"/sessions/{s.id}/queue").json()
    assert [q["text"] for q in sorted(queued, key=lambda q: q["position"])] == [
        "third, edited",
        "second",
    ]
    items.nth(0).get_by_test_id("queue-dispatch").click()
    wait_until(
        lambda: (
            [m["content"] for m in s.history() if m["role"] == "user"]
            == ["first", "third, edited", "second"]
            and s.idle()
        ),
        "the queue to run in its new order",
    )
    gate.set()
    expect(ui.testid("queue")).to_have_count(0)
    ui.wait_for(lambda: ui.last_text().strip() == "Answer to the second", "the last reply")


def test_stop_ends_the_running_turn(desktop: UiPage, world: World) -> None:
    """Stop while a reply streams: the turn ends, the Stop button goes, the words streamed so
    far stay stored and on screen."""
    s = world.session("full_access")
    gate = world.fake.gate()
    s.push([*words("Half a reply "), wait(gate), *words("never sent"), finish(), usage()])
    ui = desktop
    open_chat(ui, world, s)
    send(ui, "Start and be stopped")
    ui.wait_for(lambda: "reply" in ui.last_text(), "the streamed words")
    ui.testid("cancel-turn").click()
    wait_until(s.idle, "the turn to stop")
    gate.set()
    expect(ui.testid("cancel-turn")).to_have_count(0)
    expect(ui.testid("composer-send")).to_have_text("Send")
    assert "never sent" not in ui.last_text()
    assert [m["content"] for m in s.history() if m["role"] == "user"] == ["Start and be stopped"]


# ------------------------------------------------------------------------ fork, compaction


def test_fork_and_compaction_from_the_session_menu(desktop: UiPage, world: World) -> None:
    """Compact from the menu (the summary from the fake): the result shows and the kernel has
    a checkpoint; Fork opens a new chat holding a copy of the conversation."""
    s = world.session("full_access")
    s.turn("First question", answer("word " * 200))
    s.turn("Second question", answer("Second answer"))
    ui = desktop
    open_chat(ui, world, s)
    world.fake.push_completion(s.model, reply("## Goal\nShip it.\n## Progress\nDone."))
    ui.testid("session-menu-open").click()
    ui.testid("compact").click()
    expect(ui.testid("compact-result")).to_be_visible()
    replay = world.api.get(f"/sessions/{s.id}/history").json()
    assert [m["content"] for m in replay if m["role"] == "user"] == [
        "First question",
        "Second question",
    ]
    ui.testid("fork").click()
    ui.page.wait_for_url(re.compile(rf"#/s/(?!{s.id})[^/]+$"))
    fork = urlsplit(ui.page.url).fragment.split("/")[2]
    expect(ui.messages("assistant").last).to_contain_text("Second answer")
    copied = world.api.get(f"/sessions/{fork}/history").json()
    assert [m["content"] for m in copied] == [m["content"] for m in s.history()]


# ------------------------------------------------------------------------------------ projects


def test_a_project_is_added_and_trusted_from_settings(
    desktop: UiPage, world: World, tmp_path: Path
) -> None:
    """Settings: add a directory as a project; its trust card lists the hook its clone brought,
    untrusted; Trust makes it trusted in the kernel; Delete removes it, not its directory."""
    clone = tmp_path / "cloned-app"
    (clone / ".foya").mkdir(parents=True)
    hook = {"event": "UserPromptSubmit", "command": "echo from-the-clone"}
    (clone / ".foya" / "hooks.json").write_text(json.dumps([hook]))
    ui = signed_in(desktop, world, "#/settings")
    ui.testid("project-path").fill(str(clone))
    ui.testid("project-name").fill("Cloned app")
    ui.testid("project-add").click()
    item = ui.testid("project-item").filter(has_text="Cloned app")
    expect(item).to_contain_text("Not trusted")
    [made] = [p for p in world.api.get("/projects").json() if p["path"] == str(clone)]
    item.get_by_test_id("project-trust-open").click()
    card = item.get_by_test_id("project-trust")
    expect(card).to_contain_text("echo from-the-clone")
    expect(card).to_have_attribute("data-state", "untrusted")
    card.get_by_test_id("project-trust-grant").click()
    expect(card).to_have_attribute("data-state", "trusted")
    expect(item).to_contain_text("Trusted")
    assert world.api.get(f"/projects/{made['id']}/trust").json()["state"] == "trusted"
    item.get_by_test_id("project-delete").click()
    item.get_by_test_id("project-delete-confirm").click()
    expect(ui.testid("project-item").filter(has_text="Cloned app")).to_have_count(0)
    assert all(p["id"] != made["id"] for p in world.api.get("/projects").json())
    assert (clone / ".foya" / "hooks.json").exists()


# ------------------------------------------------------------------------------------ terminal


def test_a_terminal_runs_a_command_and_goes_on_from_the_phone(
    browser: Browser, desktop: UiPage, world: World
) -> None:
    """Open a terminal (xterm.js, loaded on demand), type a command: its output shows. A phone
    (another browser context: nothing shared but the kernel) opening the same chat's terminal
    attaches to that shell, sees its output and types into it; Close there ends it."""
    s = world.session("full_access")
    s.workspace.mkdir(parents=True, exist_ok=True)
    ui = signed_in(desktop, world, f"#/s/{s.id}/terminal")
    ui.testid("terminal-open").click()
    expect(ui.testid("terminal-status")).to_have_attribute("data-state", "running")
    ui.testid("terminal").click()
    ui.page.keyboard.type("echo $((6*7))-from-the-shell\n")
    rows = ui.testid("terminal").locator(".xterm-rows")
    expect(rows).to_contain_text("42-from-the-shell")
    ui.page.keyboard.type("printf '\\033[38;2;201;12;34mtruecolor\\033[0m\\n'\n")
    red = rows.locator("span", has_text="truecolor").last
    expect(red).to_have_css("color", "rgb(201, 12, 34)")  # 24-bit colour, under the CSP
    with browser.page(world.url, phone=True) as phone:
        signed_in(phone, world, f"#/s/{s.id}/terminal")
        expect(phone.testid("terminal-status")).to_have_attribute("data-state", "running")
        there = phone.testid("terminal").locator(".xterm-rows")
        expect(there).to_contain_text("42-from-the-shell")
        layout_ok(phone, "terminal")
        phone.testid("terminal").click()
        phone.page.keyboard.type("echo $((6*8))-from-the-phone\n")
        expect(rows).to_contain_text("48-from-the-phone")  # one shell, seen on both
        phone.testid("terminal-close").click()
        expect(phone.testid("terminal-status")).not_to_have_attribute("data-state", "running")
    listed = world.api.get(f"/sessions/{s.id}/terminals")
    assert listed.status_code == 200 and listed.json() == [], listed.text


def test_usage_at_the_phone_width(browser: Browser, world: World) -> None:
    """A chat's usage view shows its last request's tokens and the model's share; the range
    switches from 30 days to 7 (a bar per day); nothing scrolls sideways at 360 px."""
    s = world.session("full_access", title="Metered")
    s.turn("Count the tokens", answer("Counted.", prompt=1200, completion=34))
    with browser.page(world.url, phone=True) as ui:
        signed_in(ui, world, f"#/s/{s.id}/usage")
        expect(ui.testid("usage-session")).to_contain_text("1,234 tokens (1,200 in, 34 out")
        expect(ui.testid("usage-model").filter(has_text=s.model)).to_have_count(1)
        expect(ui.testid("usage-day")).to_have_count(30)  # the last 30 days, first
        layout_ok(ui, "usage")
        ui.testid("usage-range-7").click()
        expect(ui.testid("usage-range-7")).to_have_attribute("aria-pressed", "true")
        expect(ui.testid("usage-day")).to_have_count(7)
        layout_ok(ui, "usage over 7 days")


# ------------------------------------------------------------------------------- notifications

# The page's visibility is the test's to set (`window.__foyaHidden`); every notification the
# client shows, through the service worker or the constructor, is recorded.
_BACKGROUND = """
(() => {
  window.__foyaHidden = false;
  window.__foyaNotes = [];
  Object.defineProperty(Document.prototype, 'hidden', {
    configurable: true, get() { return window.__foyaHidden; } });
  Object.defineProperty(Document.prototype, 'visibilityState', {
    configurable: true, get() { return window.__foyaHidden ? 'hidden' : 'visible'; } });
  const note = (title, options) => window.__foyaNotes.push({title, body: (options || {}).body});
  const show = ServiceWorkerRegistration.prototype.showNotification;
  ServiceWorkerRegistration.prototype.showNotification = function (title, options) {
    note(title, options);
    return show.call(this, title, options);
  };
  const Original = window.Notification;
  window.Notification = class extends Original {
    constructor(title, options) { note(title, options); super(title, options); }
  };
})();
"""


def test_notifications_while_the_tab_is_in_the_background(browser: Browser, world: World) -> None:
    """With notifications allowed: an approval waiting and a finished turn each notify while
    the tab is hidden; nothing is shown while it is in view."""
    s = world.session("manual", title="Notify me")
    s.push(tools(call("n1", "bash", {"command": "echo notified"})), answer("All done here"))
    s.push(answer("Seen in view"))
    with browser.page(world.url, permissions=["notifications"]) as ui:
        ui.page.add_init_script(_BACKGROUND)
        open_chat(ui, world, s)
        ui.page.evaluate("() => { window.__foyaHidden = true; }")
        send(ui, "Run it while I am away")

        def notes() -> list[dict[str, Any]]:
            return list(ui.page.evaluate("() => window.__foyaNotes"))

        ui.wait_for(lambda: len(notes()) >= 1, "the approval's notification")
        assert "approval needed" in notes()[0]["title"], notes()
        assert "Notify me" in notes()[0]["title"]
        ui.testid("approval").get_by_test_id("approve").click()
        ui.wait_for(lambda: len(notes()) >= 2, "the finished turn's notification")
        assert notes()[1]["body"] == "The reply is ready", notes()
        wait_until(s.idle, "the turn to end")
        ui.page.evaluate("() => { window.__foyaHidden = false; }")
        send(ui, "Now I am looking")
        ui.wait_for(lambda: ui.last_text().strip() == "Seen in view", "the reply in view")
        wait_until(s.idle, "the second turn to end")
        assert len(notes()) == 2, notes()


_NOTES_SHOWN = """async () => {
  const reg = await navigator.serviceWorker.ready;
  return (await reg.getNotifications()).map((n) => ({title: n.title, body: n.body, tag: n.tag,
                                                    hash: n.data && n.data.hash}));
}"""


def test_push_devices_in_settings_and_a_pushed_message_shown_by_the_worker(
    browser: Browser, world: World
) -> None:
    """Settings (at the phone width) lists the devices subscribed to push (here one made
    through the API) and removes one; a push message delivered to the service worker (through
    Chromium's DevTools protocol, as a push service would) is shown as a notification while
    no tab is in view."""
    made = world.api.post(
        "/push/subscriptions",
        json=FakeBrowser().subscription("https://push.example/old", label="Old phone"),
    )
    assert made.status_code == 201, made.text
    with browser.page(world.url, phone=True, permissions=["notifications"]) as ui:
        signed_in(ui, world, "#/settings")
        device = ui.testid("push-device").filter(has_text="Old phone")
        expect(device).to_contain_text("https://push.example")
        expect(ui.testid("push-on")).to_be_visible()
        layout_ok(ui, "settings with a push device")
        device.get_by_role("button", name="Remove Old phone").click()
        expect(ui.testid("push-device")).to_have_count(0)
        assert world.api.get("/push").json()["subscriptions"] == []

        ui.page.evaluate(_SW_STATE, DEADLINE * 1000)  # the worker is active
        cdp = ui.context.new_cdp_session(ui.page)
        scopes: dict[str, str] = {}

        def updated(event: dict[str, Any]) -> None:
            for r in event["registrations"]:
                scopes[r["scopeURL"]] = r["registrationId"]

        cdp.on("ServiceWorker.workerRegistrationUpdated", updated)
        cdp.send("ServiceWorker.enable")
        ui.wait_for(lambda: f"{world.url}/ui/" in scopes, "the worker's registration")
        ui.page.goto("about:blank")  # no tab of ours in view: the worker shows it
        message = {
            "title": "Deploy: approval needed",
            "body": "bash wants to execute",
            "tag": "approval-1",
            "hash": "#/s/abc",
        }
        cdp.send(
            "ServiceWorker.deliverPushMessage",
            {
                "origin": world.url,
                "registrationId": scopes[f"{world.url}/ui/"],
                "data": json.dumps(message),
            },
        )
        ui.open("#/settings")
        shown: list[dict[str, Any]] = []

        def notified() -> bool:
            shown[:] = ui.page.evaluate(_NOTES_SHOWN)
            return bool(shown)

        ui.wait_for(notified, "the pushed notification")
        assert shown == [message], shown


# ------------------------------------------------------------------------------------- review


def test_file_review_undo_restores_the_files_on_disk(either: UiPage, world: World) -> None:
    """The agent overwrites one file and creates another; the review view lists both; Undo puts
    the first back byte for byte and removes the second."""
    s = world.session("full_access")
    s.workspace.mkdir(parents=True, exist_ok=True)
    (s.workspace / "notes.txt").write_text("before the agent\n")
    s.turn(
        "Change the files",
        tools(
            call("w1", "write", {"path": "notes.txt", "content": "after the agent\n"}),
            call("w2", "write", {"path": "added.txt", "content": "a new file\n"}),
        ),
        answer("Both files are written"),
    )
    assert (s.workspace / "notes.txt").read_text() == "after the agent\n"
    ui = signed_in(either, world, f"#/s/{s.id}/review")
    expect(ui.testid("review")).to_be_visible()
    files = ui.testid("review-file")
    expect(files).to_have_count(2)
    expect(ui.testid("review")).to_contain_text("notes.txt")
    expect(ui.testid("review")).to_contain_text("added.txt")
    if on_phone(ui):
        layout_ok(ui, "file review")
    ui.testid("review-undo").click()
    wait_until(lambda: not (s.workspace / "added.txt").exists(), "added.txt to be removed")
    assert (s.workspace / "notes.txt").read_text() == "before the agent\n"
    expect(files).to_have_count(0)
    pending = world.api.get(f"/sessions/{s.id}/file-review")
    assert pending.status_code == 200 and pending.json()["files"] == [], pending.text


# ------------------------------------------------------------------------------------- rewind


def test_rewind_previews_then_shortens_the_history(either: UiPage, world: World) -> None:
    """Rewind from the second user message: a preview first, then Confirm; the history (and
    the page) keep only the first exchange."""
    s = world.session("full_access")
    s.turn("First question", answer("First answer"))
    s.turn("Second question", answer("Second answer"))
    ui = either
    open_chat(ui, world, s)
    expect(ui.messages("user")).to_have_count(2)
    expect(ui.messages("assistant")).to_have_count(2)
    second = ui.messages("user").nth(1)
    expect(second).to_contain_text("Second question")
    second.hover()
    second.get_by_test_id("rewind").click()
    expect(ui.testid("rewind-preview")).to_be_visible()
    expect(ui.testid("rewind-confirm")).to_be_visible()  # shown once the preview is in
    if on_phone(ui):
        layout_ok(ui, "rewind preview")
    assert len(s.history()) == 4, "the preview changed the history"
    ui.testid("rewind-confirm").click()
    wait_until(lambda: len(s.history()) == 2, "the history to be rewound")
    assert [m["content"] for m in s.history()] == ["First question", "First answer"]
    expect(ui.messages("user")).to_have_count(1)
    expect(ui.messages("assistant")).to_have_count(1)
    expect(ui.page.get_by_text("Second answer")).to_have_count(0)


# --------------------------------------------------------------------------------- long chat

_TEXTS = """() => [...document.querySelectorAll(
  '[data-testid="message"] [data-testid="message-text"]')].map((e) => e.innerText.trim())"""


def test_a_long_chat_opens_at_its_end_and_pages_back_to_its_start(
    desktop: UiPage, world: World
) -> None:
    """A chat of 450 stored messages: it opens showing its last message, having fetched one
    page, not the whole history; "Older messages" pages back until the first; the page then
    holds every message once, in order."""
    fetched: list[int] = []
    ui = desktop
    ui.page.on(
        "response",
        lambda r: fetched.append(len(r.json())) if "/history" in r.url and r.ok else None,
    )
    signed_in(ui, world, f"#/s/{LONG_CHAT}")
    last = ui.messages().last
    expect(last).to_contain_text(long_text(LONG_COUNT - 1))
    expect(last).to_be_in_viewport()
    shown = ui.page.evaluate(_TEXTS)
    assert len(shown) < LONG_COUNT and fetched and sum(fetched) < LONG_COUNT, (len(shown), fetched)
    for _ in range(LONG_COUNT // 50):  # pages of 100 shown, 200 fetched: far fewer clicks
        if ui.testid("older").count() == 0:
            break
        ui.testid("older").click()
        before = len(shown)
        ui.wait_for(lambda: len(ui.page.evaluate(_TEXTS)) > before, "older messages")  # noqa: B023
        shown = ui.page.evaluate(_TEXTS)
    assert shown == [long_text(i) for i in range(LONG_COUNT)]
    assert ui.testid("older").count() == 0


# ----------------------------------------------------------------------------------- the drop


@pytest.mark.parametrize("viewport", ["desktop", "phone"])
def test_a_cut_connection_resumes_to_exactly_the_stored_text(
    browser: Browser, world: World, viewport: str
) -> None:
    """While a reply streams, the browser's TCP connections are reset and held shut: the page
    shows `reconnecting`; the words streamed meanwhile are lost to it; once it is back (with
    Last-Event-ID and the partial-message snapshot) the text on screen equals the stored
    message, no word lost or doubled."""
    s = world.session("full_access")
    before, during, after = (
        "Alpha bravo charlie delta echo",
        "foxtrot golf hotel india",
        "juliet kilo lima mike november.",
    )
    held, resumed = world.fake.gate(), world.fake.gate()
    s.push(
        [
            *words(before + " "),
            wait(held),
            *words(during + " "),
            wait(resumed),
            *words(after),
            finish(),
            usage(),
        ]
    )
    with (
        CutProxy.running(world.kernel.port or 0) as proxy,
        browser.page(proxy.url, phone=viewport == "phone") as ui,
        open_events(world.api, s.id) as direct,  # this test's own view of what was streamed
    ):
        ui.watch.allow(NET_ERRORS)
        open_chat(ui, world, s)
        send(ui, "Spell the alphabet")
        ui.wait_for(lambda: "echo" in ui.last_text(), "the first words on screen")
        proxy.shut.set()
        assert proxy.cut() >= 1
        expect(ui.testid("reconnecting")).to_be_visible()
        held.set()  # these words go out while the page is cut off
        end = time.monotonic() + DEADLINE
        seen = ""
        while "india" not in seen:
            frame = direct.next_frame(end)
            assert frame is not None, "the direct stream ended"
            if frame.event == "message_delta":
                seen += str(frame.data["payload"])
        assert "india" not in ui.last_text()
        proxy.shut.clear()
        expect(ui.testid("reconnecting")).to_have_count(0)
        ui.wait_for(lambda: "india" in ui.last_text(), "the snapshot's words after reconnecting")
        resumed.set()
        wait_until(s.idle, "the turn to end")
        stored = s.last()["content"]
        assert stored == f"{before} {during} {after}"
        ui.wait_for(lambda: ui.last_text().strip() == stored, "the stored text on screen")
        texts = ui.page.evaluate(
            """() => [...document.querySelectorAll(
                '[data-testid="message"][data-role="assistant"] [data-testid="message-text"]'
            )].map((e) => e.innerText.trim())"""
        )
        assert texts == [stored], texts
        assert ui.last_text().strip() == stored


# ----------------------------------------------------------------------------- service worker

_SW_STATE = """async (ms) => {
  const timeout = new Promise((_, no) => setTimeout(() => no(new Error('sw not ready')), ms));
  const reg = await Promise.race([navigator.serviceWorker.ready, timeout]);
  const urls = [];
  for (const name of await caches.keys()) {
    const cache = await caches.open(name);
    for (const request of await cache.keys()) urls.push(request.url);
  }
  return {scope: reg.scope, active: !!reg.active, urls};
}"""


def test_the_service_worker_caches_the_shell_and_no_api_response(
    desktop: UiPage, world: World
) -> None:
    """After signing in and opening a chat (API calls made), the service worker is active for
    /ui/, its caches hold the shell and nothing outside /ui/; offline, a reload still shows the
    shell."""
    s = world.session("full_access")
    s.turn("Cache me", answer("Cached answer"))
    ui = desktop
    open_chat(ui, world, s)
    expect(ui.messages("assistant")).to_contain_text("Cached answer")
    state = ui.page.evaluate(_SW_STATE, DEADLINE * 1000)
    assert state["active"] and state["scope"] == f"{world.url}/ui/", state
    paths = {urlsplit(u).path for u in state["urls"]}
    assert paths & {"/ui/", "/ui/index.html"}, paths
    assert {"/ui/js/main.js", "/ui/app.css"} <= paths, paths
    assert all(p.startswith("/ui/") for p in paths), f"cached outside /ui/: {paths}"
    ui.watch.allow(NET_ERRORS)  # the API calls the offline shell makes
    ui.watch.allow(r"FetchEvent")
    ui.context.set_offline(True)
    try:
        ui.page.reload()
        expect(ui.page.locator('script[src$="js/main.js"]')).to_have_count(1)
    finally:
        ui.context.set_offline(False)


# ---------------------------------------------------------------------------------------- TLS


def test_over_tls_the_shell_loads_signs_in_and_installs_its_worker(
    browser: Browser, world: World, tls_files: TlsFiles, tmp_path: Path, digest: str
) -> None:
    """A kernel on real TLS with a self-signed certificate: the shell loads under its CSP, the
    token signs in, and the service worker registers. The context ignores HTTPS errors; this
    browser also trusts the certificate's key (`trusting`), without which Chromium refuses the
    worker's script whatever the context ignores."""
    launcher = Launcher(tmp_path / "procs")
    try:
        kernel = launcher.tcp(
            ["--data-dir", str(tmp_path / "data")],
            tls=tls_files,
            env=base_env(
                FOYA_AUTH_TOKEN_SHA256=digest,
                FOYA_TLS_CERT_FILE=str(tls_files.cert),
                FOYA_TLS_KEY_FILE=str(tls_files.key),
            ),
        )
        assert kernel.url is not None and kernel.url.startswith("https://")
        with (
            browser.sibling(trusting(tls_files.cert_pem)) as trusted,
            trusted.page(kernel.url, ignore_https_errors=True) as ui,
        ):
            response = ui.page.goto(f"{kernel.url}/ui/")
            assert response is not None and response.ok
            assert "default-src 'none'" in (response.headers.get("content-security-policy") or "")
            ui.sign_in(world.token)
            expect(ui.testid("session-list")).to_be_visible()
            state = ui.page.evaluate(_SW_STATE, DEADLINE * 1000)
            assert state["active"] and state["scope"] == f"{kernel.url}/ui/", state
    finally:
        launcher.close()
