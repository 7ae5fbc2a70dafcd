"""Automations (app.kernel.automations, Foya's `/automations`).

Three layers, real parts throughout:
- the schedule: cron expressions in time zones across daylight saving changes (pure);
- the scheduler: a real kernel in this process whose clock the test moves (`FakeClock`), the
  fake provider answering the runs' turns: due automations start as sessions, never twice at
  once, once after the due times missed while the kernel was down;
- the wire: a real `foya serve` on a Unix socket: CRUD, 400s that change nothing, `run` → 202
  then 409 while it runs, and the automations surviving a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.fake_provider import BOUND, FakeProvider, answer, call, connect, tools, wait
from support.helpers import Launcher, short_tmpdir, wait_until
from support.inprocess import InProcess, inprocess_kernel
from support.streams_helpers import assert_error, unix_kernel

from app.kernel.automations import AutomationInput
from app.kernel.automations.errors import AutomationRunning, InvalidAutomation
from app.kernel.automations.schedule import Schedule

UTC = dt.UTC


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).astimezone(UTC)


# ------------------------------------------------------------------------------ the schedule


def due_times(cron: str, timezone: str, start: str, count: int) -> list[str]:
    schedule, times, moment = Schedule(cron, timezone), [], at(start)
    for _ in range(count):
        found = schedule.next_after(moment)
        assert found is not None
        times.append(found.isoformat())
        moment = found
    return times


def test_spring_forward_runs_a_skipped_time_once_at_the_end_of_the_gap() -> None:
    # Berlin, 2025-03-30: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that night.
    assert due_times("30 2 * * *", "Europe/Berlin", "2025-03-29T12:00:00+00:00", 3) == [
        "2025-03-30T01:00:00+00:00",  # 03:00 CEST, the first minute after the gap
        "2025-03-31T00:30:00+00:00",  # 02:30 CEST
        "2025-04-01T00:30:00+00:00",
    ]


def test_fall_back_runs_a_repeated_time_once() -> None:
    # Berlin, 2025-10-26: 03:00 CEST becomes 02:00 CET; 02:30 happens twice that night.
    assert due_times("30 2 * * *", "Europe/Berlin", "2025-10-25T12:00:00+00:00", 3) == [
        "2025-10-26T00:30:00+00:00",  # 02:30 CEST, the first 02:30
        "2025-10-27T01:30:00+00:00",  # not 2025-10-26T01:30Z, the second 02:30
        "2025-10-28T01:30:00+00:00",
    ]


def test_fall_back_keeps_both_hours_for_expressions_of_every_hour() -> None:
    assert due_times("0 * * * *", "Europe/Berlin", "2025-10-25T23:30:00+00:00", 4) == [
        "2025-10-26T00:00:00+00:00",  # 02:00 CEST
        "2025-10-26T01:00:00+00:00",  # 02:00 CET, an hour later
        "2025-10-26T02:00:00+00:00",
        "2025-10-26T03:00:00+00:00",
    ]


def test_time_zones_and_descriptors() -> None:
    assert due_times("0 9 * * MON-FRI", "America/New_York", "2025-03-07T15:00:00+00:00", 2) == [
        "2025-03-10T13:00:00+00:00",  # Monday 09:00 EDT, after the Sunday switch
        "2025-03-11T13:00:00+00:00",
    ]
    assert due_times("@daily", "Asia/Tokyo", "2025-01-01T00:00:00+00:00", 1) == [
        "2025-01-01T15:00:00+00:00"
    ]
    # an empty timezone is `Local`, the host's zone, as in Foya
    assert Schedule("@daily", "").zone is Schedule("@daily", "Local").zone
    # strictly after: a due time is never repeated
    assert due_times("* * * * *", "UTC", "2025-01-01T00:01:00+00:00", 1) == [
        "2025-01-01T00:02:00+00:00"
    ]


@pytest.mark.parametrize(
    ("cron", "timezone", "says"),
    [
        ("", "UTC", "cron: required"),
        ("not a cron", "UTC", "five fields"),
        ("* * * * * *", "UTC", "five fields"),  # seconds: Foya's parser refuses them too
        ("61 * * * *", "UTC", "out of range"),
        ("@every 5m", "UTC", "unknown descriptor"),
        ("0 0 30 2 *", "UTC", "matches no date"),
        ("0 9 * * *", "Mars/Olympus_Mons", "unknown time zone"),
        ("0 9 * * *", "../../etc/passwd", "unknown time zone"),
    ],
)
def test_invalid_schedules_are_refused(cron: str, timezone: str, says: str) -> None:
    with pytest.raises(InvalidAutomation) as raised:
        Schedule(cron, timezone)
    assert says in raised.value.message


# ----------------------------------------------------------------------- the scheduler


class FakeClock:
    """Time that moves only when the test moves it. A sleeper wakes once the time reaches its
    moment; `idle()` says the scheduler went to sleep, for a moment still ahead, after the last
    move: it has caught up with the current time. Used on the kernel's loop only."""

    def __init__(self, start: str) -> None:
        self._now = at(start)
        self._moves = 0
        self._sleepers: list[tuple[int, dt.datetime, asyncio.Future[None]]] = []

    def now(self) -> dt.datetime:
        return self._now

    async def sleep_until(self, moment: dt.datetime) -> None:
        done = asyncio.get_running_loop().create_future()
        entry = (self._moves, moment, done)
        self._sleepers.append(entry)
        self._wake()
        try:
            await done
        finally:
            self._sleepers.remove(entry)

    async def move_to(self, text: str) -> None:
        self._now = at(text)
        self._moves += 1
        self._wake()

    async def idle(self) -> bool:
        return any(moves == self._moves and not done.done() for moves, _, done in self._sleepers)

    def _wake(self) -> None:
        for _, moment, done in self._sleepers:
            if moment <= self._now and not done.done():
                done.set_result(None)


