"""Imports and exports in a real in-process kernel: bundles stored once and all or nothing,
imported sessions that behave like the kernel's own (continue, fork, rewind, review), and the
portable archive's round trip between two kernels (app.kernel.imports, app.kernel.exports,
app.imports.archive)."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_provider import FakeProvider, answer
from support.inprocess import InProcess, inprocess_kernel, turn

from app.errors import Conflict
from app.imports import archive
from app.imports.model import (
    ImportBundle,
    ImportedConnection,
    ImportedFileChange,
    ImportedImage,
    ImportedMessage,
    ImportedRule,
    ImportedSession,
    InvalidImport,
    UnsupportedImportVersion,
)
from app.store.check import check

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
T0 = 1781791200000 * 10**6


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as running:
        yield running


@pytest.fixture
def rig(tmp_path: Path, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcess]:
    # A HOME of its own: global rules live in ~/.foya, and other tests of the worker write some.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with inprocess_kernel(tmp_path / "data", fake=fake) as running:
        yield running


def at(second: int) -> str:
    return f"2026-06-18T14:00:{second:02d}.000Z"


def conversation(prefix: str = "") -> list[ImportedMessage]:
    """User with an image, a tool round that created a file, and the answer."""
    return [
        ImportedMessage(
            {"role": "user", "content": "make a file", "created_at": at(1)},
            f"{prefix}m1",
            [ImportedImage(PNG, "pixel.png")],
        ),
        ImportedMessage(
            {
                "role": "assistant",
                "content": "",
                "reasoning": "write it",
                "tool_calls": [{"id": "c1", "name": "write", "input": {"path": "a.txt"}}],
                "created_at": at(2),
            },
            f"{prefix}m2",
        ),
        ImportedMessage(
            {"role": "tool", "tool_call_id": "c1", "name": "write", "content": "ok"},
            f"{prefix}m3",
            file_change=ImportedFileChange("src/a.txt", None, b"hello\n", None, 0o644),
        ),
        ImportedMessage(
            {"role": "assistant", "content": "done", "model": "gpt-4o", "created_at": at(4)},
            f"{prefix}m4",
        ),
    ]


def bundle(*sessions: ImportedSession, rules: list[ImportedRule] | None = None) -> ImportBundle:
    return ImportBundle("chatbuddy", list(sessions), rules or [])


def session(
    key: str = "chatbuddy:s1", messages: list[ImportedMessage] | None = None
) -> ImportedSession:
    return ImportedSession(
        key, "Imported", T0, T0 + 62 * 10**9, conversation() if messages is None else messages
    )


def history(rig: InProcess, sid: str) -> list[dict[str, Any]]:
    return [dict(m) for m in rig.run(rig.kernel.store.history(sid))]


def everything(rig: InProcess) -> tuple[Any, ...]:
    """What an import may change: sessions, the event log, rules, connections, artifacts."""
    kernel = rig.kernel
    data = kernel.settings.data_dir
    return (
        sorted(r["id"] for r in rig.run(kernel.store.list_sessions())),
        rig.run(kernel.store.head_seq()),
        [r.name for r in rig.run(kernel.user_context.rules("global", None))],
        [c["id"] for c in kernel.connections.all()],
        sorted(p.name for p in (data / "artifacts").glob("*")),
        sorted(p.name for p in (data / "workspaces").glob("*")),
    )


def test_a_bundle_becomes_sessions_of_imported_facts(rig: InProcess) -> None:
    kernel = rig.kernel
    summary = rig.run(kernel.imports.run(bundle(session())))
    assert (summary.sessions_created, summary.messages_imported) == (1, 4)
    assert (summary.images, summary.file_changes) == (1, 1)
    (sid,) = summary.session_ids
    got = rig.run(kernel.sessions.get(sid))
    assert got["title"] == "Imported" and got["title_is_manual"] is True
    assert got["created_at"].startswith("2026-06-18T14:00:00")
    assert got["updated_at"].startswith("2026-06-18T14:01:02")
    events = rig.run(kernel.store.events_after(0, 100, session=sid))
    assert [e.kind for e in events] == ["message_imported"] * 4
    messages = history(rig, sid)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert [m["source_id"] for m in messages] == ["m1", "m2", "m3", "m4"]
    assert messages[0]["created_at"] == at(1)
    assert messages[2]["created_at"] == "2026-06-18T14:00:00.000000Z"  # none given: the session's
    assert messages[1]["reasoning"] == "write it" and messages[3]["model"] == "gpt-4o"
    (ref,) = messages[0]["attachments"]
    data, media = rig.run(kernel.artifacts.read(sid, ref["id"]))
    assert media == "image/png" and data.startswith(b"\x89PNG")
    change = messages[2]["file_change"]
    workspace = kernel.sessions.workspace(rig.run(kernel.sessions.row(sid)))
    assert change["path"] == str(workspace / "src/a.txt")
    assert (change["before_exists"], change["after_mode"]) == (False, 0o644)
    assert "+hello" in messages[2]["diff"]
    # Imported file changes are reviewable, like the kernel's own.
    pending = rig.run(kernel.reviews.pending(sid))
    assert [f["path"] for f in pending["files"]] == [str(workspace / "src/a.txt")]


def test_importing_twice_stores_nothing_and_new_messages_are_appended(rig: InProcess) -> None:
    kernel = rig.kernel
    first = rig.run(kernel.imports.run(bundle(session())))
    before = everything(rig)
    again = rig.run(kernel.imports.run(bundle(session())))
    assert (again.sessions_created, again.sessions_unchanged) == (0, 1)
    assert (again.messages_imported, again.messages_already_present) == (0, 4)
    assert everything(rig) == before
    longer = [
        *conversation(),
        ImportedMessage({"role": "user", "content": "thanks", "created_at": at(9)}, "m5"),
    ]
    more = rig.run(kernel.imports.run(bundle(session(messages=longer))))
    assert (more.sessions_updated, more.messages_imported) == (1, 1)
    assert more.session_ids == first.session_ids
    assert [m["source_id"] for m in history(rig, first.session_ids[0])][-2:] == ["m4", "m5"]


def test_a_failed_import_leaves_nothing_behind(rig: InProcess) -> None:
    kernel = rig.kernel
    rig.run(kernel.imports.run(bundle(session())))
    before = everything(rig)
    good = session("chatbuddy:s2", conversation("x"))
    # A value JSON cannot hold refuses the whole bundle before anything is written.
    bad = session("chatbuddy:s3", [ImportedMessage({"role": "user", "content": b"raw"}, "b1")])
    grown = [*conversation(), ImportedMessage({"role": "user", "content": "more"}, "m9")]
    with pytest.raises(InvalidImport, match="not a JSON value"):
        rig.run(
            kernel.imports.run(
                bundle(
                    session(messages=grown),
                    good,
                    bad,
                    rules=[ImportedRule("r", "ChatBuddy: X", "Be brief.")],
                )
            )
        )
    assert everything(rig) == before
    with pytest.raises(InvalidImport, match="same session twice"):
        rig.run(kernel.imports.run(bundle(session("chatbuddy:s2"), session("chatbuddy:s2"))))
    assert everything(rig) == before


def test_a_busy_session_is_not_appended_to(rig: InProcess) -> None:
    kernel = rig.kernel
    (sid,) = rig.run(kernel.imports.run(bundle(session()))).session_ids
    before = everything(rig)
    grown = [*conversation(), ImportedMessage({"role": "user", "content": "more"}, "m9")]

    async def during_exclusive() -> None:
        async with kernel.turns.exclusive(sid):
            await kernel.imports.run(bundle(session(messages=grown)))

    with pytest.raises(Conflict) as raised:
        rig.run(during_exclusive())
    assert raised.value.code == "session_busy"
    assert everything(rig) == before


def test_rules_are_manual_rules_the_imported_sessions_apply(
    rig: InProcess, fake: FakeProvider
) -> None:
    kernel = rig.kernel
    rules = [ImportedRule("k", "ChatBuddy: Reviewer", "Report bugs first.")]
    linked = session()
    linked.rule = "k"
    other = session("chatbuddy:other", [])
    summary = rig.run(kernel.imports.run(bundle(linked, other, rules=rules)))
    assert summary.rules_created == 1
    (rule,) = rig.run(kernel.user_context.rules("global", None))
    assert (rule.name, rule.trigger, rule.content) == (
        "ChatBuddy: Reviewer",
        "manual",
        "Report bugs first.",
    )
    # The same prompt again is the same rule; another text under the name gets a new name.
    changed = [ImportedRule("k2", "ChatBuddy: Reviewer", "Something else.")]
    third = session("chatbuddy:third", [])
    third.rule = "k2"
    again = rig.run(kernel.imports.run(bundle(linked, third, rules=[*rules, *changed])))
    assert again.rules_created == 1
    names = sorted(r.name for r in rig.run(kernel.user_context.rules("global", None)))
    assert names == ["ChatBuddy: Reviewer", "ChatBuddy: Reviewer (2)"]
    # Continuing the linked session sends the rule; the other session does not get it.
    for sid, wanted in ((summary.session_ids[0], True), (summary.session_ids[1], False)):
        rig.run(kernel.sessions.update(sid, {"model": f"imp-{sid}"}))
        fake.push(f"imp-{sid}", answer("ok"))
        turn(rig, sid, "go on")
        system = fake.chats(f"imp-{sid}")[-1].body["messages"][0]["content"]
        assert ("Report bugs first." in system) is wanted


def test_imported_sessions_continue_fork_and_rewind(rig: InProcess, fake: FakeProvider) -> None:
    kernel = rig.kernel
    plain = [
        ImportedMessage({"role": "user", "content": "and a test", "created_at": at(5)}, "m5"),
        ImportedMessage({"role": "assistant", "content": "added", "created_at": at(6)}, "m6"),
    ]
    imported = session(messages=[*conversation(), *plain])
    (sid,) = rig.run(kernel.imports.run(bundle(imported))).session_ids
    rig.run(kernel.sessions.update(sid, {"model": "imp-go"}))
    fake.push("imp-go", answer("continued"))
    turn(rig, sid, "and now?")
    sent = fake.chats("imp-go")[-1].body["messages"]
    roles = ["user", "assistant", "tool", "assistant", "user", "assistant", "user"]
    assert [m["role"] for m in sent[1:]] == roles
    assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"] == "c1"
    messages = history(rig, sid)
    fork = rig.run(kernel.fork_session(sid, None, messages[3]["event_seq"]))
    copies = history(rig, fork["id"])
    assert [m["content"] for m in copies] == [m["content"] for m in messages[:4]]
    assert all("source_id" not in m for m in copies)
    # A rewind to an imported user message takes it and everything after it back.
    target = messages[4]["event_seq"]
    preview = rig.run(kernel.rewinds.rewind(sid, target))
    assert preview["status"] == "confirmation_required" and preview["message"] == "and a test"
    rig.run(
        kernel.rewinds.rewind(
            sid,
            target,
            confirm=True,
            expected_head_seq=preview["head_seq"],
            expected_file_state=preview["file_state_token"],
        )
    )
    assert [m["source_id"] for m in history(rig, sid)] == ["m1", "m2", "m3", "m4"]


def test_connections_come_only_when_the_bundle_carries_them(rig: InProcess) -> None:
    kernel = rig.kernel
    before = {c["id"] for c in kernel.connections.all()}
    carried = bundle(session())
    carried.connections = [ImportedConnection("OpenRouter", "https://or.example/v1", "sk-x", ["m"])]
    summary = rig.run(kernel.imports.run(carried))
    assert summary.connections_created == 1
    made = [c for c in kernel.connections.all() if c["id"] not in before]
    assert [(c["name"], c["base_url"], c["api_key"]) for c in made] == [
        ("OpenRouter", "https://or.example/v1", "sk-x")
    ]
    assert rig.run(kernel.imports.run(carried)).connections_created == 0


def comparable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A history without what belongs to one kernel: seqs, artifact ids, local paths."""
    out = []
    for message in messages:
        m = {k: v for k, v in message.items() if k not in ("event_seq", "source_id", "diff")}
        if "attachments" in m:
            m["attachments"] = [
                {k: v for k, v in a.items() if k not in ("id", "created_at")}
                for a in m["attachments"]
            ]
        if "file_change" in m:
            m["file_change"] = {**m["file_change"], "path": Path(m["file_change"]["path"]).name}
        out.append(m)
    return out


