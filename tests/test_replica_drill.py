"""The restore drill the README promises, end to end with real processes: a `foya serve
--replicate file://…` under write load (agent turns through the fake provider, and PATCHes),
SIGKILL, the data directory wiped, `foya restore --from-replica` into it. Everything the kernel
acknowledged more than the documented lag before the kill must be back, and `foya check` must
be clean."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.cli_inprocess import foya_check
from support.fake_provider import Agent, FakeProvider, answer, connect
from support.helpers import Launcher, base_env, run_foya, short_tmpdir
from support.streams_helpers import unix_kernel

# The README's bound: a change reaches a healthy replica within about 2 s. One more second for
# the moment of the kill itself.
LAG = 3.0
LOAD_SECONDS = 6.0


@pytest.fixture
def root() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


def titles_in(db: Path) -> set[str]:
    """Every title a stored `session_updated` set."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT json_extract(payload_json, '$.title') FROM events"
            " WHERE kind = 'session_updated'"
        )
        return {str(title) for (title,) in rows if title is not None}
    finally:
        conn.close()


MIN_TITLES, MIN_ANSWERS = 20, 3


def enough_old(titles: list[tuple[float, str]], turns: list[tuple[float, str]]) -> bool:
    """Whether more than the minimum of each kind of write was acknowledged over LAG ago."""
    before = time.monotonic() - LAG
    old_titles = sum(1 for at, _ in titles if at < before)
    return old_titles > MIN_TITLES and sum(1 for at, _ in turns if at < before) > MIN_ANSWERS


def answers_in(db: Path) -> set[str]:
    """The content of every stored assistant message."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT json_extract(payload_json, '$.content') FROM events"
            " WHERE kind = 'message_end' AND json_extract(payload_json, '$.role') = 'assistant'"
        )
        return {str(content) for (content,) in rows}
    finally:
        conn.close()


def test_kill_wipe_and_restore_from_the_replica_loses_nothing_older_than_the_lag(
    tmp_path: Path, root: Path
) -> None:
    home = root / "home"
    home.mkdir()
    replica = tmp_path / "replica"
    env = base_env(HOME=str(home), FOYA_REPLICA_URL=f"file://{replica}")
    launcher = Launcher(tmp_path / "procs")
    acked_titles: list[tuple[float, str]] = []
    acked_turns: list[tuple[float, str]] = []
    failures: list[str] = []
    try:
        with FakeProvider.running() as fake:
            served = unix_kernel(launcher, root, "k", env=env)
            with served.client() as client:
                client.timeout = httpx.Timeout(30.0)
                agent = Agent(served, fake, client, connect(client, fake)["id"])
                talker = agent.session()
                patched = agent.session()
                stop = threading.Event()

                def patches() -> None:
                    with served.client() as own:
                        n = 0
                        while not stop.is_set():
                            title = f"title-{n}"
                            try:
                                response = own.patch(
                                    f"/sessions/{patched.id}", json={"title": title}
                                )
                            except httpx.TransportError:
                                return  # the kernel was killed
                            if response.status_code == 200:
                                acked_titles.append((time.monotonic(), title))
                            else:
                                failures.append(response.text)
                            n += 1
                            time.sleep(0.02)

                writer = threading.Thread(target=patches, daemon=True)
                writer.start()
                end = time.monotonic() + LOAD_SECONDS
                n = 0
                # At least LOAD_SECONDS, and on a busy machine until enough writes are older
                # than LAG for the check below to mean something (bounded by the test limit).
                while time.monotonic() < end or not enough_old(acked_titles, acked_turns):
                    text = f"answer-{n}"
                    frames = talker.turn(answer(text), message=f"question {n}")
                    assert frames[-1].data["payload"]["status"] == "completed"
                    acked_turns.append((time.monotonic(), text))
                    n += 1
                served.kernel.proc.send_signal(signal.SIGKILL)
                killed = time.monotonic()
                served.kernel.proc.wait(30)
                stop.set()
                writer.join(30)
        assert not failures, failures[:3]
        data_dir = served.data_dir
        shutil.rmtree(data_dir)
        done = run_foya(
            "restore",
            "--from-replica",
            f"file://{replica}",
            "--data-dir",
            str(data_dir),
            env=base_env(HOME=str(home)),
            timeout=120,
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        foya_check(data_dir)
        db = data_dir / "foya.db"
        old_titles = {t for at, t in acked_titles if at < killed - LAG}
        old_answers = {t for at, t in acked_turns if at < killed - LAG}
        assert len(old_titles) > MIN_TITLES and len(old_answers) > MIN_ANSWERS  # the load ran
        assert old_titles <= titles_in(db), sorted(old_titles - titles_in(db))[:5]
        assert old_answers <= answers_in(db), sorted(old_answers - answers_in(db))[:5]
        # The files came back too: the connection to the fake provider is in connections.json.
        assert (data_dir / "connections.json").is_file()
    finally:
        launcher.close()