class Rig(InProcess):
    """An in-process kernel whose automations run on `clock`."""

    def __init__(self, base: InProcess, clock: FakeClock) -> None:
        super().__init__(base.kernel, base.fake, base.loop, base.connection)
        self.clock = clock

    def create(self, name: str, cron: str, **fields: Any) -> dict[str, Any]:
        """An enabled automation on the fake connection with a model of its own."""
        spec = AutomationInput(
            name=name,
            prompt=f"Do the {name} job",
            cron=cron,
            timezone=fields.pop("timezone", "UTC"),
            enabled=fields.pop("enabled", True),
            connection_id=self.connection,
            model=f"m-{uuid.uuid4().hex[:12]}",
            approval_mode="full_access",
            **fields,
        )
        return dict(self.run(self.kernel.automations.create(spec)))

    def get(self, automation_id: str) -> dict[str, Any]:
        return dict(self.kernel.automations.get(automation_id))

    def move_to(self, text: str) -> None:
        """Set the clock and wait until the scheduler's pass for that time is over."""
        self.run(self.clock.move_to(text))
        self.settle()

    def settle(self) -> None:
        wait_until(lambda: self.run(self.clock.idle()), "the scheduler to sleep", BOUND)

    def run_at(self, created: dict[str, Any], due: str, reply: str = "Done.") -> dict[str, Any]:
        """Script `reply` for `created`'s model, move the clock to `due` (its next due time)
        and return the automation once the run started then has ended."""
        self.fake.push(created["model"], answer(reply))
        self.move_to(due)
        return self.finished(created["id"], due)

    def finished(self, automation_id: str, last_run_at: str) -> dict[str, Any]:
        """The automation once its run started at `last_run_at` has ended."""

        def over() -> bool:
            item = self.get(automation_id)
            return item.get("last_run_at") == last_run_at and item["last_status"] != "running"

        wait_until(over, f"the run of {last_run_at} to end", BOUND)
        return self.get(automation_id)

    def sessions_of(self, name: str) -> list[dict[str, Any]]:
        listed = self.run(self.kernel.sessions.all())
        return [dict(s) for s in listed if s.get("title") == f"Automation: {name}"]

    def runs(self, outcome: str) -> float:
        value = self.kernel.metrics.registry.get_sample_value(
            "foya_automation_runs_total", {"outcome": outcome}
        )
        return value or 0.0


@contextlib.contextmanager
def clocked_kernel(data_dir: Path, clock: FakeClock, fake: FakeProvider) -> Iterator[Rig]:
    """A kernel on `data_dir`, in this process, whose automations run on `clock`."""
    with inprocess_kernel(data_dir, clock=clock, fake=fake) as base:
        yield Rig(base, clock)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as provider:
        yield provider