def test_export_then_import_gives_the_same_active_history(
    tmp_path: Path, fake: FakeProvider
) -> None:
    with inprocess_kernel(tmp_path / "a", fake=fake) as a:
        (imported,) = a.run(a.kernel.imports.run(bundle(session()))).session_ids
        own = a.run(a.kernel.sessions.create({"model": "exp-own"}))["id"]
        fake.push("exp-own", answer("first"))
        turn(a, own, "one")
        fake.push("exp-own", answer("second"))
        turn(a, own, "two")
        # Rewound messages are not active history: the archive's history leaves them out.
        first_user = history(a, own)[2]["event_seq"]
        preview = a.run(a.kernel.rewinds.rewind(own, first_user))
        a.run(
            a.kernel.rewinds.rewind(
                own,
                first_user,
                confirm=True,
                expected_head_seq=preview["head_seq"],
                expected_file_state=preview["file_state_token"],
            )
        )
        expected = {sid: comparable(history(a, sid)) for sid in (imported, own)}
        facts = [
            (e.seq, e.kind, e.run_id, e.time_ns, e.payload)
            for e in a.run(a.kernel.store.events_after(0, 1000, session=own))
        ]
        file = a.run(a.kernel.exports.archive([imported, own]))
        data = file.read()
        file.close()
        markdown = a.run(a.kernel.exports.transcript(imported))
    assert markdown.startswith("# Imported\n") and "## Assistant" in markdown
    members = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert members[-1] == "manifest.json"
    lines = zipfile.ZipFile(io.BytesIO(data)).read(f"sessions/{own}/events.jsonl").splitlines()
    exported = [json.loads(line) for line in lines]
    assert [tuple(f.values()) for f in exported] == facts  # every fact, as stored
    assert list(exported[0]) == ["seq", "kind", "run_id", "occurred_at_ns", "payload"]
    assert f"sessions/{imported}/transcript.md" in members
    with inprocess_kernel(tmp_path / "b", fake=fake) as b:
        summary = b.run(b.kernel.imports.upload("foya", data))
        assert summary.sessions_created == 2
        got = [comparable(history(b, sid)) for sid in summary.session_ids]
        assert got == [expected[imported], expected[own]]
        assert not set(summary.session_ids) & {imported, own}  # new ids in the new kernel
        before = everything(b)
        again = b.run(b.kernel.imports.upload("foya", data))
        assert (again.sessions_unchanged, again.messages_imported) == (2, 0)
        assert everything(b) == before
        data_dir = b.kernel.settings.data_dir
    report = check(data_dir / "foya.db")
    assert report.clean, report.differences


