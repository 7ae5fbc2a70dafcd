"""Terminal benchmark: output throughput through the kernel's PTY and SSE stream, and
keystroke echo latency, each against the same thing done straight on a PTY in this process.

Run from the repository root:

    .venv/bin/python -m bench.terminals            # table on stdout, progress on stderr
    .venv/bin/python -m bench.terminals --json     # machine-readable results on stdout
    .venv/bin/python -m bench.terminals --quick    # 5M of output, one round, 40 keystrokes

Targets: throughput through the kernel at least 0.5x the direct read; echo latency
p50 through the kernel at most 5 ms above the direct round trip.

1. Throughput. Direct: this process opens a PTY, starts `/bin/sh -c 'yes | head -c N'` on it
   (N = 50M, quick 5M) and reads the master until EIO; MB/s = bytes read / (start -> EIO).
   Kernel: the real `python -m app serve` (`SHELL=/bin/sh`) on a Unix socket; a terminal's SSE
   stream is opened after its prompt and `exec sh -c 'yes | head -c N'` typed (POST input);
   MB/s = UTF-8 bytes of the `data` received / (input sent -> the `exited` event). Both carry
   the tty's `\\r\\n` (1.5 N bytes). Rounds alternate direct and kernel; medians.
2. Echo. Both sides run /bin/sh on a PTY, whose line discipline echoes. Direct: write one key to
   the master, read until its echo. Kernel: POST the key as input, wait for its echo on the SSE
   stream (the POST's answer is awaited after). Keys alternate `x` (echo `x`) and DEL (echo
   `\\b \\b`), after a warm-up; p50 of each side and their difference.

Traffic goes only over the Unix socket; the kernel and every shell are stopped by PID. Nothing
asserts on a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from bench.harness import SSE, KernelProcess, Processes, child_env, say, workspace
from bench.report import Row, at_least, at_most, finish, python, stats, text

THROUGHPUT_TARGET = 0.5
ECHO_TARGET_MS = 5.0
KEYS = (("x", "x"), ("\x7f", "\b"))  # key typed, what its echo starts with
WARMUP = 5


def command(size: str) -> str:
    return f"yes | head -c {size}"


# ------------------------------------------------------------------------------------- direct


@contextlib.contextmanager
def direct_pty(procs: Processes, argv: list[str]) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`argv` on a new PTY in its own session; the master's descriptor."""
    master, slave = os.openpty()
    try:
        proc = procs.add(
            subprocess.Popen(
                argv, stdin=slave, stdout=slave, stderr=slave, env=child_env(),
                start_new_session=True,
            )
        )  # fmt: skip
    finally:
        os.close(slave)
    try:
        yield master, proc
    finally:
        os.close(master)
        Processes.stop(proc)


def direct_throughput(procs: Processes, size: str) -> dict[str, float]:
    started = time.perf_counter()
    total = 0
    with direct_pty(procs, ["/bin/sh", "-c", command(size)]) as (master, _):
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the command ended and closed the tty
                break
            if not data:
                break
            total += len(data)
    seconds = time.perf_counter() - started
    return {"bytes": total, "seconds": seconds, "mb_s": total / seconds / 1e6}


def read_until(master: int, wanted: str) -> None:
    seen = ""
    while wanted not in seen:
        seen += os.read(master, 4096).decode(errors="replace")


def direct_echo(procs: Processes, samples: int) -> list[float]:
    times: list[float] = []
    with direct_pty(procs, ["/bin/sh"]) as (master, _):
        os.write(master, b"echo READY-$((1+1))\n")
        read_until(master, "READY-2")
        for i in range(samples + WARMUP):
            key, echo = KEYS[i % 2]
            started = time.perf_counter_ns()
            os.write(master, key.encode())
            read_until(master, echo)
            if i >= WARMUP:
                times.append(time.perf_counter_ns() - started)
    return times


# ------------------------------------------------------------------------------------- kernel


class Terminal:
    """A terminal of the kernel child, driven over its Unix socket."""

    def __init__(self, kernel: KernelProcess) -> None:
        self.socket = kernel.socket
        self.session = str(kernel.post("/sessions", {})["id"])
        self.ref = str(kernel.post(f"/sessions/{self.session}/terminals", {})["ref"])
        self.base = f"/sessions/{self.session}/terminals/{self.ref}"

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[tuple[httpx.AsyncClient, AsyncIterator[Any]]]:
        """A client and the terminal's events (parsed `data`), from its first event on."""
        transport = httpx.AsyncHTTPTransport(uds=self.socket)
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://foya", timeout=120) as client,
            client.stream("GET", self.base + "/events", params={"after": 0}) as response,
        ):
            if response.status_code != 200:
                raise RuntimeError(f"events: HTTP {response.status_code}")
            yield client, frames(response)

    async def send(self, client: httpx.AsyncClient, key: str) -> None:
        answer = await client.post(self.base + "/input", json={"input": key})
        if answer.status_code != 204:
            raise RuntimeError(f"input: HTTP {answer.status_code} {answer.text[:200]}")


async def frames(response: httpx.Response) -> AsyncIterator[Any]:
    parser = SSE()
    async for line in response.aiter_lines():
        if (frame := parser.feed(line)) is not None:
            yield frame.json()


async def until(events: AsyncIterator[Any], wanted: str) -> None:
    seen = ""
    async for event in events:
        seen += event.get("data", "")
        if wanted in seen:
            return
    raise RuntimeError("the stream ended")