def test_an_automation_due_every_minute_runs_as_a_new_session(
    tmp_path: Path, fake: FakeProvider
) -> None:
    with clocked_kernel(tmp_path / "data", FakeClock("2030-01-01T00:00:30+00:00"), fake) as rig:
        created = rig.create("minutely", "* * * * *")
        assert created["next_run_at"] == "2030-01-01T00:01:00.000000Z"
        assert created["last_status"] == "idle" and "last_run_at" not in created
        done = rig.run_at(created, "2030-01-01T00:01:00.000000Z", "Report written.")
        assert done["last_status"] == "completed", done
        assert done["next_run_at"] == "2030-01-01T00:02:00.000000Z"
        session = rig.run(rig.kernel.sessions.get(done["last_session_id"]))
        assert session["title"] == "Automation: minutely"
        assert session["model"] == created["model"]
        assert session["connection_id"] == rig.connection
        assert session["approval_mode"] == "full_access"
        history = rig.run(rig.kernel.sessions.history(session["id"]))
        assert [(m["role"], m["content"]) for m in history] == [
            ("user", "Do the minutely job"),
            ("assistant", "Report written."),
        ]

        again = rig.run_at(created, "2030-01-01T00:02:00.000000Z", "Again.")
        assert again["last_status"] == "completed"
        assert again["last_session_id"] != done["last_session_id"]
        assert len(rig.sessions_of("minutely")) == 2


def test_a_question_asked_in_a_run_is_cancelled_and_the_run_goes_on(
    tmp_path: Path, fake: FakeProvider
) -> None:
    with clocked_kernel(tmp_path / "data", FakeClock("2030-01-01T00:00:30+00:00"), fake) as rig:
        created = rig.create("asking", "* * * * *")
        question = {"questions": [{"question": "Which branch?"}]}
        fake.push(created["model"], tools(call("q1", "ask_user", question)), answer("Used main."))
        rig.move_to("2030-01-01T00:01:00+00:00")
        done = rig.finished(created["id"], "2030-01-01T00:01:00.000000Z")
        assert done["last_status"] == "completed", done
        history = rig.run(rig.kernel.sessions.history(done["last_session_id"]))
        (result,) = [m for m in history if m["role"] == "tool"]
        assert "cancel" in str(result["content"]).lower(), result
        assert history[-1]["content"] == "Used main."


def test_a_due_time_during_a_run_is_skipped_not_started_twice(
    tmp_path: Path, fake: FakeProvider
) -> None:
    with clocked_kernel(tmp_path / "data", FakeClock("2030-01-01T00:00:30+00:00"), fake) as rig:
        created = rig.create("slow", "* * * * *")
        gate = fake.gate()
        fake.push(created["model"], [wait(gate), *answer("Finally.")])
        rig.move_to("2030-01-01T00:01:00+00:00")
        wait_until(lambda: "last_session_id" in rig.get(created["id"]), "the run's session", BOUND)

        rig.move_to("2030-01-01T00:02:00+00:00")  # due again, the first run still going
        item = rig.get(created["id"])
        assert item["last_status"] == "running"
        assert item["last_run_at"] == "2030-01-01T00:01:00.000000Z"
        assert item["next_run_at"] == "2030-01-01T00:03:00.000000Z"
        assert rig.runs("skipped") == 1
        with pytest.raises(AutomationRunning):
            rig.run(rig.kernel.automations.run_now(created["id"]))

        gate.set()
        done = rig.finished(created["id"], "2030-01-01T00:01:00.000000Z")
        assert done["last_status"] == "completed"
        assert len(rig.sessions_of("slow")) == 1
        assert len(fake.chats(created["model"])) == 1


def test_the_fall_back_night_runs_a_repeated_time_once(tmp_path: Path, fake: FakeProvider) -> None:
    with clocked_kernel(tmp_path / "data", FakeClock("2025-10-25T12:00:00+00:00"), fake) as rig:
        created = rig.create("nightly", "30 2 * * *", timezone="Europe/Berlin")
        assert created["next_run_at"] == "2025-10-26T00:30:00.000000Z"  # 02:30 CEST
        done = rig.run_at(created, "2025-10-26T00:30:00.000000Z")
        assert done["next_run_at"] == "2025-10-27T01:30:00.000000Z"

        rig.move_to("2025-10-26T01:30:00+00:00")  # 02:30 CET: the same wall time again
        assert len(rig.sessions_of("nightly")) == 1
        assert rig.get(created["id"])["last_run_at"] == "2025-10-26T00:30:00.000000Z"


