"""Request-path benchmark: what each layer of the full stack costs one request, in process.

Run from the repository root:

    .venv/bin/python -m bench.request_path           # table
    .venv/bin/python -m bench.request_path --json    # machine-readable results on stdout
    .venv/bin/python -m bench.request_path --quick   # fewer requests and rounds (~5 s)

`bench.http_stack` times the whole server; this script splits the difference between the full
stack and a bare FastAPI app into its pieces. The real stack is built by the app factory
(`app.main.create_app`, a started kernel, JSON request logs written to a file as in production)
and its layers are taken apart by following each middleware's `.app`: `Observe` (request id,
metrics, security headers, the JSON log line) → `BearerAuth` (the token check) → `RequestGuard`
(body, surrogate and query checks) → the FastAPI routes. Each layer is then called directly as
an ASGI app, with a prepared scope and no server, for `GET /readyz` (readiness results are
cached for a second, as in production) and `GET /healthz`; the bare app is the one
`bench.http_stack` serves. Sides alternate within each round so drift cancels out, and the
figure is the event loop thread's CPU time per request (median over rounds). A piece's cost is
the difference between the layer with it and the layer below.

No assertion is made on any figure: this is where the request-path ratio's bound is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from bench.harness import say
from bench.report import Row, finish, text

TOKEN = "bench-request-path-token-0123456789abcdefghij"
Message = MutableMapping[str, Any]
ASGI = Callable[
    [Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]


def bare_app() -> ASGI:
    """The bare side of bench.http_stack: FastAPI with one route returning "ok"."""
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse

    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    return app


def scope_of(path: str) -> Message:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {TOKEN}".encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }


async def receive() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def run_requests(app: ASGI, path: str, count: int) -> float:
    """CPU seconds of this thread per request for `count` sequential requests."""
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    began = time.thread_time()
    for _ in range(count):
        await app(scope_of(path), receive, send)
    spent = time.thread_time() - began
    if set(statuses) != {200}:
        raise RuntimeError(f"{path}: statuses {sorted(set(statuses))}")
    return spent / count


def layers(full: Any) -> dict[str, ASGI]:
    """The full stack's layers, outermost first, by following each middleware's `.app`."""
    out: dict[str, ASGI] = {}
    app = full
    for name in ("observe", "bearer_auth", "request_guard", "routes"):
        out[name] = app
        app = getattr(app, "app", None)
    return out


SIDES = (
    ("bare /healthz", "bare", "/healthz"),
    ("routes /healthz", "routes", "/healthz"),
    ("routes /readyz", "routes", "/readyz"),
    ("+ RequestGuard /readyz", "request_guard", "/readyz"),
    ("+ BearerAuth /readyz", "bearer_auth", "/readyz"),
    ("+ Observe /readyz (full)", "observe", "/readyz"),
    ("full /healthz", "observe", "/healthz"),
)


async def measure(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    from app.logs import configure_logging
    from app.main import create_app
    from app.settings import Settings

    configure_logging("json", "info")  # to this process's stdout: a file, see main()
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    service = create_app(Settings(data_dir=data_dir), token_sha256=digest)
    apps = {**layers(service.app), "bare": bare_app()}
    await service.kernel.start()
    try:
        for _, app_name, path in SIDES:  # warm-up: routers built, readiness cached, caches hot
            await run_requests(apps[app_name], path, args.warmup)
        per_side: dict[str, list[float]] = {name: [] for name, _, _ in SIDES}
        for r in range(args.rounds):
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            for name, app_name, path in order:
                per_side[name].append(await run_requests(apps[app_name], path, args.requests))
            say(f"  round {r + 1}/{args.rounds} done")
    finally:
        await service.kernel.close()
    return {
        "requests_per_side_per_round": args.requests,
        "rounds": args.rounds,
        "cpu_us_per_request": {
            name: round(statistics.median(v) * 1e6, 1) for name, v in per_side.items()
        },
        "runs_us": {name: [round(x * 1e6, 1) for x in v] for name, v in per_side.items()},
    }


def rows(results: dict[str, Any]) -> list[Row]:
    us = results["cpu_us_per_request"]
    bare = us["bare /healthz"]
    below = None
    out = []
    for name, _, _ in SIDES:
        piece = "" if below is None or not name.startswith("+") else f"+{us[name] - below:.1f}"
        out.append(
            Row(name, f"{us[name]:.1f} us", f"{bare:.1f} us", f"{us[name] / bare:.2f}x", piece)
        )
        if name.endswith("/readyz") or name.endswith("(full)"):
            below = us[name]
    return out


def render(results: dict[str, Any]) -> str:
    head = [
        "Request path: event-loop CPU per request, each layer of the full stack called as ASGI",
        f"({results['requests_per_side_per_round']} requests per side per round, "
        f"{results['rounds']} rounds, median; bare = bench.http_stack's bare FastAPI app)",
    ]
    details = [
        "Columns: value, bare app, ratio to bare, and (in the target column) the piece's own cost.",
        "A server adds its own per-request work (hypercorn's HTTP parsing and writing) to both",
        "sides alike; bench.http_stack's req/s ratio is (server + bare) / (server + full).",
    ]
    return text(head, rows(results), details)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print results as JSON on stdout")
    p.add_argument("--quick", action="store_true", help="1,000 requests x 3 rounds per side")
    p.add_argument("--requests", type=int, default=5000, help="requests per side per round")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    p.add_argument("--warmup", type=int, default=500, help="warm-up requests per side")
    args = p.parse_args(argv)
    if args.quick:
        args.requests, args.rounds, args.warmup = 1000, 3, 200
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="foya-bench-request-path-") as tmp:
        # The request log goes where a server's would: a file, not a terminal or a pipe.
        saved = os.dup(1)
        log = os.open(os.path.join(tmp, "requests.log"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.dup2(log, 1)
        try:
            results = asyncio.run(measure(args, Path(tmp) / "data"))
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(log)
    finish(results, rows(results), render, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
