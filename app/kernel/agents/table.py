"""The runs the kernel knows, by id, and the tree they form: a run's child session may start
runs of its own, so the runs under a session are those it started, those their children
started, and so on at any depth.

A run is cancelled once, with the reason its end will give: a second cancel of its task would
cut its clean-up short.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from app.kernel.agents.errors import RunNotFound
from app.kernel.agents.runs import AgentRun

CANCELLED = "the agent run was cancelled"


class RunTable:
    """Every run in memory, with why each cancelled one was cancelled."""

    def __init__(self) -> None:
        self._runs: dict[str, AgentRun] = {}
        self._why: dict[str, str] = {}  # why a run was cancelled, by run id

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._runs

    def __iter__(self) -> Iterator[AgentRun]:
        return iter(list(self._runs.values()))

    def __getitem__(self, run_id: str) -> AgentRun:
        return self._runs[run_id]

    def get(self, run_id: str) -> AgentRun | None:
        return self._runs.get(run_id)

    def add(self, run: AgentRun) -> None:
        self._runs[run.id] = run

    def drop(self, run: AgentRun) -> None:
        self._runs.pop(run.id, None)

    def holds(self, run: AgentRun) -> bool:
        """Whether `run` is still known (not forgotten with its deleted parent)."""
        return self._runs.get(run.id) is run

    def find(self, session: str, run_id: str) -> AgentRun:
        """The run `session` started with this id; `RunNotFound` if there is none."""
        run = self._runs.get(run_id)
        if run is None or run.parent_session_id != session:
            raise RunNotFound(f"agent run {run_id} not found")
        return run

    def started_by(self, session: str) -> list[AgentRun]:
        """The runs `session` started, oldest first."""
        return [r for r in self._runs.values() if r.parent_session_id == session]

    def tree(self, root_run: str) -> list[AgentRun]:
        """The runs of one tree (one root run)."""
        return [r for r in self._runs.values() if r.root_run_id == root_run]

    def of_root_session(self, root_session: str) -> list[AgentRun]:
        """The runs whose tree hangs under `root_session`, oldest first."""
        return [r for r in self._runs.values() if r.root_session_id == root_session]

    def root_runs(self) -> set[str]:
        return {r.root_run_id for r in self._runs.values()}

    def under(self, session: str) -> list[AgentRun]:
        """Every run below `session`: those it started, those their children started, …"""
        found: dict[str, AgentRun] = {}
        parents = {session}
        while parents:
            more = [
                r
                for r in self._runs.values()
                if r.parent_session_id in parents and r.id not in found
            ]
            found.update((r.id, r) for r in more)
            parents = {r.child_session_id for r in more if r.child_session_id}
        return list(found.values())

    def cancel(self, runs: Iterable[AgentRun], why: str) -> None:
        """Cancel each unfinished run's task once, remembering `why`."""
        for run in runs:
            if run.active and run.worker and not run.worker.done() and run.id not in self._why:
                self._why[run.id] = why
                run.worker.cancel()

    def why(self, run: AgentRun) -> str:
        """Why `run` was cancelled (a plain cancel if nobody said)."""
        return self._why.get(run.id, CANCELLED)

    def settled(self, run: AgentRun) -> None:
        """`run` ended: a later cancel has nothing to say about it."""
        self._why.pop(run.id, None)
