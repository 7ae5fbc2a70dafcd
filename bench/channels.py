"""Channels benchmark: a Telegram chat's first visible reply against the kernel's own first
delta, and 100 chats at once, through a real `foya serve` and a fake Bot API server.

Run from the repository root:

    .venv/bin/python -m bench.channels           # table
    .venv/bin/python -m bench.channels --json    # machine-readable results on stdout
    .venv/bin/python -m bench.channels --quick   # fewer pairs (~15 s)

The kernel long-polls the fake Bot API (tests/support/fake_telegram.py, `FOYA_TELEGRAM_API_URL`)
and answers from the fake provider (one short answer per turn). Alternating pairs:

- channel: a message is pushed into the fake's update queue; the time until the chat shows the
  reply's text (this process reads the fake's messages every millisecond);
- kernel: `POST /sessions/{id}/turns` on the same kernel; the time until its first
  `message_delta` arrives over the session's SSE stream.

The target: the channel's p50 at most one edit interval (Telegram: 1 s) above the kernel's.
Then 100 allowed chats send one message each at once (each creates its session); the
kernel's event-loop lag p99 while they run is read from its `foya_event_loop_lag_seconds`
histogram (target 20 ms). Traffic goes only to 127.0.0.1 and the Unix socket; every process
is stopped by PID.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
from typing import Any

from bench.fakes import API_KEY, FakeProvider, FakeTelegram, answer, visible
from bench.fakes import TELEGRAM_TOKEN as TOKEN
from bench.harness import KernelProcess, Processes, say, workspace
from bench.report import Row, at_most, finish, python, text
from bench.subagents import lag_buckets, lag_summary, wait_for

MODEL = "bench-channels"
EDIT_INTERVAL_MS = 1000.0
LAG_TARGET_MS = 20.0
CHATS = 100
CHAT = 5
REPLY = "pong"


def shown(tg: FakeTelegram, chat: int, needle: str) -> bool:
    return any(needle in visible(t) for _, t, _ in tg.messages(chat))


def channel_once(tg: FakeTelegram, fake: FakeProvider, i: int) -> float:
    """ms from the pushed update to the reply's text in the chat."""
    fake.push(MODEL, answer(f"{REPLY}-{i} done"))
    started = time.perf_counter()
    tg.push_message(chat=CHAT, text=f"ping {i}")
    while not shown(tg, CHAT, f"{REPLY}-{i}"):
        if time.perf_counter() - started > 30:
            raise RuntimeError("no reply in the chat after 30 s")
        time.sleep(0.001)
    took = (time.perf_counter() - started) * 1e3
    wait_for(lambda: shown(tg, CHAT, f"{REPLY}-{i} done") and not tg.pending(), "reply done")
    time.sleep(1.2)  # the turn's last edit, so the next pair starts idle
    return took


def kernel_once(kernel: KernelProcess, fake: FakeProvider, session: str, i: int) -> float:
    """ms from POST /turns to the first message_delta on the session's stream."""
    fake.push(MODEL, answer(f"{REPLY}-{i} done"))
    with kernel.http.stream("GET", f"/sessions/{session}/events") as stream:
        lines = stream.iter_lines()
        started = time.perf_counter()
        kernel.http.post(f"/sessions/{session}/turns", json={"message": f"ping {i}"})
        took = None
        for line in lines:
            if took is None and line.startswith("data:") and '"message_delta"' in line:
                took = (time.perf_counter() - started) * 1e3
            if '"turn_complete"' in line:
                break
    assert took is not None
    return took


def measure(args: argparse.Namespace) -> dict[str, Any]:
    procs = Processes()
    out: dict[str, Any] = {"channel_ms": [], "kernel_ms": []}
    with workspace() as work, FakeProvider.running() as fake, FakeTelegram.running() as tg:
        kernel = KernelProcess(procs, work, "channels", env={"FOYA_TELEGRAM_API_URL": tg.url})
        try:
            kernel.wait_ready()
            connection = kernel.connect(fake.base_url, API_KEY, [MODEL])
            body = {"kind": "telegram", "name": "bench", "token": TOKEN, "enabled": True,
                    "locale": "en-US", "connection_id": connection, "model": MODEL,
                    "allow_all": True}  # fmt: skip
            made = kernel.post("/channels", body)
            wait_for(lambda: kernel.http.get(f"/channels/{made['id']}").json()["status"]
                     == "running", "channel running")  # fmt: skip
            session = kernel.new_session(connection, MODEL)
            say("warm-up: 2 chat turns, 2 kernel turns ...")
            for i in range(2):
                channel_once(tg, fake, -1 - i)
                kernel_once(kernel, fake, session, -1 - i)
            for i in range(args.pairs):
                sides = ("channel", "kernel") if i % 2 == 0 else ("kernel", "channel")
                for side in sides:
                    if side == "channel":
                        out["channel_ms"].append(channel_once(tg, fake, i))
                    else:
                        out["kernel_ms"].append(kernel_once(kernel, fake, session, i))
                say(f"  pair {i + 1}/{args.pairs} done")
            say(f"{CHATS} chats at once ...")
            lag0 = lag_buckets(kernel)
            for _ in range(CHATS):
                fake.push(MODEL, answer(f"{REPLY}-many done"))
            started = time.perf_counter()
            for c in range(CHATS):
                tg.push_message(chat=1000 + c, text="ping", user=2000 + c)
            wait_for(lambda: all(shown(tg, 1000 + c, f"{REPLY}-many done") for c in range(CHATS)),
                     "every chat answered")  # fmt: skip
            out["many_s"] = round(time.perf_counter() - started, 2)
            out["lag"] = lag_summary(lag0, lag_buckets(kernel))
            out["kernel_log_problems"] = kernel.log_problems()
        finally:
            kernel.close()
            procs.stop_all()
    return out


def table_rows(results: dict[str, Any]) -> list[Row]:
    m = results["measure"]
    channel, kernel = statistics.median(m["channel_ms"]), statistics.median(m["kernel_ms"])
    lag = m["lag"]["p99_at_most_ms"]
    return [
        Row("first visible reply text (chat) vs first delta (kernel), p50 ms",
            f"{channel:.1f}", f"{kernel:.1f}", f"+{channel - kernel:.0f} ms",
            f"<= +{EDIT_INTERVAL_MS:g} ms", at_most(channel - kernel, EDIT_INTERVAL_MS)),
        Row(f"event-loop lag p99 while {CHATS} chats run at once, ms", f"<= {lag:g}",
            target=f"<= {LAG_TARGET_MS:g}", meets=at_most(lag, LAG_TARGET_MS)),
    ]  # fmt: skip


def render(results: dict[str, Any]) -> str:
    m = results["measure"]
    details = [
        f"pairs: {len(m['channel_ms'])}; chat ms {[round(x) for x in m['channel_ms']]}; "
        f"kernel ms {[round(x, 1) for x in m['kernel_ms']]}",
        f"{CHATS} chats answered in {m['many_s']} s; lag samples {m['lag']['samples']}, above "
        f"{LAG_TARGET_MS:g} ms: {m['lag']['over_target']}; kernel log problems: "
        f"{len(m['kernel_log_problems'])}; python {results['python']}",
        "",
    ]
    return text(["Channels: a Telegram chat (fake Bot API) through a real kernel"],
                table_rows(results), details)  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pairs", type=int, default=None)
    args = parser.parse_args(argv)
    args.pairs = args.pairs or (3 if args.quick else 10)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    results: dict[str, Any] = {"python": python(), "quick": args.quick, "cpus": os.cpu_count()}
    results["measure"] = measure(args)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
