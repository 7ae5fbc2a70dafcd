"""`foya status`, `sessions`, `history`, `rewind` and `usage`: thin clients of the REST API.

Each makes a call or two through `app.ops.rest.Rest` and prints the answer as plain text on
stdout, or with `--json` the kernel's JSON as it came (one document a line). Errors go to
stderr as `foya exec` prints them: the kernel's `code: message` and exit 1; no answer at all,
exit 2. `foya status` exits 1 also when the kernel answers that it is not ready.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from app.jsontypes import JSONObject
from app.ops.rest import FAILED, OK, UNREACHABLE, KernelError, Rest, Target, Unreachable

TOOL_LINES = 3  # lines of a tool's output `foya history` shows


@dataclass(frozen=True)
class Console:
    """Where a command prints: answers on `out`, notes and prompts on `err`."""

    out: TextIO
    err: TextIO
    as_json: bool = False

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def data(self, value: Any) -> None:
        self.line(json.dumps(value, ensure_ascii=False))

    def note(self, text: str) -> None:
        self.err.write(f"foya: {text}\n")

    def table(self, rows: Sequence[Sequence[str]]) -> None:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.line("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


Command = Callable[[Rest, Console], int]


def run(target: Target, command: Command, console: Console) -> int:
    """Run `command` against `target`; the exit code."""
    try:
        rest = Rest(target)
    except Unreachable as exc:
        console.note(str(exc))
        return UNREACHABLE
    try:
        return command(rest, console)
    except KernelError as exc:
        console.note(target.explain(exc))
        return FAILED
    except Unreachable as exc:
        console.note(str(exc))
        return UNREACHABLE
    finally:
        rest.close()


def status(rest: Rest, con: Console) -> int:
    """`GET /readyz`: each check; 0 ready, 1 not ready."""
    try:
        answer, ready = rest.call("GET", "/readyz"), True
    except KernelError as exc:
        if exc.code != "not_ready" or not isinstance(exc.body, dict):
            raise
        answer, ready = exc.body, False
    if not isinstance(answer, dict) or not isinstance(answer.get("checks"), list):
        con.note(f"{rest.target.where()} answered /readyz without checks: is it a foya kernel?")
        return FAILED
    if con.as_json:
        con.data(answer)
    else:
        con.line(f"{'ready' if ready else 'not ready'}: {rest.target.where()}")
        for check in answer["checks"]:
            mark = "ok  " if check.get("ok") else "FAIL"
            con.line(f"  {mark}  {check.get('name')}: {check.get('detail')}")
    return OK if ready else FAILED


def sessions(rest: Rest, con: Console) -> int:
    """`GET /sessions`: top-level sessions, newest first."""
    listed = rest.call("GET", "/sessions")
    if con.as_json:
        con.data(listed)
    elif not listed:
        con.note("no sessions yet")
    else:
        rows = [("ID", "UPDATED", "STATE", "MODEL", "TITLE")]
        for s in listed:
            title = ("* " if s.get("pinned") else "") + str(s.get("title") or "(untitled)")
            when = str(s.get("updated_at", ""))[:16].replace("T", " ")
            rows.append((str(s["id"]), when, str(s.get("phase", "")), str(s.get("model")), title))
        con.table(rows)
    return OK


def history(session: str) -> Command:
    """`GET /sessions/{id}/history`: the active messages, each after its `[seq]`."""

    def command(rest: Rest, con: Console) -> int:
        messages = rest.call("GET", f"/sessions/{session}/history")
        if con.as_json:
            con.data(messages)
            return OK
        for message in messages:
            con.line(_message(message))
        if not messages:
            con.note(f"session {session} has no messages")
        return OK

    return command


def _message(m: JSONObject) -> str:
    role, seq = str(m.get("role")), m.get("event_seq")
    text = _text(m.get("content"))
    if role == "tool":
        lines = text.splitlines() or [""]
        more = f"\n(+{len(lines) - TOOL_LINES} lines)" if len(lines) > TOOL_LINES else ""
        label = f"tool {m.get('name')}" + (" (error)" if m.get("is_error") else "")
        return _block(seq, label, "\n".join(lines[:TOOL_LINES]) + more)
    for call in m.get("tool_calls") or ():
        text += f"\n-> {call.get('name')} {_text(call.get('input'))}"  # served as JSON text
    if m.get("turn_status") not in (None, "completed"):
        text += f"\n({m.get('turn_status')}: {m.get('turn_reason') or 'no reason given'})"
    return _block(seq, role, text.strip("\n"))


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _block(seq: Any, label: str, text: str) -> str:
    """`[seq] label: first line`, the other lines indented below it."""
    first, *rest = text.splitlines() or [""]
    return "\n".join([f"[{seq}] {label}: {first}".rstrip(), *(f"    {r}" for r in rest)])


def rewind(session: str, message_seq: int, *, yes: bool, stdin: TextIO) -> Command:
    """Preview a rewind to before user message `message_seq`, then confirm it with the
    preview's `head_seq` and `file_state_token` (`--yes`, or `y` at the prompt)."""

    def command(rest: Rest, con: Console) -> int:
        path = f"/sessions/{session}/turns/{message_seq}/rewind"
        preview = rest.call("POST", path, {})
        if con.as_json:
            con.data(preview)
        else:
            con.line(f"rewind session {session} to before message [{message_seq}]:")
            con.line("\n".join(f"    > {line}" for line in str(preview["message"]).splitlines()))
            _files(con, preview["files"], "files the agent changed since")
        if not yes:
            if not stdin.isatty():
                con.note("not rewound: pass --yes to confirm")
                return FAILED
            con.err.write("Rewind? [y/N]: ")
            con.err.flush()
            if not stdin.readline().strip().lower().startswith("y"):
                con.note("not rewound")
                return FAILED
        confirm = {
            "confirm": True,
            "expected_head_seq": preview["head_seq"],
            "expected_file_state": preview["file_state_token"],
        }
        done = rest.call("POST", path, confirm)
        if con.as_json:
            con.data(done)
        else:
            con.line(f"rewound session {session} to before message [{message_seq}]")
            _files(con, done.get("files") or [], "files")
        return OK

    return command


