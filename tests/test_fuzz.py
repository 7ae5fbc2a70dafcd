"""Schemathesis against a live kernel: no generated input yields a 5xx, and every answer conforms to
the published OpenAPI schema (status code, content type, body).

One real `foya serve` on loopback TCP (token auth) with a throwaway data directory. Its provider
traffic stays on this machine: the pre-made connection points at the fake provider, the
`openai` SDK's default host is that fake too (`OPENAI_BASE_URL`), and every other host goes
through a proxy address on loopback where nothing listens (`ALL_PROXY` and friends), so a
generated `base_url` fails fast with a 502 and no DNS lookup. Every project a generated request
registers points at one empty directory of the test's. SSE streams are left out (they never end),
and so is the MCP registry (an Internet service).

Budget: `EXAMPLES` cases per operation plus a bounded stateful run (links inferred by
Schemathesis from the schema: create a session, then use its id): all of them take about 75 s
on a quiet 2-core machine. The cases are also bounded by time, `BUDGET` seconds in all, so that
a loaded machine runs fewer of them instead of running into the per-test limit: each operation
gets an even share of what is left (its first case always runs), and once the budget is spent
the operations not reached yet are left out, with a warning that says how many. Building an
operation's strategy of schema-violating data is the costly part (about a second on a loaded
2-core machine), so the list starts at another place each day: what a slow run leaves out, the
next day's covers.
"""

from __future__ import annotations

import datetime
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from support.fake_provider import FakeProvider, connect
from support.helpers import Kernel, Launcher, base_env, free_port, sha256_hex

TOKEN = "f" * 43
EXAMPLES = 20
BUDGET = 30.0  # seconds for every operation's cases; the per-test limit is 120 s
STATEFUL_EXAMPLES = 15
STATEFUL_STEPS = 6
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
STREAMS = [
    "/sessions/{session_id}/events",
    "/context/events",
    "/canvases/{canvas_id}/events",
    "/sessions/{session_id}/terminals/{ref}/events",
]
# Answered by a service on the Internet (502 when it cannot be reached, as here): the MCP
# registry (tests/test_mcp.py runs it against a local registry).
OUTSIDE = ["/mcp/registry"]


@dataclass(frozen=True)
class Live:
    kernel: Kernel
    fake: FakeProvider
    projects: Path  # the one directory generated projects may point at

    @property
    def url(self) -> str:
        assert self.kernel.url is not None
        return self.kernel.url


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    base = tmp_path_factory.mktemp("fuzz")
    projects = base / "project"
    projects.mkdir()
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens: proxied requests fail fast
    launcher = Launcher(base / "procs")
    try:
        with FakeProvider.running() as fake:
            (base / "home").mkdir()
            env = base_env(
                HOME=str(base / "home"),  # fuzzed POST /rules and /memories write under ~/.foya
                FOYA_AUTH_TOKEN_SHA256=sha256_hex(TOKEN),
                OPENAI_BASE_URL=fake.base_url,
                ALL_PROXY=nowhere,
                HTTP_PROXY=nowhere,
                HTTPS_PROXY=nowhere,
                NO_PROXY="127.0.0.1,localhost,::1",
            )
            for name in ("all_proxy", "http_proxy", "https_proxy", "no_proxy"):
                env.pop(name, None)
            kernel = launcher.tcp(["--allow-plaintext", "--data-dir", str(base / "data")], env=env)
            with kernel.client(TOKEN) as client:
                connect(client, fake, models=["fuzz-model"])
                created = client.post("/projects", json={"path": str(projects), "name": "fuzz"})
                assert created.status_code == 201, created.text
            yield Live(kernel, fake, projects)
    finally:
        launcher.close()


def confine_projects(schema: Any, directory: Path) -> None:
    """Every generated `POST /projects` registers `directory`, never a path of this machine,
    and every hook a generated `PUT /hooks` stores runs `true`: fuzzed turns run hooks."""

    def map_body(context: schemathesis.HookContext, body: Any) -> Any:
        operation = context.operation
        route = (operation.method.upper(), operation.path) if operation is not None else None
        if route == ("POST", "/projects") and isinstance(body, dict):
            return {**body, "path": str(directory)}
        if route == ("PUT", "/hooks") and isinstance(body, dict):
            hooks = body.get("hooks")
            if isinstance(hooks, list):
                harmless = [{**h, "command": "true"} if isinstance(h, dict) else h for h in hooks]
                return {**body, "hooks": harmless}
        return body

    schema.hook(map_body)


