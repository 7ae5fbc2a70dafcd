"""`foya exec`: the HTTP/SSE client that runs one turn against a kernel and streams it.

The kernel is reached over its Unix socket, or over TCP (`--url`) with a bearer token that is
sent in the `Authorization` header and nowhere else: never printed, never logged. The session's
event stream is opened before the turn is submitted, and the kernel's `: ok` comment (sent once
the subscription exists) is awaited first, so no event of the turn can be missed.

Exit codes: 0 completed, 1 failed or a kernel error response, 2 kernel unreachable, 130 cancelled.
Where the kernel is (`Target`), its error answers and what to say when it gives none come from
app.ops.rest, as for every other client.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import httpx

from app.jsontypes import JSONObject
from app.ops.rest import FAILED, OK, UNREACHABLE, KernelError, Target, Unreachable, kernel_error
from app.ops.rest import unreachable as no_answer

CANCELLED = 130
EXIT_BY_STATUS = {"completed": OK, "failed": FAILED, "cancelled": CANCELLED}
REQUEST_TIMEOUT = httpx.Timeout(30.0)
# The kernel sends a heartbeat comment every 15 s of silence; four missed ones mean it is gone.
STREAM_TIMEOUT = httpx.Timeout(30.0, read=60.0)
DECISIONS = {"y": "approved", "n": "denied", "a": "approved_for_session"}
DETAIL_CHARS = 300


def http_client(target: Target) -> httpx.Client:
    """An httpx client for `target` (raises `Unreachable` for a --cacert it cannot load)."""
    if target.url is None:
        transport = httpx.HTTPTransport(uds=str(target.socket))
        return httpx.Client(transport=transport, base_url="http://foya", timeout=REQUEST_TIMEOUT)
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    verify = target.ssl_context() if target.url.startswith("https:") else True
    return httpx.Client(
        base_url=target.url, headers=headers, verify=verify, timeout=REQUEST_TIMEOUT
    )


@dataclass(frozen=True)
class ExecOptions:
    prompt: str
    session: str | None = None
    approve_all: bool = False
    show_reasoning: bool = False
    model: str | None = None
    project_id: str | None = None
    connection: str | None = None  # the new session's connection id


def checked(response: httpx.Response) -> httpx.Response:
    """`response`, or a `KernelError` carrying the kernel's error body."""
    if response.status_code < 400:
        return response
    raise kernel_error(response.status_code, response.read(), response.reason_phrase)


def sse_frames(lines: Iterator[str]) -> Iterator[tuple[str, Any] | None]:
    """(kind, data) per event frame; None per comment (`: ok`, heartbeats)."""
    kind, data = "", []
    for line in lines:
        if line.startswith(":"):
            yield None
        elif line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            yield kind, json.loads("\n".join(data))
            kind, data = "", []