def rezip(data: bytes, change: Any) -> bytes:
    """`data`'s archive with its members passed through `change(name, bytes)`."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for name in source.namelist():
            changed = change(name, source.read(name))
            if changed is not None:
                target.writestr(*changed) if isinstance(changed, tuple) else target.writestr(
                    name, changed
                )
    return out.getvalue()


def test_a_damaged_archive_is_refused_whole(rig: InProcess) -> None:
    kernel = rig.kernel
    (sid,) = rig.run(kernel.imports.run(bundle(session()))).session_ids
    file = rig.run(kernel.exports.archive([sid]))
    data = file.read()
    file.close()
    rig.run(kernel.delete_session(sid))
    before = everything(rig)

    def flip(name: str, body: bytes) -> bytes:
        return (
            body.replace(b"make a file", b"make a fire") if name.endswith("history.jsonl") else body
        )

    def newer(name: str, body: bytes) -> bytes:
        if name != "manifest.json":
            return body
        return json.dumps({**json.loads(body), "version": 2}).encode()

    def extra(name: str, body: bytes) -> Any:
        return ("sessions/x/evil.txt", b"x") if name.endswith("transcript.md") else body

    def drop(name: str, body: bytes) -> bytes | None:
        return None if name.endswith("history.jsonl") else body

    cases: list[tuple[bytes, type[Exception], str | None]] = [
        (rezip(data, flip), InvalidImport, "SHA-256"),
        (rezip(data, newer), UnsupportedImportVersion, "version 2"),
        (rezip(data, extra), InvalidImport, "not in the manifest"),
        (rezip(data, drop), InvalidImport, "missing"),
        (data[: len(data) // 2], InvalidImport, None),
        (b"not a zip at all", InvalidImport, None),
    ]
    for damaged, error, words in cases:
        with pytest.raises(error, match=words):
            rig.run(kernel.imports.upload("foya", damaged))
        assert everything(rig) == before
    assert archive.read(data).sessions[0].title == "Imported"
