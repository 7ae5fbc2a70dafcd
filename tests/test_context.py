"""Unit tests of the context-management pure functions.

`app.kernel.turns.compaction`: the token estimate, the output reserve and the budget, the compaction
plan (what a checkpoint covers; a tool call and its results are never split), the summary request,
the checkpoint format, route keys and context windows. `app.kernel.turns.context`: the model input
built
from the stored history and a checkpoint. The last tests check, with the real `Store`, that a
checkpoint built the way the Compactor builds it is one the store accepts, and that `build` with
the store's own history and checkpoint gives the model exactly the summary plus the tail.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import events as k
from app.events import Checkpoint, EventDraft, Message, ToolCall
from app.kernel.turns.compaction import (
    DEFAULT_WINDOW,
    SECTIONS,
    checkpoint,
    context_window,
    estimate_tokens,
    output_reserve,
    over_budget,
    plan,
    route_key,
    summary_request,
)
from app.kernel.turns.context import build, summary_message, system_message, to_openai
from app.store import Store
from app.store.checkpoints import CHECKPOINT_VERSION, is_valid

CWD = Path("/work/project")

# ------------------------------------------------------------------------- history builders


class History:
    """Stored messages with increasing `event_seq` (gaps, as the global seq has them)."""

    def __init__(self, start: int = 10) -> None:
        self.messages: list[Message] = []
        self.seq = start

    def _add(self, message: Message) -> Message:
        self.seq += 3
        message["event_seq"] = self.seq
        self.messages.append(message)
        return message

    def user(self, content: str = "question") -> Message:
        return self._add({"role": "user", "content": content, "created_at": "t"})

    def assistant(self, content: str = "answer") -> Message:
        return self._add({"role": "assistant", "content": content, "turn_status": "completed"})

    def calls(self, *ids: str, content: str = "") -> Message:
        calls: list[ToolCall] = [
            {"id": i, "name": "bash", "input": {"command": f"echo {i}"}} for i in ids
        ]
        return self._add({"role": "assistant", "content": content, "tool_calls": calls})

    def result(self, call_id: str, content: str = "out") -> Message:
        return self._add({"role": "tool", "tool_call_id": call_id, "content": content})


def seqs(messages: list[Message]) -> list[int]:
    return [int(m["event_seq"]) for m in messages]


# ------------------------------------------------------------------------------ estimate


def test_estimate_tokens_is_a_quarter_of_the_json_characters_plus_one() -> None:
    assert estimate_tokens([]) == 1
    message = {"role": "user", "content": "x" * 400}
    size = len(json.dumps(message))
    assert estimate_tokens([message]) == size // 4 + 1
    assert estimate_tokens([message, message]) == 2 * size // 4 + 1


def test_estimate_tokens_counts_characters_not_escapes() -> None:
    """Non-ASCII text is measured as characters (`ensure_ascii=False`), not `\\uXXXX` escapes."""
    chinese = {"role": "user", "content": "压缩" * 100}
    ascii_ = {"role": "user", "content": "ab" * 100}
    assert estimate_tokens([chinese]) == estimate_tokens([ascii_])


# ---------------------------------------------------------------------- reserve and budget


@pytest.mark.parametrize(
    ("window", "last_output", "reserve"),
    [
        (600, None, 150),  # a quarter of the window before any reply
        (32_000, None, 8_000),
        (64_000, None, 16_000),
        (1_000_000, None, 16_000),  # at most 16K
        (32_000, 0, 1_000),  # then twice the last output, clamped to 1K..8K
        (32_000, 499, 1_000),
        (32_000, 500, 1_000),
        (32_000, 1_500, 3_000),
        (32_000, 4_000, 8_000),
        (32_000, 100_000, 8_000),
        (600, 100, 1_000),  # the clamp holds even above a tiny window
    ],
)
def test_output_reserve(window: int, last_output: int | None, reserve: int) -> None:
    assert output_reserve(window, last_output) == reserve


def test_over_budget_compares_the_estimate_with_the_window_minus_the_reserve() -> None:
    # 600-token window, no reply yet: 600 - 150 = 450 tokens for the input.
    assert not over_budget(450, 600, None)
    assert over_budget(451, 600, None)
    # After a 300-token reply: reserve 1000 > window, so anything is over.
    assert over_budget(1, 600, 300)
    # 200K window after a 2K reply: reserve 4K.
    assert not over_budget(196_000, 200_000, 2_000)
    assert over_budget(196_001, 200_000, 2_000)


@pytest.mark.parametrize("window", [None, 0])
def test_an_unknown_window_counts_as_32k(window: int | None) -> None:
    assert DEFAULT_WINDOW == 32_000
    assert not over_budget(24_000, window, None)  # 32K - 8K
    assert over_budget(24_001, window, None)
    assert not over_budget(30_000, window, 1_000)  # 32K - 2K
    assert over_budget(30_001, window, 1_000)


# ----------------------------------------------------------------------------------- plan


def test_plan_of_an_empty_or_single_exchange_history_is_none() -> None:
    assert plan([], 0) is None
    h = History()
    h.user()
    assert plan(h.messages, 0) is None
    h.assistant()
    assert plan(h.messages, 0) is None, "the last user message is kept: nothing before it"
    h.calls("c1")
    h.result("c1")
    h.assistant()
    assert plan(h.messages, 0) is None


def test_plan_covers_everything_before_the_last_user_message() -> None:
    h = History()
    u1, a1, u2, a2, u3 = h.user("one"), h.assistant(), h.user("two"), h.assistant(), h.user()
    a3 = h.assistant()
    chosen = plan(h.messages, 0)
    assert chosen is not None
    assert chosen.through_seq == a2["event_seq"]
    assert seqs(chosen.covered) == seqs([u1, a1, u2, a2])
    assert seqs(chosen.tail) == seqs([u3, a3])


def test_plan_starts_after_the_previous_checkpoint() -> None:
    h = History()
    h.user(), h.assistant()
    first = h.assistant("boundary")
    u2, a2, u3 = h.user(), h.assistant(), h.user()
    chosen = plan(h.messages, int(first["event_seq"]))
    assert chosen is not None
    assert seqs(chosen.covered) == seqs([u2, a2])
    assert seqs(chosen.tail) == seqs([u3])
    # Nothing new before the last user message since the checkpoint: nothing to compact.
    assert plan(h.messages, int(a2["event_seq"])) is None


def test_plan_never_ends_between_a_tool_call_and_its_result() -> None:
    """The last messages before the final user message are a tool call and its result (a turn
    that failed after its tool ran): the boundary moves back before the call."""
    h = History()
    u1, a1, u2 = h.user(), h.assistant(), h.user()
    call, result = h.calls("c1"), h.result("c1")
    u3 = h.user()
    chosen = plan(h.messages, 0)
    assert chosen is not None
    assert chosen.through_seq == u2["event_seq"]
    assert seqs(chosen.covered) == seqs([u1, a1, u2])
    assert seqs(chosen.tail) == seqs([call, result, u3])


def test_plan_backs_up_over_parallel_calls_and_consecutive_exchanges() -> None:
    h = History()
    u1, a1 = h.user(), h.assistant()
    rest = [h.calls("c1", "c2"), h.result("c1"), h.result("c2"), h.calls("c3"), h.result("c3")]
    u2 = h.user()
    chosen = plan(h.messages, 0)
    assert chosen is not None
    assert seqs(chosen.covered) == seqs([u1, a1])
    assert seqs(chosen.tail) == seqs([*rest, u2])


def test_plan_keeps_a_complete_exchange_followed_by_text_in_the_covered_part() -> None:
    h = History()
    covered = [h.user(), h.calls("c1"), h.result("c1"), h.assistant("done")]
    u2 = h.user()
    chosen = plan(h.messages, 0)
    assert chosen is not None
    assert seqs(chosen.covered) == seqs(covered)
    assert seqs(chosen.tail) == seqs([u2])


def test_plan_treats_an_unanswered_call_as_part_of_an_exchange() -> None:
    """A cancelled turn leaves a call without a result; it is not covered either."""
    h = History()
    u1, call, u2 = h.user(), h.calls("c1"), h.user()
    chosen = plan(h.messages, 0)
    assert chosen is not None
    assert seqs(chosen.covered) == seqs([u1])
    assert seqs(chosen.tail) == seqs([call, u2])


def test_plan_of_a_history_that_opens_with_a_tool_exchange_is_none() -> None:
    h = History()
    h.calls("c1"), h.result("c1"), h.user()
    assert plan(h.messages, 0) is None


_STEP = st.sampled_from(["user", "assistant", "tools1", "tools2", "cancelled"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_STEP, max_size=25), st.integers(min_value=0, max_value=30))
def test_plan_invariants_on_random_histories(steps: list[str], after_index: int) -> None:
    """Whatever the history: covered + tail is exactly what follows the previous boundary, the
    tail keeps the last user message, and no tool result is separated from its call."""
    h = History()
    n = 0
    for step in steps:
        if step == "user":
            h.user()
        elif step == "assistant":
            h.assistant()
        else:
            count = {"tools1": 1, "tools2": 2, "cancelled": 1}[step]
            ids = [f"c{n + i}" for i in range(count)]
            n += count
            h.calls(*ids)
            if step != "cancelled":
                for i in ids:
                    h.result(i)
    after = int(h.messages[after_index]["event_seq"]) if after_index < len(h.messages) else 0
    pending = [m for m in h.messages if int(m["event_seq"]) > after]
    chosen = plan(h.messages, after)
    if chosen is None:
        return
    assert seqs(chosen.covered) + seqs(chosen.tail) == seqs(pending)
    assert chosen.covered, "a plan covers something"
    assert chosen.through_seq == chosen.covered[-1]["event_seq"]
    assert all(int(m["event_seq"]) <= chosen.through_seq for m in chosen.covered)
    assert all(int(m["event_seq"]) > chosen.through_seq for m in chosen.tail)
    users = [m for m in pending if m["role"] == "user"]
    assert users[-1] in chosen.tail, "the last user message is kept"
    covered_calls = {c["id"] for m in chosen.covered for c in m.get("tool_calls") or []}
    tail_results = {m["tool_call_id"] for m in chosen.tail if m["role"] == "tool"}
    assert not covered_calls & tail_results, "a call and its result were split"
    last = chosen.covered[-1]
    assert last["role"] != "tool" and not last.get("tool_calls")


# -------------------------------------------------------------------------- summary request


def test_summary_request_asks_for_the_sections_and_carries_the_covered_part() -> None:
    h = History()
    h.user("fix src/app.py")
    h.calls("c1", content="Looking.")
    h.result("c1", "ok")
    h.assistant("x" * 30_000)
    system, user = summary_request("the earlier summary", h.messages)
    assert system["role"] == "system" and user["role"] == "user"
    for section in SECTIONS:
        assert f"## {section}" in system["content"]
    assert set(SECTIONS) == {"Goal", "Progress", "Key Decisions", "Next Steps", "Critical Context"}
    body = user["content"]
    assert body.startswith("Summary of the conversation before this part:\nthe earlier summary")
    assert "[user] fix src/app.py" in body
    assert '[assistant] Looking.\n[tool calls: bash({"command": "echo c1"})]' in body
    assert "[tool] ok" in body
    assert "x" * 20_000 in body and "x" * 20_001 not in body, "long messages are cut at 20K"


def test_summary_request_without_a_previous_summary() -> None:
    h = History()
    h.user("hello")
    (_, user) = summary_request(None, h.messages)
    assert user["content"] == "[user] hello"


# ------------------------------------------------------------------------------- checkpoint


def test_checkpoint_has_the_current_format() -> None:
    made = checkpoint("S", 42, "d" * 64, "standalone", 900, 100)
    assert made["version"] == CHECKPOINT_VERSION == 1
    assert isinstance(made["id"], str) and len(made["id"]) == 24
    assert made["through_seq"] == 42 and made["source_digest"] == "d" * 64
    assert made["summary"] == "S" and made["phase"] == "standalone"
    assert made["estimated_tokens_before"] == 900 and made["estimated_tokens_after"] == 100
    assert made["created_at"].endswith("Z")
    assert (made["projection_kind"], made["level"], made["segment_count"]) == (
        "text",
        "segmented",
        1,
    )
    folded = checkpoint("S", 42, "d", "pre_turn", 1, 1, folds_previous=True, segments=3)
    assert folded["id"] != made["id"]
    assert (folded["level"], folded["segment_count"]) == ("session", 3)


# ------------------------------------------------------------------ route and context window


def test_route_key_isolates_connection_base_url_and_model() -> None:
    row = {"connection_id": "conn1", "model": "gpt-x"}
    connection = {"base_url": "http://127.0.0.1:9/v1"}
    assert route_key(row, connection) == "conn1|openai|http://127.0.0.1:9/v1|gpt-x"
    keys = {
        route_key(row, connection),
        route_key({**row, "model": "gpt-y"}, connection),
        route_key({**row, "connection_id": "conn2"}, connection),
        route_key(row, {"base_url": "http://127.0.0.1:10/v1"}),
    }
    assert len(keys) == 4
    assert route_key({"connection_id": None, "model": "m"}, {}) == "|openai||m"


def test_context_window_from_the_connection_model_settings() -> None:
    connection = {
        "model_settings": {
            "small": {"context_window": 600},
            "other": {"max_input_tokens": "8000"},
            "none": {},
        }
    }
    assert context_window(connection, "small") == 600
    assert context_window(connection, "other") == 8000
    assert context_window(connection, "none") is None
    assert context_window(connection, "missing") is None
    assert context_window({}, "small") is None
    assert context_window({"model_settings": None}, "small") is None


# ------------------------------------------------------------------------------ context.build


def test_to_openai_converts_each_role() -> None:
    assert to_openai({"role": "user", "content": "hi", "created_at": "t"}) == {
        "role": "user",
        "content": "hi",
    }
    assert to_openai({"role": "user", "content": "hi", "model_content": "hi [+file]"}) == {
        "role": "user",
        "content": "hi [+file]",
    }
    assert to_openai({"role": "assistant", "content": ""}) == {
        "role": "assistant",
        "content": None,
    }
    call: ToolCall = {"id": "c1", "name": "read", "input": {"path": "a"}}
    converted = to_openai({"role": "assistant", "content": "x", "tool_calls": [call]})
    assert converted == {
        "role": "assistant",
        "content": "x",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "a"}'},
            }
        ],
    }
    assert to_openai({"role": "tool", "tool_call_id": "c1", "content": "ok"}) == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "ok",
    }
    # A hook's note (a Stop hook's reason) reaches the model as a system message.
    assert to_openai({"role": "system", "content": "x"}) == {"role": "system", "content": "x"}
    assert to_openai(cast(Message, {"content": "x"})) is None  # a message without a role


def test_build_without_a_checkpoint_is_the_system_prompt_and_every_message() -> None:
    h = History()
    h.user("one"), h.calls("c1"), h.result("c1", "r"), h.assistant("two")
    messages = build(system_message(CWD), h.messages)
    assert messages[0] == system_message(CWD)
    assert str(CWD) in messages[0]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[1:] == [to_openai(m) for m in h.messages]


def test_build_with_a_checkpoint_puts_the_summary_in_place_of_what_it_covers() -> None:
    h = History()
    h.user("old question"), h.assistant("old answer")
    through = h.user("covered too")
    call, result, u = h.calls("c1"), h.result("c1", "r"), h.user("new question")
    cp = cast(Checkpoint, {"summary": "## Goal\nship it", "through_seq": through["event_seq"]})
    messages = build(system_message(CWD), h.messages, cp)
    assert messages[0] == system_message(CWD)
    assert messages[1] == summary_message("## Goal\nship it")
    assert messages[1] == {
        "role": "user",
        "content": "Summary of the earlier conversation (compacted):\n\n## Goal\nship it",
    }
    assert messages[2:] == [to_openai(call), to_openai(result), to_openai(u)]
    assert "old" not in json.dumps(messages)


def test_build_with_a_checkpoint_at_the_head_is_the_summary_alone() -> None:
    h = History()
    h.user(), h.assistant()
    cp = cast(Checkpoint, {"summary": "S", "through_seq": h.messages[-1]["event_seq"]})
    assert build(system_message(CWD), h.messages, cp) == [system_message(CWD), summary_message("S")]


def test_build_closes_calls_that_never_got_a_result() -> None:
    h = History()
    h.user()
    h.calls("c1", "c2")
    h.result("c2", "done")
    h.user("again")
    messages = build(system_message(CWD), h.messages)
    roles = [(m["role"], m.get("tool_call_id")) for m in messages]
    assert roles == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("user", None),
    ]
    assert messages[3]["content"] == "[not run: cancelled]"
    assert messages[4]["content"] == "done"


def test_estimate_of_a_compacted_input_is_smaller() -> None:
    h = History()
    for i in range(20):
        h.user(f"question {i} " + "q" * 200)
        h.assistant("a" * 1000)
    h.user("last")
    chosen = plan(h.messages, 0)
    assert chosen is not None
    cp = cast(Checkpoint, {"summary": "short", "through_seq": chosen.through_seq})
    compacted, raw = (
        build(system_message(CWD), h.messages, cp),
        build(system_message(CWD), h.messages),
    )
    assert estimate_tokens(compacted) < estimate_tokens(raw) / 10


# ----------------------------------------------------------------------- with the real store


def _store_roundtrip(tmp_path: Path) -> tuple[list[Message], Checkpoint | None, bool]:
    """Store a session of 3 exchanges, compact it as the Compactor does, load it back."""

    async def run() -> tuple[list[Message], Checkpoint | None, bool]:
        store = Store(tmp_path)
        store.open()
        try:
            await store.create_session(
                {
                    "id": "s1",
                    "phase": "idle",
                    "approval_mode": "manual",
                    "model": "m",
                    "created_at_ns": 1,
                    "updated_at_ns": 1,
                }
            )
            for i in range(3):
                for role in ("user", "assistant"):
                    message: Message = {"role": role, "content": f"{role[0]}{i}"}
                    await store.append(EventDraft("s1", k.MESSAGE_END, message))
            history = await store.history("s1")
            chosen = plan(history, 0)
            assert chosen is not None
            digest = await store.source_digest("s1", chosen.through_seq)
            before = estimate_tokens(history)
            after = estimate_tokens([summary_message("S"), *chosen.tail])
            made = checkpoint("S", chosen.through_seq, digest, "standalone", before, after)
            await store.append(EventDraft("s1", k.COMPACTION_COMPLETED, made))
            loaded = await store.checkpoint("s1")
            valid = store.db.call(lambda c: is_valid(c, "s1", made), write=False)
            return history, loaded, valid and loaded == made
        finally:
            store.close()

    return asyncio.run(run())


def test_a_checkpoint_made_like_the_compactor_does_is_accepted_by_the_store(
    tmp_path: Path,
) -> None:
    history, loaded, same = _store_roundtrip(tmp_path)
    assert loaded is not None and same
    messages = build(system_message(CWD), history, loaded)
    contents = [m["content"] for m in messages[1:]]
    assert contents == [summary_message("S")["content"], "u2", "a2"]
    assert loaded["estimated_tokens_before"] > loaded["estimated_tokens_after"]