def test_the_spring_forward_night_runs_a_skipped_time_after_the_gap(
    tmp_path: Path, fake: FakeProvider
) -> None:
    with clocked_kernel(tmp_path / "data", FakeClock("2025-03-29T12:00:00+00:00"), fake) as rig:
        created = rig.create("nightly", "30 2 * * *", timezone="Europe/Berlin")
        assert created["next_run_at"] == "2025-03-30T01:00:00.000000Z"  # 03:00 CEST
        done = rig.run_at(created, "2025-03-30T01:00:00.000000Z")
        assert done["last_status"] == "completed"
        assert done["next_run_at"] == "2025-03-31T00:30:00.000000Z"  # 02:30 CEST again
        assert len(rig.sessions_of("nightly")) == 1


def test_runs_missed_while_down_run_once_at_start(tmp_path: Path, fake: FakeProvider) -> None:
    data = tmp_path / "data"
    with clocked_kernel(data, FakeClock("2030-01-01T00:00:30+00:00"), fake) as rig:
        minutely = rig.create("minutely", "* * * * *")
        noon = rig.create("noon", "0 12 * * *")
        paused = rig.create("paused", "* * * * *", enabled=False)
    fake.push(minutely["model"], answer("Caught up."))

    # Three hours later: 180 due times of `minutely` went by, none of `noon`.
    with clocked_kernel(data, FakeClock("2030-01-01T03:00:30+00:00"), fake) as rig:
        done = rig.finished(minutely["id"], "2030-01-01T03:00:30.000000Z")
        assert done["last_status"] == "completed"
        assert done["next_run_at"] == "2030-01-01T03:01:00.000000Z"
        rig.settle()
        assert len(rig.sessions_of("minutely")) == 1
        assert len(fake.chats(minutely["model"])) == 1
        assert rig.sessions_of("noon") == [] and rig.sessions_of("paused") == []
        assert rig.get(noon["id"])["next_run_at"] == "2030-01-01T12:00:00.000000Z"
        assert "next_run_at" not in rig.get(paused["id"])


def test_a_run_cut_short_by_a_crash_is_failed_after_restart(
    tmp_path: Path, fake: FakeProvider
) -> None:
    data = tmp_path / "data"
    with clocked_kernel(data, FakeClock("2030-01-01T00:00:30+00:00"), fake) as rig:
        created = rig.create("crashed", "0 12 * * *")
    # What the file holds when the kernel dies mid-run.
    path = data / "automations.json"
    stored = json.loads(path.read_text())
    stored["tasks"][0].update(last_status="running", last_run_at="2030-01-01T00:00:40Z")
    path.write_text(json.dumps(stored))

    with clocked_kernel(data, FakeClock("2030-01-01T00:01:00+00:00"), fake) as rig:
        item = rig.get(created["id"])
        assert item["last_status"] == "failed"
        assert item["last_error"] == "interrupted: the kernel stopped during the run"
        rig.settle()
        assert rig.sessions_of("crashed") == []  # nothing is re-run
    assert json.loads(path.read_text())["tasks"][0]["last_status"] == "failed"


