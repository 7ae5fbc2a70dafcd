"""Turns benchmark: model deltas through a real `foya serve` turn vs straight from the provider.

Run from the repository root:

    .venv/bin/python -m bench.turns            # table on stdout, progress on stderr
    .venv/bin/python -m bench.turns --json     # machine-readable results on stdout
    .venv/bin/python -m bench.turns --quick    # 1 round, 10 TTFD pairs (~10 s)

Three processes besides this (orchestrating) one, all on 127.0.0.1 or a Unix socket:

- fake provider: this module in a hidden `--fake` mode, running the tests' `FakeProvider`
  (`tests/support/fake_provider.py`: raw ASGI under hypercorn on a free 127.0.0.1 port) with a
  `respond` hook. `POST /v1/chat/completions` with `stream: true` answers with a role chunk, N
  `chat.completion.chunk` frames whose `delta.content` is `f"{i:05d} "` (6 characters), a finish
  chunk, a usage chunk and `data: [DONE]`, each frame its own `send()` (as a real provider
  writes them), as fast as the socket takes them. N comes from the last user message,
  `deltas=N`. The frames are encoded once per N and then replayed as bytes, so the fake costs
  little CPU per delta.
- kernel: the real `python -m app serve --socket PATH` in a temporary data dir
  (FOYA_LOG_FORMAT=json, stdout to a file). A connection points at the fake
  (`POST /connections`, api_key "bench", models ["m"]); sessions use approval_mode full_access.
- client: this module in a hidden `--client` mode, taking commands as JSON lines on stdin. It runs
  both sides with the same code (httpx, `aiter_lines`, `json.loads` of every `data:` line):
  - direct: `POST /v1/chat/completions` straight to the fake;
  - kernel: `GET /sessions/{id}/events` over the Unix socket, wait for the `: ok` comment (the
    subscription is live), then `POST /sessions/{id}/turns {"message": "deltas=N"}`, count
    `message_delta` frames until `turn_complete`, then wait for the `session_updated` that sets
    the phase back to idle before the next turn.

Timestamps are `time.monotonic_ns()`, all taken in the client process.

1. Throughput: a turn of 20k deltas. deltas/s = deltas of text received / (last delta frame -
   first delta frame), as the client sees them; text is counted in deltas of 6 characters, so
   the figure stays right should the kernel ever merge deltas into fewer frames (frames are
   reported too). The kernel publishes deltas lossily (`Broker.publish`: dropped when the
   subscriber's 256-slot buffer is full), so the kernel side also reports how many of the 20k
   arrived, the broker's `foya_broker_dropped_deltas_total` over the run (from `/metrics`),
   whether the joined `message_delta` texts and the assistant `message_end` each hold the
   complete text, and how fast the kernel consumed the provider's stream whatever reached the
   client (20k / first delta received -> assistant `message_end` received). A warm-up run per
   side, then rounds alternating direct/kernel (order flipped every round); medians over rounds.
   Every kernel throughput turn gets a fresh session, so every request carries the same short
   history. CPU seconds of the kernel, the fake and the client over each run come from
   /proc/PID/stat; before each run the script waits (bounded, `--quiet-budget`) for other load
   on the machine to drop.
2. Time to first delta: 15 pairs of short turns (20 deltas), alternating, after two warm-up
   pairs. Direct: request sent -> first content delta. Kernel: POST /turns sent -> first
   `message_delta` frame. Target: p50 kernel / p50 direct; the overhead, p50 of (kernel -
   direct) over pairs, is shown beside it. These turns share one
   session (a conversation of short messages). The median receipt time of every event kind of
   the kernel turn (POST answered, session_updated, message_end user, turn_started, first delta,
   ...) is printed as a timeline: where the time to first delta goes. The fake writes when
   each request was in (`--marks`, its file of marks), so the timeline of both sides also shows
   when the provider got the request ("provider got the request"; its first bytes follow).

`--profile py-spy|cprofile` then profiles the kernel over one more 20k-delta turn and over 30
short turns, and summarises where its time went. py-spy (PATH or /tmp/pyspy/bin/py-spy) samples
every thread of the running kernel from outside; cProfile starts a fresh kernel per phase under
`python -m cProfile` (event-loop thread only, startup included in its totals).

Processes are not pinned (`--pin` pins the kernel to one core, fake and client to the other).
Traffic goes only to 127.0.0.1 and the Unix socket. Every process started is stopped by PID
(SIGTERM, then SIGKILL) in a finally block; the kernel also gets FOYA_PARENT_PID. No assertion is
made on any figure: targets are printed next to the results.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import signal
import statistics
import sys
import time
from typing import Any

import httpx

from bench.fakes import Chunk, FakeProvider, Recorded, Script, encode, garbage, reply, usage
from bench.harness import (
    CPU,
    HOST,
    SSE,
    Child,
    KernelProcess,
    Processes,
    Quiet,
    now_ns,
    say,
    serve_json_lines,
    workspace,
)
from bench.profiles import cprofile_summary, find_pyspy, pyspy, pyspy_summary
from bench.report import Row, finish, fs_type, percentile, python, rows_of, table, verdicts

MODEL = "m"
API_KEY = "bench"
TARGET_RATE_RATIO = 0.85  # kernel / direct deltas/s, at least
TARGET_TTFD_RATIO = 2.0  # p50 of kernel / p50 of direct time to first delta, at most
RUN_TIMEOUT = 60.0  # seconds, any one run


DELTA_CHARS = 6


def delta_text(i: int) -> str:
    """The i-th content delta: always DELTA_CHARS characters, no JSON escaping needed."""
    return f"{i % 100_000:05d} "


def expected_text(n: int) -> str:
    return "".join(delta_text(i) for i in range(n))


_DELTAS = re.compile(r"deltas=(\d+)")


# ---------------------------------------------------------------------------------------------
# Fake provider (hidden `--fake`): the tests' FakeProvider, prints {"port": N} once listening


@functools.lru_cache(maxsize=8)
def frames(model: str, n: int) -> tuple[bytes, ...]:
    """The streamed answer to `deltas=n`, encoded once (the fake then only sends bytes)."""
    ident = "chatcmpl-bench"
    chunks = [Chunk({"role": "assistant", "content": ""})]
    chunks += [Chunk({"content": delta_text(i)}) for i in range(n)]
    chunks.append(Chunk({}, "stop"))
    out = [encode(c, ident, model) for c in chunks]
    out.append(encode(usage(10, n), ident, model))
    return tuple(out)


_MARKS: list[Any] = []  # the fake's marks file, once `--marks` opened it


def _respond(record: Recorded) -> Script:
    if _MARKS:  # when the request was in (the answer's first bytes follow at once)
        mark = {"t": now_ns(), "streaming": record.streaming}
        _MARKS[0].write(json.dumps(mark) + "\n")
    users = [m for m in record.messages if m.get("role") == "user"]
    found = _DELTAS.search(str(users[-1].get("content") or "")) if users else None
    n = int(found.group(1)) if found else 10
    if not record.streaming:
        return reply(expected_text(n))
    return [garbage(frame) for frame in frames(record.model or MODEL, n)]


def _fake_main(deltas: int, marks: str | None) -> None:
    frames(MODEL, deltas)  # encoded before the first request, not during a measured one
    if marks:
        _MARKS.append(open(marks, "a", buffering=1))  # noqa: SIM115 (open for the whole run)
    fake = FakeProvider()
    fake.models = [MODEL]
    fake.respond = _respond
    fake.keep_alive_timeout = 300  # never close the kernel's pooled connection mid-benchmark
    stop = False

    def halt(*_: object) -> None:
        nonlocal stop
        stop = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, halt)
    fake.start()
    try:
        print(json.dumps({"port": fake.port, "pid": os.getpid()}), flush=True)
        while not stop:
            time.sleep(0.1)
    finally:
        fake.stop()


# ---------------------------------------------------------------------------------------------
# Client (hidden `--client`): one process, both sides, commands as JSON lines on stdin


class ClientWorker:
    def __init__(self) -> None:
        self.direct = httpx.AsyncClient()
        self.kernel = httpx.AsyncClient()

    async def run(self, cmd: dict[str, Any]) -> dict[str, Any]:
        op = cmd["op"]
        if op == "setup":
            timeout = httpx.Timeout(RUN_TIMEOUT)
            self.direct = httpx.AsyncClient(
                base_url=f"http://{HOST}:{cmd['fake_port']}", timeout=timeout, trust_env=False
            )
            self.kernel = httpx.AsyncClient(
                base_url="http://foya",
                transport=httpx.AsyncHTTPTransport(uds=cmd["socket"]),
                timeout=timeout,
                trust_env=False,
            )
            return {"ok": True}
        if op == "direct":
            return await asyncio.wait_for(self.direct_run(cmd["n"]), RUN_TIMEOUT)
        if op == "kernel":
            return await asyncio.wait_for(self.kernel_run(cmd["session"], cmd["n"]), RUN_TIMEOUT)
        raise ValueError(f"unknown op {op!r}")

    async def direct_run(self, n: int) -> dict[str, Any]:
        body = {
            "model": MODEL,
            "messages": [
                {"role": "system", "content": "You are a benchmark."},
                {"role": "user", "content": f"deltas={n}"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        headers = {"authorization": f"Bearer {API_KEY}"}
        parts: list[str] = []
        first = last = 0
        finish = None
        usage = None
        done = False
        t0 = now_ns()
        async with self.direct.stream(
            "POST", "/v1/chat/completions", json=body, headers=headers
        ) as resp:
            t_head = now_ns()
            if resp.status_code != 200:
                return {"problem": f"HTTP {resp.status_code}"}
            async for line in resp.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk.get("choices") or ():
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        last = now_ns()
                        first = first or last
                        parts.append(text)
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        t_end = now_ns()
        text = "".join(parts)
        problem = None
        if not done or finish != "stop" or usage is None:
            problem = f"incomplete stream (done {done}, finish {finish}, usage {bool(usage)})"
        return {
            "t0": t0,
            "first": first,
            "last": last,
            "end": t_end,
            "marks": {"response_head": t_head - t0},
            "received": len(parts),
            "received_chars": len(text),
            "complete": text == expected_text(n),
            "text_len": len(text),
            "problem": problem,
        }

    async def kernel_run(self, session: str, n: int) -> dict[str, Any]:
        parts: list[str] = []
        first = last = 0
        final: str | None = None
        complete_at = 0
        turn_status = None
        kinds: dict[str, int] = {}
        marks: dict[str, int] = {}  # first receipt of each kind (or "kind:detail"), ns after t0
        post: asyncio.Task[httpx.Response] | None = None
        t0 = 0
        async with self.kernel.stream(
            "GET", f"/sessions/{session}/events", headers={"accept": "text/event-stream"}
        ) as resp:
            if resp.status_code != 200:
                return {"problem": f"events: HTTP {resp.status_code}"}
            sse = SSE()
            lines = resp.aiter_lines()
            async for line in lines:
                sse.feed(line)
                if sse.subscribed:
                    break  # `: ok`: subscribed
            t0 = now_ns()
            post = asyncio.create_task(
                self.kernel.post(f"/sessions/{session}/turns", json={"message": f"deltas={n}"})
            )
            post.add_done_callback(
                lambda _: marks.setdefault("POST /turns answered", now_ns() - t0)
            )
            async for line in lines:
                frame = sse.feed(line)
                if frame is None:
                    continue
                kind = frame.event
                if kind == "message_delta":
                    t = now_ns()
                    first = first or t
                    last = t
                    parts.append(frame.json()["payload"])
                    continue
                kinds[kind] = kinds.get(kind, 0) + 1
                payload = frame.json().get("payload")
                mark = kind
                if kind == "message_end":
                    mark = f"message_end {payload.get('role')}"
                elif kind == "session_updated":
                    mark = f"session_updated {payload.get('phase')}"
                marks.setdefault(mark, now_ns() - t0)
                if kind == "message_end" and payload.get("role") == "assistant":
                    final = payload.get("content")
                elif kind == "turn_complete":
                    complete_at = now_ns()
                    turn_status = payload.get("status")
                elif kind == "session_updated" and complete_at and payload.get("phase") == "idle":
                    break
                elif kind == "error":
                    turn_status = f"error: {payload}"
        t_end = now_ns()
        if post is None:
            return {"problem": "the event stream ended before `: ok`"}
        answer = await post
        accepted = answer.json().get("status") if answer.status_code == 200 else None
        problems = []
        if answer.status_code != 200 or accepted != "started":
            problems.append(f"POST /turns: HTTP {answer.status_code} {accepted}")
        if turn_status != "completed":
            problems.append(f"turn {turn_status}")
        want = expected_text(n)
        received_text = "".join(parts)
        return {
            "t0": t0,
            "first": first,
            "last": last,
            "complete_at": complete_at,
            "end": t_end,
            "received": len(parts),
            "marks": marks,
            "received_chars": len(received_text),
            "received_text_matches": received_text == want,
            "complete": final == want,
            "text_len": len(final or ""),
            "other_events": kinds,
            "problem": "; ".join(problems) or None,
        }


async def _client_main() -> None:
    await serve_json_lines(ClientWorker().run)


# ---------------------------------------------------------------------------------------------
# Measurements


QUIET = Quiet(0.0)
CALL_TIMEOUT = RUN_TIMEOUT + 10


def connect(kernel: KernelProcess, fake_port: int) -> str:
    """The kernel's connection to the fake; its id."""
    return kernel.connect(f"http://{HOST}:{fake_port}/v1", API_KEY, [MODEL])