def _files(con: Console, files: list[JSONObject], title: str) -> None:
    if not files:
        con.line(f"{title}: none")
        return
    con.line(f"{title} ({len(files)}):")
    for f in files:
        state = str(f.get("action") or f.get("status"))
        counts = f"+{f.get('additions', 0)} -{f.get('deletions', 0)}"
        left = "  (edited since: left as it is)" if state == "modified" else ""
        con.line(f"  {state:<14} {counts:<9} {f.get('path')}{left}")


def usage(days: int | None) -> Command:
    """`GET /usage[?days=7|30]`: token totals and activity, per model."""

    def command(rest: Rest, con: Console) -> int:
        query = {} if days is None else {"days": str(days)}
        r = rest.call("GET", "/usage", **query)
        if con.as_json:
            con.data(r)
            return OK
        con.line(
            f"last {r['range_days']} days: {r['total_tokens']:,} tokens (input "
            f"{r['input_tokens']:,}, output {r['output_tokens']:,}, cached {r['cached_tokens']:,})"
        )
        con.line(
            f"{r['session_count']} sessions, {r['message_count']} messages, "
            f"{r['active_days']} active days, current streak {r['current_streak']} days"
        )
        models = r.get("model_usage") or []
        if models:
            rows = [("MODEL", "TOKENS", "REQUESTS", "SHARE")]
            rows += [
                (
                    str(m["model"]),
                    f"{m['token_count']:,}",
                    str(m["request_count"]),
                    f"{m['share']:.0%}",
                )
                for m in models
            ]
            con.table(rows)
        return OK

    return command