def test_an_unreadable_file_is_kept_aside(tmp_path: Path, fake: FakeProvider) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "automations.json").write_text('{"version": 1, "tasks": [{"id": 7}]}')
    with clocked_kernel(data, FakeClock("2030-01-01T00:00:30+00:00"), fake) as rig:
        assert rig.kernel.automations.all() == []
    aside = list(data.glob("automations.json.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_text() == '{"version": 1, "tasks": [{"id": 7}]}'
    assert json.loads((data / "automations.json").read_text()) == {"version": 1, "tasks": []}


# ------------------------------------------------------------------------------ the wire


@dataclass
class Wire:
    client: httpx.Client
    data_dir: Path
    fake: FakeProvider
    connection: str

    def body(self, **fields: Any) -> dict[str, Any]:
        """A valid create body that never falls due while a test runs."""
        base = {
            "name": "Daily report",
            "prompt": "Summarize progress",
            "cron": "0 0 1 1 *",
            "timezone": "Europe/Berlin",
            "enabled": True,
            "connection_id": self.connection,
            "model": f"m-{uuid.uuid4().hex[:12]}",
        }
        return {**base, **fields}

    def create(self, **fields: Any) -> dict[str, Any]:
        response = self.client.post("/automations", json=self.body(**fields))
        assert response.status_code == 201, response.text
        return dict(response.json())

    def file_bytes(self) -> bytes:
        return (self.data_dir / "automations.json").read_bytes()


@contextlib.contextmanager
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Launcher, Path]]:
    """A launcher for `foya serve` processes and a short root for their sockets."""
    launcher = Launcher(tmp_path_factory.mktemp("procs"))
    try:
        with short_tmpdir() as root:
            yield launcher, root
    finally:
        launcher.close()


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory, fake: FakeProvider) -> Iterator[Wire]:
    with launched(tmp_path_factory) as (launcher, root):
        served = unix_kernel(launcher, root, "k")
        with served.client() as client:
            connection = connect(client, fake)["id"]
            yield Wire(client, served.data_dir, fake, connection)


def test_crud(wire: Wire) -> None:
    created = wire.create()
    assert created["id"].startswith("automation-")
    assert {k: created[k] for k in ("name", "prompt", "cron", "timezone", "enabled")} == {
        "name": "Daily report",
        "prompt": "Summarize progress",
        "cron": "0 0 1 1 *",
        "timezone": "Europe/Berlin",
        "enabled": True,
    }
    assert created["approval_mode"] == "auto" and created["last_status"] == "idle"
    assert created["next_run_at"].endswith("T23:00:00.000000Z")  # midnight, Berlin winter
    assert created["connection_id"] == wire.connection
    assert "last_run_at" not in created and "last_session_id" not in created

    listed = wire.client.get("/automations").json()
    assert created in listed
    assert wire.client.get(f"/automations/{created['id']}").json() == created

    put = wire.client.put(
        f"/automations/{created['id']}",
        json={"name": "Renamed", "prompt": "Other", "cron": "@daily", "timezone": "UTC"},
    )
    assert put.status_code == 200, put.text
    replaced = put.json()
    assert replaced["name"] == "Renamed" and replaced["cron"] == "@daily"
    assert replaced["enabled"] is False and "next_run_at" not in replaced  # PUT replaces all
    assert "connection_id" not in replaced and replaced["created_at"] == created["created_at"]

    patched = wire.client.patch(f"/automations/{created['id']}", json={"enabled": True})
    assert patched.status_code == 200, patched.text
    assert patched.json()["name"] == "Renamed" and patched.json()["enabled"] is True
    assert patched.json()["next_run_at"].endswith("T00:00:00.000000Z")

    path = wire.data_dir / "automations.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())
    assert stored["version"] == 1
    assert [t for t in stored["tasks"] if t["id"] == created["id"]] == [patched.json()]

    assert wire.client.delete(f"/automations/{created['id']}").status_code == 204
    gone = f"/automations/{created['id']}"
    assert_error(wire.client.get(gone), 404, "automation_not_found")
    assert_error(wire.client.delete(gone), 404, "automation_not_found")
    assert_error(wire.client.post(gone + "/run"), 404, "automation_not_found")
    assert_error(wire.client.patch(gone, json={"enabled": False}), 404, "automation_not_found")
    assert_error(wire.client.put(gone, json=wire.body()), 404, "automation_not_found")
    assert created["id"] not in [t["id"] for t in json.loads(path.read_text())["tasks"]]


BAD_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"cron": "not a cron"}, "cron"),
    ({"cron": "0 0 30 2 *"}, "cron"),
    ({"cron": "@every 1h"}, "cron"),
    ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
    ({"project_id": "no-such-project"}, "project_id"),
    ({"connection_id": "no-such-connection"}, "connection_id"),
    ({"approval_mode": "manual"}, "approval_mode"),
    ({"approval_mode": "yolo"}, "approval_mode"),
    ({"name": "   "}, "name"),
    ({"prompt": ""}, "prompt"),
]