def dropped(kernel: KernelProcess) -> float:
    return kernel.metric("foya_broker_dropped_deltas_total")


def _ms(ns: int) -> float:
    return round(ns / 1e6, 3)


def throughput_run(
    side: str, client: Child, kernel: KernelProcess, connection: str, n: int, pids: dict[str, int]
) -> dict[str, Any]:
    dropped0 = dropped(kernel)
    cmd: dict[str, Any] = {"op": side, "n": n}
    if side == "kernel":
        cmd["session"] = kernel.new_session(connection, MODEL)
    QUIET.wait()
    with CPU(pids) as cpu:
        try:
            r = client.call(cmd, CALL_TIMEOUT)
        except RuntimeError as exc:  # a timeout or a client failure: record it, go on
            r = {"problem": str(exc)[:300]}
    if "t0" not in r or not r.get("first"):
        problem = r.get("problem") or "no delta received"
        return {"problem": problem, "rate": 0.0, "consumed_rate": 0.0, "received": 0}
    span = max(1, r["last"] - r["first"])
    out = {
        # Frames (kernel: message_delta events; direct: chunks with content) ...
        "received": r["received"],
        # ... and the text they carried, counted in deltas of DELTA_CHARS: the rate stays right
        # if the kernel ever merges several deltas into one frame.
        "received_deltas_of_text": r["received_chars"] // DELTA_CHARS,
        "rate": round(r["received_chars"] / DELTA_CHARS / (span / 1e9), 1),
        "first_to_last_s": round(span / 1e9, 4),
        "ttfd_ms": _ms(r["first"] - r["t0"]),
        "request_to_last_delta_s": round((r["last"] - r["t0"]) / 1e9, 4),
        "request_to_end_s": round((r["end"] - r["t0"]) / 1e9, 4),
        "complete": r["complete"],
        "text_len": r["text_len"],
        "cpu_s": {k: round(v, 3) for k, v in cpu.used.items()},
        "cpu_us_per_delta": {
            k: round(v / max(1, n) * 1e6, 2) for k, v in cpu.used.items() if k != "others"
        },
        "others_cores": round(cpu.used["others"] / max(cpu.seconds, 1e-9), 3),
        "problem": r["problem"],
    }
    if side == "kernel":
        out["dropped_by_broker"] = dropped(kernel) - dropped0
        out["received_text_matches"] = r["received_text_matches"]
        out["post_to_turn_complete_s"] = round((r["complete_at"] - r["t0"]) / 1e9, 4)
        # How fast the kernel consumed the provider's stream, whatever reached the client: all
        # n deltas between the first delta received and the assistant message_end received.
        end = r["t0"] + r["marks"].get("message_end assistant", r["last"] - r["t0"])
        out["consumed_rate"] = round(n / (max(1, end - r["first"]) / 1e9), 1)
        out["other_events"] = r["other_events"]
    else:
        out["consumed_rate"] = out["rate"]
    return out


