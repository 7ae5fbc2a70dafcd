"""The session side of the channels: a session's binding, its pairings, the `/bind` of a
chat, and Feishu's QR registrations (a part of `Channels`, kept apart for its size).

A session of these routes must be a top-level session (Foya's `findTopLevelSession`): a
sub-agent's session is `session_not_found`. Pairing checks, in Foya's order: the session, its
approval mode (`auto` or `full_access`, else 409 `interactive_session`: nobody in a chat can
answer an approval), a `channel_id` (trimmed for the lookup), the channel, then that it is
enabled and running (409 `channel_pairing_failed`).

A channel's start runs in the background (app.kernel.channels.runtime), but Foya's managers
answer once their bot is started, and the desktop acts on that answer: it reads `running` from
a create or a `PUT` and pairs straight away. So a change, and a pairing, first wait for a start
in flight to end (`started`: `Channels.register_runner` wraps each runner so that every start
tells when it ended), up to `START_WAIT` seconds: the answer then says `running`, or `error`
with why.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from app.errors import BadRequest
from app.kernel.channels.bindings import Bindings
from app.kernel.channels.catalog import Entry
from app.kernel.channels.errors import (
    NOT_EXIST,
    ChannelNotFound,
    ChannelSessionNotFound,
    ChannelsUnavailable,
    InteractiveSession,
    PairingFailed,
    RegistrationFailed,
    RegistrationNotFound,
)
from app.kernel.channels.pairings import ConversationBindingWire, Pairings, PairingWire
from app.kernel.channels.records import ChannelConfig, Secrets
from app.kernel.channels.registration import (
    FeishuRegistrationState,
    Registrar,
    RegistrationInput,
    normalised,
)
from app.kernel.channels.runtime import ChannelRunner, Runs
from app.kernel.sessionrow import SessionRow
from app.kernel.sessions import Sessions
from app.store.events import SessionNotFound

#: Approval modes a chat-bound session may have: nobody in a chat answers an approval.
UNATTENDED = ("auto", "full_access")
#: How long a change or a pairing waits for a channel's start in flight: a platform's first
#: round trips, and for Feishu the SDK's import (about 5 s, more on a busy machine).
START_WAIT = 10.0


class _Watched:
    """A `ChannelRunner` whose every start, once it returned or raised (or was cancelled),
    calls `ended`. The run state is set right after, before anything else runs."""

    def __init__(self, runner: ChannelRunner, ended: Callable[[], None]) -> None:
        self.runner, self.ended = runner, ended

    async def start(self, channel: ChannelConfig, secrets: Secrets) -> None:
        try:
            await self.runner.start(channel, secrets)
        finally:
            self.ended()

    async def stop(self, channel_id: str) -> None:
        await self.runner.stop(channel_id)


class Linking:
    """Bindings, pairings and registrations, over the channels of `Channels`."""

    sessions: Sessions
    bindings: Bindings
    pairings: Pairings
    runs: Runs

    def __init__(self) -> None:
        self._registrar: Registrar | None = None
        self._ended = asyncio.Event()  # set (and replaced) as any channel's start ends

    def available(self) -> None:
        raise NotImplementedError

    def entry(self, channel_id: str, message: str = "channel not found") -> Entry:
        raise NotImplementedError

    async def _session(self, session_id: str) -> SessionRow:
        self.available()
        try:
            row = await self.sessions.row(session_id)
        except SessionNotFound:
            row = None
        if row is None or row["parent_id"] is not None:
            raise ChannelSessionNotFound("session not found")
        return row

    def _starting(self, channel_id: str) -> bool:
        try:
            config, _ = self.entry(channel_id)
        except (ChannelNotFound, ChannelsUnavailable):  # deleted meanwhile, or shut down
            return False
        # Enabled, a runner for its kind, no result yet: its start is under way.
        waiting = config.enabled and config.kind in self.runs.runners
        return waiting and self.runs.state(config.id) == ("stopped", "")

    def watched(self, runner: ChannelRunner) -> ChannelRunner:
        """`runner`, saying when each of its starts ends (what `started` waits for)."""
        return _Watched(runner, self._start_ended)

    def _start_ended(self) -> None:
        self._ended.set()
        self._ended = asyncio.Event()

    async def started(self, channel_id: str) -> None:
        """Wait, up to `START_WAIT` s, while the channel's start is under way."""
        deadline = time.monotonic() + START_WAIT
        while self._starting(channel_id) and (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), left)

    # -- bindings ------------------------------------------------------------------------------

    async def binding(self, session_id: str) -> ConversationBindingWire | None:
        """The chat bound to the session, or None."""
        await self._session(session_id)
        return await self.bindings.binding_of(session_id)

    async def unbind(self, session_id: str) -> None:
        """Leave the session's chat unbound (nothing if none)."""
        await self._session(session_id)
        await self.bindings.unbind_session(session_id)

    async def session_removed(self, session_id: str) -> None:
        """A deleted session is bound to no chat and has no pending pairing."""
        self.pairings.forget_session(session_id)
        await self.bindings.unbind_session(session_id)

    # -- pairings ------------------------------------------------------------------------------

    async def interactive(self, session_id: str) -> None:
        """Raise unless the session exists and may be bound (its approvals need nobody)."""
        row = await self._session(session_id)
        if row["approval_mode"] not in UNATTENDED:
            raise InteractiveSession("channel-bound sessions require auto or full_access approval")

    async def start_pairing(self, session_id: str, channel_id: str) -> PairingWire:
        """A pending pairing of the session with the channel; its command binds a chat."""
        await self.interactive(session_id)
        if channel_id == "":
            raise BadRequest("channel_id is required")
        config, _ = self.entry(channel_id.strip(), NOT_EXIST)
        await self.started(config.id)
        status, last_error = self.runs.state(config.id)
        if not config.enabled:
            raise PairingFailed("messaging channel is disabled")
        if status != "running" and last_error:
            raise PairingFailed(f"messaging channel is unavailable: {last_error}")
        if status != "running":
            raise PairingFailed("messaging channel is not running")
        return self.pairings.create(config.id, session_id).wire()

    async def pairing(self, pairing_id: str) -> PairingWire:
        self.available()
        pairing = self.pairings.get(pairing_id)
        if pairing.status == "completed" and pairing.conversation is None:
            # Consumed by a runtime that bound the chat itself: read the binding it made.
            pairing.conversation = await self.bindings.binding_for(pairing.channel_id, pairing.chat)
        return pairing.wire()

    async def cancel_pairing(self, pairing_id: str) -> None:
        self.available()
        self.pairings.cancel(pairing_id)

    async def pair(
        self, code: str, channel_id: str, chat: str, display_name: str, *, kind: str = "private"
    ) -> str:
        """`/bind <code>` sent in `chat` of `channel_id`: consume the code, bind the chat to
        its session; that session's id. `PairingFailed` if the code cannot be used or its
        session is gone (the pairing is then cancelled)."""
        pairing = self.pairings.usable(code, channel_id, chat)
        try:
            await self.sessions.row(pairing.session_id)
        except SessionNotFound:
            self.pairings.drop(pairing)
            raise PairingFailed("channel pairing session not found") from None
        session_id = pairing.session_id
        await self.bindings.bind(channel_id, chat, session_id, display_name, kind=kind)
        bound = await self.bindings.binding_for(channel_id, chat)
        self.pairings.complete(pairing, chat, bound)
        return session_id

    # -- Feishu QR registrations ---------------------------------------------------------------

    def register_registrar(self, registrar: Registrar) -> None:
        """Run Feishu's QR registrations with `registrar`."""
        self._registrar = registrar

    async def begin_registration(self, given: RegistrationInput) -> FeishuRegistrationState:
        self.available()
        given = normalised(given)
        if self._registrar is None:
            raise RegistrationFailed("Feishu registration is unavailable")
        return await self._registrar.begin(given)

    async def registration(self, registration_id: str) -> FeishuRegistrationState:
        self.available()
        if self._registrar is None:
            raise RegistrationNotFound("registration not found")
        return await self._registrar.poll(registration_id)

    async def cancel_registration(self, registration_id: str) -> None:
        self.available()
        if self._registrar is None:
            raise RegistrationNotFound(f'{NOT_EXIST}: Feishu registration "{registration_id}"')
        await self._registrar.cancel(registration_id)