@pytest.mark.parametrize(("fields", "named"), BAD_FIELDS)
def test_bad_input_is_400_and_changes_nothing(
    wire: Wire, fields: dict[str, Any], named: str
) -> None:
    existing = wire.create()
    before, listed = wire.file_bytes(), wire.client.get("/automations").json()

    error = assert_error(
        wire.client.post("/automations", json=wire.body(**fields)), 400, "automation_create_failed"
    )
    assert error["message"].startswith(named)
    url = f"/automations/{existing['id']}"
    error = assert_error(
        wire.client.put(url, json=wire.body(**fields)), 400, "automation_update_failed"
    )
    assert error["message"].startswith(named)
    assert_error(wire.client.patch(url, json=fields), 400, "automation_update_failed")

    assert wire.file_bytes() == before
    assert wire.client.get("/automations").json() == listed
    assert wire.client.delete(url).status_code == 204


@pytest.mark.parametrize(
    "body", [{"schedule": "@daily"}, {"enabled": [True]}, {"name": 5}], ids=str
)
def test_malformed_bodies_are_bad_request(wire: Wire, body: dict[str, Any]) -> None:
    before = wire.client.get("/automations").json()
    assert_error(wire.client.post("/automations", json=wire.body(**body)), 400, "bad_request")
    assert wire.client.get("/automations").json() == before


def test_run_is_202_then_409_while_it_runs(wire: Wire) -> None:
    created = wire.create(enabled=False, approval_mode="full_access", name="On demand")
    gate = wire.fake.gate()
    wire.fake.push(created["model"], [wait(gate), *answer("All done.")])
    url = f"/automations/{created['id']}"

    started = wire.client.post(url + "/run")
    assert started.status_code == 202, started.text
    assert started.json()["last_status"] == "running" and "last_run_at" in started.json()
    assert_error(wire.client.post(url + "/run"), 409, "automation_running")
    wait_until(lambda: "last_session_id" in wire.client.get(url).json(), "the session", BOUND)
    assert wire.client.get(url).json()["last_status"] == "running"

    gate.set()
    wait_until(lambda: wire.client.get(url).json()["last_status"] != "running", "the run", BOUND)
    done = wire.client.get(url).json()
    assert done["last_status"] == "completed", done
    session = done["last_session_id"]
    row = next(s for s in wire.client.get("/sessions").json() if s["id"] == session)
    assert row["title"] == "Automation: On demand" and row["approval_mode"] == "full_access"
    history = wire.client.get(f"/sessions/{session}/history").json()
    assert [m["content"] for m in history] == ["Summarize progress", "All done."]

    wire.fake.push(created["model"], answer("Once more."))
    assert wire.client.post(url + "/run").status_code == 202  # over: it may run again
    wait_until(lambda: wire.client.get(url).json()["last_status"] != "running", "the run", BOUND)
    assert wire.client.get(url).json()["last_session_id"] != session


def test_a_restart_keeps_the_automations(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeProvider
) -> None:
    with launched(tmp_path_factory) as (launcher, root):
        served = unix_kernel(launcher, root, "r")
        with served.client() as client:
            connection = connect(client, fake)["id"]
            kept = []
            for name, enabled in (("one", True), ("two", False), ("held", False)):
                body = {
                    "name": name,
                    "prompt": "p",
                    "cron": "0 0 1 1 *",
                    "timezone": "UTC",
                    "enabled": enabled,
                    "connection_id": connection,
                    "model": f"m-{uuid.uuid4().hex[:12]}",
                }
                kept.append(client.post("/automations", json=body).json())
            held = kept.pop()
            fake.push(held["model"], [wait(fake.gate()), *answer("never")])
            url = f"/automations/{held['id']}"
            assert client.post(url + "/run").status_code == 202
            wait_until(lambda: fake.chats(held["model"]) != [], "the run's request", BOUND)
        served.kernel.stop()  # SIGTERM while the run's turn waits for the model

        again = unix_kernel(launcher, root, "r")
        with again.client() as client:
            listed = client.get("/automations").json()
    after = {a["name"]: a for a in listed}
    assert after["held"]["last_status"] == "cancelled", after["held"]
    assert sorted((a for a in listed if a["name"] != "held"), key=lambda a: a["name"]) == kept
