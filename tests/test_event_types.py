"""Each event kind names its payload's type, and the type checker holds a draft to it.

`EventDraft(session, kind, payload)` with `kind` a `Kind[P]` takes a `P` only: mypy (run
in-process on small snippets, with the project's own configuration) rejects a `message_end` with
a usage payload and accepts the right pairings. At run time a kind is its name: it compares,
hashes, encodes and stores as the plain string, so facts read back from the log compare equal.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
from mypy import api

from app import events as k
from app.events import Kind, compact_json, kinds

ROOT = Path(__file__).resolve().parent.parent


def _mypy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> tuple[str, int]:
    """mypy's report on `source` (checked strictly, as the app is) and its exit status."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(source))
    monkeypatch.chdir(ROOT)  # where `app` and the project's mypy configuration are
    out, err, status = api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--no-error-summary",
            str(snippet),
        ]
    )
    return out + err, status


USAGE = """
    from app import events as k
    from app.events import EventDraft, Usage

    spent: Usage = {
        "model": "m",
        "input_tokens": 1,
        "output_tokens": 2,
        "total_tokens": 3,
        "cached_tokens": 0,
    }
"""


def test_a_draft_pairing_a_kind_with_another_kinds_payload_is_a_type_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report, status = _mypy(
        tmp_path, monkeypatch, USAGE + '    draft = EventDraft("s", k.MESSAGE_END, spent)\n'
    )
    assert status == 1, report
    assert "snippet.py:12: error:" in report, report
    assert '"EventDraft"' in report, report


def test_drafts_pairing_each_kind_with_its_own_payload_type_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = USAGE + textwrap.indent(
        textwrap.dedent(
            """
            from app.events import Message, SessionDeleted

            message: Message = {"role": "user", "content": "hi"}
            gone: SessionDeleted = {"id": "s"}
            drafts = [
                EventDraft("s", k.USAGE_UPDATED, spent, "run"),
                EventDraft("s", k.MESSAGE_END, message),
                EventDraft("s", k.ERROR, "the provider failed"),
                EventDraft("s", k.SESSION_DELETED, gone),
                EventDraft("s", k.SUBAGENT_QUEUED, {"id": "r"}),  # a capability's record
            ]
            """
        ),
        "    ",
    )
    report, status = _mypy(tmp_path, monkeypatch, good)
    assert status == 0, report


def test_every_kind_is_its_name() -> None:
    found = {n: v for n, v in vars(kinds).items() if isinstance(v, Kind)}
    assert len(found) == 41
    for name, kind in found.items():
        assert kind == name.lower(), name  # the constant is named after the kind
        assert type(str(kind)) is str
    assert len(set(found.values())) == len(found)
    assert all(getattr(k, n) is v for n, v in found.items())  # re-exported by app.events


def test_a_kind_encodes_and_stores_as_its_plain_name() -> None:
    assert compact_json({"kind": k.MESSAGE_END}) == '{"kind":"message_end"}'
    assert json.dumps(k.TURN_COMPLETE) == '"turn_complete"'
    assert {"message_end": 1}[k.MESSAGE_END] == 1
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t(kind TEXT)")
    conn.execute("INSERT INTO t VALUES (?)", (k.MESSAGE_END,))
    row = conn.execute("SELECT kind, typeof(kind) FROM t WHERE kind = ?", (k.MESSAGE_END,))
    assert row.fetchone() == ("message_end", "text")