def throughput(
    args: argparse.Namespace,
    client: Child,
    kernel: KernelProcess,
    connection: str,
    pids: dict[str, int],
) -> dict[str, Any]:
    n = args.deltas
    runs: dict[str, list[dict[str, Any]]] = {"direct": [], "kernel": []}
    for side in ("direct", "kernel"):
        warm = throughput_run(side, client, kernel, connection, max(500, n // 10), pids)
        say(f"  warm-up {side}: {warm['rate']:,.0f} deltas/s")
    for round_no in range(1, args.rounds + 1):
        order = ("direct", "kernel") if round_no % 2 else ("kernel", "direct")
        for side in order:
            run = throughput_run(side, client, kernel, connection, n, pids)
            runs[side].append(run)
            extra = ""
            if side == "kernel":
                extra = (
                    f", dropped {run.get('dropped_by_broker', 0):,.0f}, "
                    f"message_end complete {run.get('complete')}"
                )
            say(
                f"  round {round_no} {side}: {run['rate']:,.0f} deltas/s, "
                f"{run['received']:,}/{n:,} received{extra}, "
                f"cpu/delta us {run.get('cpu_us_per_delta')}"
                + (f"  PROBLEM {run['problem']}" if run.get("problem") else "")
            )
            time.sleep(0.1)
    out: dict[str, Any] = {"deltas": n, "rounds": args.rounds, "runs": runs}
    for side, rs in runs.items():
        out[side] = {
            "rate_median": statistics.median(r["rate"] for r in rs),
            "received_median": statistics.median(r["received"] for r in rs),
            "received_min": min(r["received"] for r in rs),
            "text_deltas_median": statistics.median(
                r.get("received_deltas_of_text", 0) for r in rs
            ),
            "text_deltas_min": min(r.get("received_deltas_of_text", 0) for r in rs),
            "all_complete": all(r.get("complete") for r in rs),
            "consumed_rate_median": statistics.median(r.get("consumed_rate", 0.0) for r in rs),
            "request_to_end_s_median": statistics.median(
                r.get("request_to_end_s", 0.0) for r in rs
            ),
            "cpu_us_per_delta_median": {
                k: statistics.median(r["cpu_us_per_delta"][k] for r in rs)
                for k in rs[0].get("cpu_us_per_delta", {})
            },
            "others_cores_max": max(r.get("others_cores", 0.0) for r in rs),
            "problems": [r["problem"] for r in rs if r.get("problem")],
        }
    k = out["kernel"]
    k["all_received_text_matches"] = all(r.get("received_text_matches") for r in runs["kernel"])
    k["dropped_by_broker_median"] = statistics.median(
        r.get("dropped_by_broker", 0) for r in runs["kernel"]
    )
    k["post_to_turn_complete_s_median"] = statistics.median(
        r.get("post_to_turn_complete_s", 0.0) for r in runs["kernel"]
    )
    out["ratio"] = round(k["rate_median"] / out["direct"]["rate_median"], 3)
    out["ratio_per_round"] = [
        round(a["rate"] / b["rate"], 3) if b["rate"] else None
        for a, b in zip(runs["kernel"], runs["direct"], strict=True)
    ]
    return out


def _provider_in(path: str, offset: int, t0: int) -> int | None:
    """ns from `t0` to the fake's receipt of the first streaming request after it (a title's
    completion may arrive meanwhile: it is not streamed), from the marks after `offset`."""
    if not t0 or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        f.seek(offset)
        for line in f:
            mark = json.loads(line)
            if mark["streaming"] and mark["t"] >= t0:
                return int(mark["t"]) - t0
    return None


def ttfd(
    args: argparse.Namespace, client: Child, kernel: KernelProcess, connection: str
) -> dict[str, Any]:
    n = args.short_deltas
    session = kernel.new_session(connection, MODEL)
    pairs: list[dict[str, Any]] = []
    problems: list[str] = []
    marks: dict[str, dict[str, list[float]]] = {"kernel": {}, "direct": {}}
    for i in range(args.warmup_pairs + args.pairs):
        order = ("direct", "kernel") if i % 2 else ("kernel", "direct")
        got: dict[str, float] = {}
        for side in order:
            cmd: dict[str, Any] = {"op": side, "n": n}
            if side == "kernel":
                cmd["session"] = session
            seen = os.path.getsize(args.marks) if os.path.exists(args.marks) else 0
            try:
                r = client.call(cmd, CALL_TIMEOUT)
            except RuntimeError as exc:  # a timeout or a client failure: record it, go on
                r = {"problem": str(exc)[:300]}
            provider_in = _provider_in(args.marks, seen, r.get("t0", 0))
            if provider_in is not None:
                r.setdefault("marks", {})["provider got the request"] = provider_in
            got_all = r.get("received_chars") == n * DELTA_CHARS
            if r.get("problem") or not r.get("complete") or not got_all:
                problems.append(
                    f"pair {i} {side}: {r.get('problem')}, received {r.get('received')}, "
                    f"complete {r.get('complete')}"
                )
            if "t0" in r and r.get("first"):
                got[side] = (r["first"] - r["t0"]) / 1e6
                if i >= args.warmup_pairs:
                    for name, ns in r.get("marks", {}).items():
                        marks[side].setdefault(name, []).append(ns / 1e6)
                    marks[side].setdefault("first delta", []).append(got[side])
            time.sleep(0.02)
        if i >= args.warmup_pairs and len(got) == 2:
            pairs.append({**got, "overhead": got["kernel"] - got["direct"]})
    if not pairs:
        return {"pairs": 0, "problems": problems}

    def stats(key: str) -> dict[str, float]:
        values = [p[key] for p in pairs]
        return {
            "p50_ms": round(statistics.median(values), 3),
            "p90_ms": round(percentile(values, 0.9), 3),
            "min_ms": round(min(values), 3),
            "max_ms": round(max(values), 3),
        }

    out = {
        "deltas_per_turn": n,
        "pairs": len(pairs),
        "direct": stats("direct"),
        "kernel": stats("kernel"),
        "overhead": stats("overhead"),
        "overhead_runs_ms": [round(p["overhead"], 3) for p in pairs],
        # Median receipt time of each event kind after the request was sent (kernel side), in
        # the order they arrive: where the time to first delta goes.
        "timeline_p50_ms": {
            side: dict(
                sorted(
                    ((name, round(statistics.median(v), 3)) for name, v in m.items()),
                    key=lambda kv: kv[1],
                )
            )
            for side, m in marks.items()
        },
        "problems": problems,
    }
    say(
        f"  TTFD p50: kernel {out['kernel']['p50_ms']:.2f} ms, direct "
        f"{out['direct']['p50_ms']:.2f} ms, overhead p50 {out['overhead']['p50_ms']:.2f} ms"
    )
    return out


# ---------------------------------------------------------------------------------------------
# Profiling


PROFILE_SHORT_TURNS = 30


def _short_turns(
    client: Child, kernel: KernelProcess, connection: str, n: int, turns: int
) -> dict[str, Any]:
    session = kernel.new_session(connection, MODEL)
    ttfd_ms = []
    for _ in range(turns):
        r = client.call({"op": "kernel", "session": session, "n": n}, CALL_TIMEOUT)
        if r.get("first"):
            ttfd_ms.append((r["first"] - r["t0"]) / 1e6)
    return {
        "turns": turns,
        "deltas": n,
        "ttfd_p50_ms": round(statistics.median(ttfd_ms), 3) if ttfd_ms else None,
    }


def profile(
    args: argparse.Namespace,
    procs: Processes,
    workdir: str,
    client: Child,
    kernel: KernelProcess,
    connection: str,
    fake_port: int,
    pids: dict[str, int],
) -> dict[str, Any]:
    """Two phases under the profiler: one throughput turn, then short turns (TTFD path).

    py-spy attaches to the running kernel once per phase. cProfile needs a fresh kernel per
    phase (`python -m cProfile -m app serve`, stats written when SIGTERM ends it cleanly).
    """
    out: dict[str, Any] = {"method": args.profile}
    where = args.profile_dir or workdir
    phases: list[tuple[str, Any]] = [
        ("throughput", lambda k, c, p: throughput_run("kernel", client, k, c, args.deltas, p)),
        (
            "short_turns",
            lambda k, c, p: _short_turns(client, k, c, args.short_deltas, PROFILE_SHORT_TURNS),
        ),
    ]
    for phase, run_phase in phases:
        if args.profile == "py-spy":
            raw = os.path.join(where, f"kernel-{phase}.pyspy.txt")
            with pyspy(args.py_spy, kernel.proc.pid, raw, procs, 1000) as spied:
                time.sleep(1.0)  # attach
                run = run_phase(kernel, connection, pids)
            out[phase] = spied or {"run": run, **pyspy_summary(raw)}
            continue
        stats_path = os.path.join(where, f"kernel-{phase}.pstats")
        prof = KernelProcess(
            procs, workdir, f"kernel-cprofile-{phase}", cpu=args.cpus[0], profile_to=stats_path
        )
        try:
            prof.wait_ready()
            conn = connect(prof, fake_port)
            client.call(
                {"op": "setup", "fake_port": fake_port, "socket": prof.socket}, CALL_TIMEOUT
            )
            _short_turns(client, prof, conn, args.short_deltas, 2)  # warm-up
            run = run_phase(prof, conn, {**pids, "kernel": prof.proc.pid})
        finally:
            prof.close()
            client.call(
                {"op": "setup", "fake_port": fake_port, "socket": kernel.socket}, CALL_TIMEOUT
            )
        if not os.path.exists(stats_path):
            out[phase] = {"error": "cProfile wrote nothing (kernel did not exit cleanly?)"}
        else:
            out[phase] = {"run": run, **cprofile_summary(stats_path)}
    return out


# ---------------------------------------------------------------------------------------------
# Output


def table_rows(results: dict[str, Any]) -> list[Row]:
    """The headline figures; the rate ratio and the TTFD overhead have targets."""
    tp, td = results["throughput"], results["ttfd"]
    d, k = tp["direct"], tp["kernel"]
    n = tp["deltas"]
    kc, dc = k["cpu_us_per_delta_median"], d["cpu_us_per_delta_median"]
    rows: list[tuple[str, str, str, str, str]] = [
        (
            f"deltas/s, {n:,}-delta turn (text received, first -> last delta)",
            f"{k['rate_median']:,.0f}",
            f"{d['rate_median']:,.0f}",
            f"{tp['ratio']:.2f}x",
            f">= {TARGET_RATE_RATIO}x",
        ),
        (
            f"  provider deltas consumed/s ({n:,} / first delta -> message_end)",
            f"{k['consumed_rate_median']:,.0f}",
            f"{d['consumed_rate_median']:,.0f}",
            f"{k['consumed_rate_median'] / max(d['consumed_rate_median'], 1e-9):.2f}x",
            "",
        ),
        (
            f"  deltas received of {n:,}, by text (median; min)",
            f"{k['text_deltas_median']:,.0f}; {k['text_deltas_min']:,}",
            f"{d['text_deltas_median']:,.0f}; {d['text_deltas_min']:,}",
            f"{k['text_deltas_median'] / n:.1%}",
            "",
        ),
        (
            "  frames carrying them (message_delta / content chunks), median",
            f"{k['received_median']:,.0f}",
            f"{d['received_median']:,.0f}",
            "",
            "",
        ),
        (
            "  dropped by the broker (foya_broker_dropped_deltas_total)",
            f"{k['dropped_by_broker_median']:,.0f}",
            "",
            "",
            "",
        ),
        (
            "  final text complete (message_end / stream) in every round",
            "yes" if k["all_complete"] else "NO",
            "yes" if d["all_complete"] else "NO",
            "",
            "",
        ),
        (
            "  message_delta texts joined == full text, every round",
            "yes" if k["all_received_text_matches"] else "NO",
            "",
            "",
            "",
        ),
        (
            "  request sent -> stream done, s (kernel: idle again)",
            f"{k['request_to_end_s_median']:.3f}",
            f"{d['request_to_end_s_median']:.3f}",
            f"{k['request_to_end_s_median'] / max(d['request_to_end_s_median'], 1e-9):.2f}x",
            "",
        ),
        (
            "  CPU us per delta: kernel process",
            f"{kc.get('kernel', 0):.1f}",
            "",
            "",
            "",
        ),
        (
            "  CPU us per delta: client process",
            f"{kc.get('client', 0):.1f}",
            f"{dc.get('client', 0):.1f}",
            "",
            "",
        ),
        (
            "  CPU us per delta: fake provider",
            f"{kc.get('fake', 0):.1f}",
            f"{dc.get('fake', 0):.1f}",
            "",
            "",
        ),
    ]
    if td.get("pairs"):
        rows += [
            (
                f"time to first delta p50 ms ({td['deltas_per_turn']}-delta turns)",
                f"{td['kernel']['p50_ms']:.2f}",
                f"{td['direct']['p50_ms']:.2f}",
                f"{_ttfd_ratio(td):.2f}x",
                f"<= {TARGET_TTFD_RATIO:g}x",
            ),
            (
                f"  TTFD overhead (kernel - direct), p50 of {td['pairs']} pairs, ms",
                f"{td['overhead']['p50_ms']:.2f}",
                "",
                "",
                "",
            ),
            (
                "  TTFD overhead p90 / max, ms",
                f"{td['overhead']['p90_ms']:.2f} / {td['overhead']['max_ms']:.2f}",
                "",
                "",
                "",
            ),
        ]
    meets: list[bool | None] = [tp["ratio"] >= TARGET_RATE_RATIO] + [None] * (len(rows) - 1)
    if td.get("pairs"):
        meets[-3] = _ttfd_ratio(td) <= TARGET_TTFD_RATIO
    return [Row(*r, meets=m) for r, m in zip(rows, meets, strict=True)]


def _ttfd_ratio(td: dict[str, Any]) -> float:
    return float(td["kernel"]["p50_ms"]) / max(float(td["direct"]["p50_ms"]), 1e-9)


def render(results: dict[str, Any]) -> str:
    tp, td, meta = results["throughput"], results["ttfd"], results["meta"]
    k, n = tp["kernel"], tp["deltas"]
    rows = rows_of(results)
    out = [
        f"Foya turns benchmark  ({meta['python']}, {meta['cpus']} CPUs, pinning: "
        f"{meta['pinning']}, data dir on {meta['data_fs']})",
        f"fake OpenAI-compatible provider: {n:,} content deltas of 6 chars, one SSE frame per "
        f"send; median of {tp['rounds']} alternating rounds; value = kernel, baseline = direct",
        "",
        *table(rows),
        "",
        "per round, deltas/s: "
        + "; ".join(
            f"{side} " + " ".join(f"{r['rate']:,.0f}" for r in tp["runs"][side])
            for side in ("kernel", "direct")
        )
        + "; received: "
        + " ".join(f"{r.get('received_deltas_of_text', 0):,}" for r in tp["runs"]["kernel"]),
        "per round, kernel/direct: "
        + " ".join(f"{x:.2f}x" if x is not None else "-" for x in tp["ratio_per_round"]),
        *verdicts(rows),
    ]
    if td.get("pairs"):
        out.append(
            "TTFD timeline, p50 ms after the request was sent: kernel "
            + ", ".join(f"{name} {ms:.1f}" for name, ms in td["timeline_p50_ms"]["kernel"].items())
            + "; direct "
            + ", ".join(f"{name} {ms:.1f}" for name, ms in td["timeline_p50_ms"]["direct"].items())
        )
    if k["text_deltas_min"] < n:
        out.append(
            f"FINDING: the SSE client missed up to {n - k['text_deltas_min']:,} of {n:,} deltas "
            "(dropped lossily by the broker); the final message_end text was "
            + ("complete." if k["all_complete"] else "NOT complete.")
        )
    problems = [f"throughput {s}: {p}" for s in ("kernel", "direct") for p in tp[s]["problems"]]
    problems += [f"ttfd: {p}" for p in td.get("problems", [])]
    problems += [f"kernel log: {p}" for p in meta.get("kernel_log_errors", [])]
    if problems:
        out.append("PROBLEMS: " + "; ".join(problems[:10]))
    other = max(tp[s]["others_cores_max"] for s in ("kernel", "direct"))
    if other > 0.1:
        out.append(f"NOTE: other processes used up to {other:.2f} cores during throughput runs")
    if "profile" in results:
        out += render_profile(results["profile"])
    out.append(
        f"\ntotal {meta['elapsed_s']:.0f} s (waited {meta['quiet_wait_s']:.1f} s for other load "
        f"to drop; {meta['runs_started_while_busy']} throughput runs started while others used "
        f">= {Quiet.THRESHOLD} cores)"
    )
    return "\n".join(out)


def render_profile(prof: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for phase in ("throughput", "short_turns"):
        part = prof.get(phase, {})
        run = part.get("run", {})
        if phase == "throughput":
            title = (
                f"one {run.get('received', '?')}-of-{results_deltas(run)} delta kernel turn, "
                f"{run.get('rate', 0):,.0f} deltas/s received under the profiler"
            )
        else:
            title = (
                f"{run.get('turns')} short kernel turns of {run.get('deltas')} deltas, TTFD p50 "
                f"{run.get('ttfd_p50_ms')} ms under the profiler"
            )
        out += ["", f"{prof['method']} profile, {title}:"]
        if "error" in part:
            out.append(f"  {part['error']}")
            continue
        if "threads" in part:
            out.append(
                "  threads: "
                + ", ".join(f"{t['where']} {t['share']:.0%}" for t in part["threads"])
                + f" of {part['samples']} samples (idle excluded)"
            )
            out.append("  innermost app/ frame (share of samples):")
            out += [f"    {r['share']:6.1%}  {r['where']}" for r in part["top_innermost_app"][:12]]
            out.append("  function anywhere on the stack (inclusive share, below the loop):")
            out += [f"    {r['share']:6.1%}  {r['where']}" for r in part["top_inclusive"][:25]]
        else:
            out.append(f"  total {part['total_s']} s in the event-loop thread; own time:")
            out += [
                f"    {r['share']:6.1%}  {r['self_s']:7.3f} s  {r['calls']:>8}  {r['where']}"
                for r in part["top_self"][:15]
            ]
            out.append("  cumulative, app/ functions:")
            out += [
                f"    {r['cum_s']:7.3f} s  {r['calls']:>8}  {r['where']}"
                for r in part["top_cumulative_app"][:15]
            ]
    return out


def results_deltas(run: dict[str, Any]) -> str:
    return f"{run.get('received', 0) + int(run.get('dropped_by_broker', 0)):,}"


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    p.add_argument("--quick", action="store_true", help=f"a short run: {QUICK}")
    p.add_argument("--deltas", type=int, default=20_000, help="deltas in a throughput turn")
    p.add_argument("--rounds", type=int, default=3, help="alternating throughput rounds")
    p.add_argument("--pairs", type=int, default=15, help="TTFD pairs (kernel, direct)")
    p.add_argument("--warmup-pairs", type=int, default=2)
    p.add_argument("--short-deltas", type=int, default=20, help="deltas in a TTFD turn")
    p.add_argument(
        "--quiet-budget",
        type=float,
        default=10.0,
        help="seconds, in total, to wait for other load to drop before runs (0: never wait)",
    )
    p.add_argument("--pin", action="store_true", help="kernel on one core, the rest on another")
    p.add_argument(
        "--profile",
        choices=("py-spy", "cprofile"),
        help="one more kernel throughput turn under a profiler, summarised after the table",
    )
    p.add_argument("--py-spy", default=None, help="py-spy binary (default: PATH, /tmp/pyspy)")
    p.add_argument("--profile-dir", help="keep profiler output here (default: discarded)")
    p.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--marks", help=argparse.SUPPRESS)  # the fake's file of request marks
    p.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run_all(
    args: argparse.Namespace, procs: Processes, workdir: str, results: dict[str, Any]
) -> None:
    me = [sys.executable, "-m", "bench.turns"]
    args.marks = os.path.join(workdir, "fake-marks.jsonl")
    fake_argv = [*me, "--fake", "--deltas", str(args.deltas), "--marks", args.marks]
    fake = Child("fake", fake_argv, procs, workdir, args.cpus[1])
    client = Child("client", [*me, "--client"], procs, workdir, args.cpus[1])
    kernel = KernelProcess(procs, workdir, "kernel", cpu=args.cpus[0])
    try:
        fake_port = int(fake.reply(60)["port"])
        kernel.wait_ready()
        connection = connect(kernel, fake_port)
        client.call({"op": "setup", "fake_port": fake_port, "socket": kernel.socket}, CALL_TIMEOUT)
        say(
            f"fake pid {fake.proc.pid} port {fake_port}; kernel pid {kernel.proc.pid} "
            f"socket {kernel.socket}; client pid {client.proc.pid}"
        )
        pids = {"kernel": kernel.proc.pid, "fake": fake.proc.pid, "client": client.proc.pid}
        say(f"throughput ({args.deltas:,} deltas x {args.rounds} rounds):")
        results["throughput"] = throughput(args, client, kernel, connection, pids)
        say(f"time to first delta ({args.pairs} pairs of {args.short_deltas}-delta turns):")
        results["ttfd"] = ttfd(args, client, kernel, connection)
        if args.profile:
            say(f"profiling one kernel turn ({args.profile}):")
            results["profile"] = profile(
                args, procs, workdir, client, kernel, connection, fake_port, pids
            )
        results["kernel_log_errors"] = kernel.log_problems()
    finally:
        kernel.close()
        for child in (client, fake):
            Processes.stop(child.proc)


QUICK = {"deltas": 20_000, "rounds": 1, "pairs": 10, "warmup_pairs": 1, "quiet_budget": 2.0}


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.fake:
        _fake_main(args.deltas, args.marks)
        return 0
    if args.client:
        asyncio.run(_client_main())
        return 0
    if args.quick:
        vars(args).update(QUICK)
    cpus = sorted(os.sched_getaffinity(0))
    pin = args.pin and len(cpus) >= 2
    args.cpus = (cpus[-1], cpus[0]) if pin else (None, None)  # (kernel, fake + client)
    if pin:
        os.sched_setaffinity(0, {cpus[0]})
    if args.profile == "py-spy":
        args.py_spy = find_pyspy(args.py_spy)
        if args.py_spy is None:
            say("py-spy not found; use --py-spy PATH or --profile cprofile")
            return 2
    if args.profile_dir:
        os.makedirs(args.profile_dir, exist_ok=True)
    QUIET.left = args.quiet_budget
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.perf_counter()
    procs = Processes()
    results: dict[str, Any] = {}
    data_fs = None
    try:
        with workspace() as workdir:
            data_fs = fs_type(workdir)
            run_all(args, procs, workdir, results)
    finally:
        procs.stop_all()
    results["meta"] = {
        "python": python(),
        "quick": args.quick,
        "cpus": len(cpus),
        "pinning": f"kernel cpu {args.cpus[0]}, fake+client cpu {args.cpus[1]}" if pin else "off",
        "data_fs": data_fs,
        "elapsed_s": round(time.perf_counter() - began, 1),
        "kernel_log_errors": results.pop("kernel_log_errors", []),
        "quiet_wait_s": round(QUIET.waited, 2),
        "runs_started_while_busy": QUIET.gave_up,
        "clock": "time.monotonic_ns() in the client process",
    }
    finish(results, table_rows(results), render, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