class Exec:
    """One `foya exec` run: session, subscription, turn, then the events of that turn."""

    def __init__(
        self, http: httpx.Client, opts: ExecOptions, out: TextIO, err: TextIO, stdin: TextIO
    ) -> None:
        self.http, self.opts, self.out, self.err, self.stdin = http, opts, out, err, stdin
        self.session = opts.session or ""
        self.run_id: str | None = None
        self.printed = ""  # text of the current assistant message written so far
        self.error: str | None = None
        self.thinking = False  # reasoning was written to stderr without a newline yet
        self.queued = ""  # our queue item while the session is busy with another turn

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self.printed += text

    def start(self) -> None:
        if not self.session:
            body = {
                "connection_id": self.opts.connection,
                "model": self.opts.model,
                "project_id": self.opts.project_id,
            }
            body = {k: v for k, v in body.items() if v}
            created = checked(self.http.post("/sessions", json=body)).json()
            self.session = str(created["id"])
        self.note(f"foya: session {self.session}")

    def run(self) -> int:
        path = f"/sessions/{self.session}/events"
        with self.http.stream("GET", path, timeout=STREAM_TIMEOUT) as response:
            frames = sse_frames(checked(response).iter_lines())
            next(frames, None)  # the `: ok` comment: the subscription exists from here on
            turn = {"message": self.opts.prompt}
            accepted = checked(self.http.post(f"/sessions/{self.session}/turns", json=turn)).json()
            if accepted.get("status") == "queued":
                self.queued = str(accepted["queued"]["id"])
                self.note("foya: the session is busy; the message waits in its queue")
            for frame in frames:
                if frame is not None and (code := self.handle(*frame)) is not None:
                    return code
        self.note("foya: the kernel closed the event stream before the turn finished")
        return UNREACHABLE

    def handle(self, kind: str, event: JSONObject) -> int | None:
        """React to one event; an exit code once this run's turn is complete."""
        payload: Any = event.get("payload")
        if self.run_id is None:
            mine = isinstance(payload, dict) and payload.get("role") == "user"
            if kind == "message_end" and mine and payload.get("content") == self.opts.prompt:
                self.run_id = event.get("run_id")
            return None
        if event.get("run_id") != self.run_id:
            return None
        if self.thinking and kind != "reasoning_delta":
            self.thinking = False
            self.note("")  # end the reasoning's line
        if kind == "message_delta":
            self.write(str(payload))
        elif kind == "reasoning_delta" and self.opts.show_reasoning:
            dim = self.err.isatty()
            self.err.write(f"\x1b[2m{payload}\x1b[0m" if dim else str(payload))
            self.thinking = True
            self.err.flush()
        elif kind == "message_end" and payload.get("role") == "assistant":
            self.end_message(str(payload.get("content") or ""))
        elif kind == "tool_begin":
            self.note(f"[tool] {payload.get('name')} ...")
        elif kind == "tool_end":
            output = (str(payload.get("output") or "").strip().splitlines() or [""])[0]
            outcome = f"error: {output[:DETAIL_CHARS]}" if payload.get("is_error") else "ok"
            self.note(f"[tool] {payload.get('name')} {outcome}")
        elif kind == "approval_request":
            self.approve(payload)
        elif kind == "error":
            self.error = str(payload)
            self.note(f"foya: error: {self.error}")
        elif kind == "turn_complete":
            status = str(payload.get("status"))
            if status == "failed" and self.error is None:
                self.note(f"foya: the turn failed ({payload.get('reason', 'error')})")
            elif status == "cancelled":
                self.note(f"foya: the turn was cancelled ({payload.get('reason', 'user_stop')})")
            return EXIT_BY_STATUS.get(status, FAILED)
        return None

    def end_message(self, content: str) -> None:
        """Print what the (lossy) deltas missed, then end the line."""
        if content.startswith(self.printed):
            self.write(content[len(self.printed) :])
        if self.printed and not self.printed.endswith("\n"):
            self.write("\n")
        self.printed = ""

    def approve(self, request: JSONObject) -> None:
        what = describe(request)
        if self.opts.approve_all:
            decision = "approved"
            self.note(f"foya: approved {what} (--approve-all)")
        elif not self.stdin.isatty():
            decision = "denied"
            self.note(f"foya: denied {what}: stdin is not a terminal (pass --approve-all)")
        else:
            decision = ""
            while not decision:
                self.err.write(f"Allow {what}? [y]es/[n]o/[a]lways: ")
                self.err.flush()
                answer = self.stdin.readline()
                decision = DECISIONS.get(answer.strip().lower()[:1], "") if answer else "denied"
        path = f"/sessions/{self.session}/approvals/{request['id']}"
        checked(self.http.post(path, json={"decision": decision}))

    def cancel(self) -> None:
        """Ctrl-C: stop our turn, or withdraw our message while it still waits in the queue."""
        if self.run_id is None and self.queued:
            gone = self.http.delete(f"/sessions/{self.session}/queue/{self.queued}")
            if gone.status_code == 204:  # else it has just started: cancel it
                self.note("foya: removed the message from the queue")
                return
        self.note(f"foya: cancelling the turn of session {self.session}")
        checked(self.http.post(f"/sessions/{self.session}/cancel"))


def describe(request: JSONObject) -> str:
    """An approval request in a few words: the tool, what it does when that is not its name
    (`edit (write)`, `bash (execute)`), and what it touches."""
    tool, action = str(request.get("tool_name")), str(request.get("action"))
    what = tool if action == tool else f"{tool} ({action})"
    target = str(request.get("resource") or request.get("detail") or "")[:DETAIL_CHARS]
    outside = " [outside the working directory]" if request.get("scope") == "outside" else ""
    return f"{what} {target}".rstrip() + outside


def run_exec(target: Target, opts: ExecOptions, out: TextIO, err: TextIO, stdin: TextIO) -> int:
    """Run one turn; the process exit code."""
    try:
        http = http_client(target)
    except Unreachable as exc:
        err.write(f"foya: {exc}\n")
        return UNREACHABLE
    with http:
        job = Exec(http, opts, out, err, stdin)
        try:
            job.start()
            return job.run()
        except KeyboardInterrupt:
            job.end_message("")  # end the half-printed line
            with contextlib.suppress(KeyboardInterrupt, httpx.HTTPError, KernelError):
                if job.session:
                    job.cancel()
            return CANCELLED
        except KernelError as exc:
            job.note(f"foya: {target.explain(exc)}")
            return FAILED
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            job.note(f"foya: {no_answer(target, exc)}")
            return UNREACHABLE
        except httpx.TransportError as exc:
            job.note(f"foya: {no_answer(target, exc, connecting=False)}")
            return UNREACHABLE
