"""The session state machine (app.kernel.turns.activity): work starts only from idle, a deletion
outranks everything and nothing starts on a session being deleted."""

from __future__ import annotations

import pytest

from app.kernel.turns.activity import Activities, Activity, SessionBusy
from app.store.events import SessionNotFound

WORK = (Activity.TURN, Activity.COMPACTION, Activity.EXCLUSIVE)


@pytest.mark.parametrize("activity", WORK)
def test_work_starts_from_idle_and_ends_there(activity: Activity) -> None:
    states = Activities()
    assert states.of("s") is Activity.IDLE and not states.busy("s")
    states.begin("s", activity)
    assert states.of("s") is activity and states.busy("s")
    states.end("s", activity)
    assert states.of("s") is Activity.IDLE


@pytest.mark.parametrize("running", WORK)
@pytest.mark.parametrize("wanted", WORK)
def test_nothing_else_starts_on_a_busy_session(running: Activity, wanted: Activity) -> None:
    states = Activities()
    states.begin("s", running)
    with pytest.raises(SessionBusy) as refused:
        states.begin("s", wanted)
    assert refused.value.code == "session_busy" and refused.value.status == 409
    assert states.of("s") is running
    states.begin("other", wanted)  # sessions are independent


@pytest.mark.parametrize("running", WORK)
def test_a_deletion_outranks_running_work(running: Activity) -> None:
    states = Activities()
    states.begin("s", running)
    states.begin("s", Activity.DELETING)
    states.end("s", running)  # the stopped work ending does not make the session idle
    assert states.of("s") is Activity.DELETING
    for wanted in (*WORK, Activity.DELETING):
        with pytest.raises(SessionNotFound):
            states.begin("s", wanted)
    states.forget("s")
    assert states.of("s") is Activity.IDLE


def test_ending_what_is_not_running_changes_nothing() -> None:
    states = Activities()
    states.begin("s", Activity.TURN)
    states.end("s", Activity.COMPACTION)
    assert states.of("s") is Activity.TURN