async def kernel_throughput(kernel: KernelProcess, size: str) -> dict[str, float]:
    terminal = Terminal(kernel)
    async with terminal.opened() as (client, events):
        await terminal.send(client, "echo READY-$((1+1))\n")
        await until(events, "READY-2")
        started = time.perf_counter()
        await terminal.send(client, f"exec sh -c '{command(size)}'\n")
        total = count = gaps = 0
        async for event in events:
            count += 1
            gaps += bool(event.get("truncated"))
            total += len(event.get("data", "").encode())
            if event.get("exited"):
                break
        seconds = time.perf_counter() - started
    kernel.http.delete(terminal.base)
    return {"bytes": total, "seconds": seconds, "mb_s": total / seconds / 1e6, "events": count,
            "gaps": gaps}  # fmt: skip


async def kernel_echo(kernel: KernelProcess, samples: int) -> list[float]:
    terminal = Terminal(kernel)
    times: list[float] = []
    async with terminal.opened() as (client, events):
        await terminal.send(client, "echo READY-$((1+1))\n")
        await until(events, "READY-2")
        for i in range(samples + WARMUP):
            key, echo = KEYS[i % 2]
            started = time.perf_counter_ns()
            sent = asyncio.ensure_future(terminal.send(client, key))
            await until(events, echo)
            elapsed = time.perf_counter_ns() - started
            await sent
            if i >= WARMUP:
                times.append(elapsed)
    kernel.http.delete(terminal.base)
    return times


# ------------------------------------------------------------------------------------ running


def measure(size: str, rounds: int, samples: int) -> dict[str, Any]:
    procs = Processes()
    with workspace() as work:
        try:
            kernel = KernelProcess(procs, work, "terminals", env={"SHELL": "/bin/sh"})
            try:
                kernel.wait_ready()
                direct: list[dict[str, float]] = []
                through: list[dict[str, float]] = []
                for r in range(rounds):
                    say(f"throughput round {r + 1}/{rounds}: {command(size)} ...")
                    for side in ("direct", "kernel") if r % 2 == 0 else ("kernel", "direct"):
                        if side == "direct":
                            direct.append(direct_throughput(procs, size))
                        else:
                            through.append(asyncio.run(kernel_throughput(kernel, size)))
                say(f"echo: {samples} keystrokes each way ...")
                echo_direct = direct_echo(procs, samples)
                echo_kernel = asyncio.run(kernel_echo(kernel, samples))
                problems = kernel.log_problems()
            finally:
                kernel.close()
        finally:
            procs.stop_all()
    return {
        "size": size,
        "rounds": rounds,
        "direct": direct,
        "kernel": through,
        "direct_mb_s": statistics.median(d["mb_s"] for d in direct),
        "kernel_mb_s": statistics.median(k["mb_s"] for k in through),
        "echo_direct": stats(echo_direct, 3),
        "echo_kernel": stats(echo_kernel, 3),
        "echo_samples": samples,
        "kernel_log_problems": problems,
    }


def table_rows(results: dict[str, Any]) -> list[Row]:
    m = results["measure"]
    ratio = m["kernel_mb_s"] / m["direct_mb_s"]
    direct, kernel = m["echo_direct"]["median_ms"], m["echo_kernel"]["median_ms"]
    return [
        Row(
            f"output through the kernel ({m['size']}), MB/s",
            f"{m['kernel_mb_s']:.1f}",
            f"{m['direct_mb_s']:.1f}",
            f"{ratio:.2f}x",
            f">= {THROUGHPUT_TARGET}x",
            at_least(ratio, THROUGHPUT_TARGET),
        ),
        Row("keystroke echo p50 through the kernel, ms", f"{kernel:.3f}", f"{direct:.3f}"),
        Row(
            "echo overhead (kernel - direct), p50 ms",
            f"{kernel - direct:.3f}",
            target=f"<= {ECHO_TARGET_MS:g} ms",
            meets=at_most(kernel - direct, ECHO_TARGET_MS),
        ),
    ]


def render(results: dict[str, Any]) -> str:
    m = results["measure"]
    k = m["kernel"]
    title = ["Terminals: PTY output through the kernel's SSE stream, and keystroke echo"]
    details = [
        f"throughput: {len(k)} round(s); kernel {k[0]['bytes']:,} bytes in {k[0]['events']:,} "
        f"events, {sum(r['gaps'] for r in k)} gap markers; direct {m['direct'][0]['bytes']:,} "
        "bytes.",
        f"echo p90: kernel {m['echo_kernel']['p90_ms']} ms, direct {m['echo_direct']['p90_ms']} "
        f"ms, over {m['echo_samples']} keystrokes each.",
        f"kernel log problems: {len(m['kernel_log_problems'])}; python {results['python']}",
        "",
    ]
    return text(title, table_rows(results), details)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--size", default=None, help="output of `yes | head -c SIZE` (e.g. 50M)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--samples", type=int, default=None)
    args = parser.parse_args(argv)
    size = args.size or ("5M" if args.quick else "50M")
    rounds = args.rounds or (1 if args.quick else 3)
    samples = args.samples or (40 if args.quick else 200)
    started = time.monotonic()
    results: dict[str, Any] = {"python": python(), "quick": args.quick}
    results["measure"] = measure(size, rounds, samples)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    finish(results, table_rows(results), render, args.json)
    say(f"done in {results['elapsed_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