@pytest.fixture(scope="module")
def api_schema(live: Live) -> Any:
    with live.kernel.client(TOKEN) as client:
        document = client.get("/openapi.json").json()
    for path in STREAMS + OUTSIDE:
        document["paths"][path].pop("get")
        if not document["paths"][path]:
            del document["paths"][path]
    schema = schemathesis.openapi.from_dict(document)
    schema.config.update(
        base_url=live.url, headers={"Authorization": f"Bearer {TOKEN}"}, request_timeout=30
    )
    confine_projects(schema, live.projects)
    return schema


class _Spent(BaseException):
    """An operation's share of `BUDGET` is used up. A BaseException: Hypothesis lets it through
    at once (it would take an Exception for a failing case and try to shrink it)."""


def fuzz(operation: Any, mode: schemathesis.GenerationMode, until: float) -> str | None:
    """Run up to `EXAMPLES` generated cases of one operation; the failure, described, or None.

    Past `until` (a `time.monotonic()` value) the run stops before its next case, but never
    before its first and never once a case failed: Hypothesis then replays the failure to
    shrink and report it, and a replay cut short would hide it."""
    sent, failed = 0, False

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        # The same cases every run: a failure replays as itself (a random draw on a loaded CI
        # machine once surfaced only as hypothesis' "inconsistent data generation").
        derandomize=True,
        print_blob=True,
    )
    def run(case: schemathesis.Case[Any]) -> None:
        nonlocal sent, failed
        if sent and not failed and time.monotonic() > until:
            raise _Spent
        sent += 1
        try:
            case.call_and_validate(checks=CHECKS)
        except Exception:
            failed = True
            raise

    try:
        run()
    except Unsatisfiable:  # nothing of this operation can be made invalid (string path params)
        return None
    except _Spent:
        return None
    except Exception as exc:  # a check failed: report every operation, not just the first
        return f"{operation.method.upper()} {operation.path} ({mode.value}): {exc}"
    return None


def test_no_input_yields_a_server_error(api_schema: Any, live: Live) -> None:
    """Every operation, with data that fits the schema and with data that does not.

    (Schemathesis' `from_fixture` pytest integration does not run on pytest 9, so the
    operations are driven here through their Hypothesis strategies.)"""
    failures = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 25, "the schema lost its operations"
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    runs = [(operation, mode) for operation in operations for mode in modes]
    start = datetime.date.today().toordinal() % len(runs)
    runs = runs[start:] + runs[:start]
    end = time.monotonic() + BUDGET
    done = 0
    for left, (operation, mode) in zip(range(len(runs), 0, -1), runs, strict=True):
        now = time.monotonic()
        if now > end:
            break
        # An even share of what is left: time a quick operation did not use goes to the rest.
        failure = fuzz(operation, mode, now + (end - now) / left)
        done += 1
        if failure is not None:
            failures.append(failure)
    if done < len(runs):
        warnings.warn(
            f"the fuzz budget of {BUDGET:g} s covered {done} of {len(runs)} operation runs "
            f"(from number {start}, which moves daily): this machine is slow or loaded",
            stacklevel=1,
        )
    assert not failures, "\n\n".join(failures)
    with live.kernel.client(TOKEN) as client:
        paths = {p["path"] for p in client.get("/projects").json()}
    assert paths == {str(live.projects)}, "a generated project escaped its directory"


def test_stateful_sequences_yield_no_server_error(api_schema: Any) -> None:
    """Linked calls (create a session or a connection, then use it), bounded."""
    base = api_schema.as_state_machine()

    class Workflow(base):  # type: ignore[misc, valid-type]
        def validate_response(
            self,
            response: schemathesis.Response,
            case: schemathesis.Case[Any],
            additional_checks: Any = None,
            **kwargs: Any,
        ) -> None:
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    Workflow.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=STATEFUL_STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )


def test_the_kernel_logged_no_unhandled_error(live: Live) -> None:
    """Runs last in this module: nothing the generated requests did reached the catch-all."""
    with httpx.Client(base_url=live.url, timeout=10) as client:
        assert client.get("/healthz").status_code == 200
    errors = [line for line in live.kernel.logs() if line.get("level") in ("error", "critical")]
    assert errors == [], errors[:3]
