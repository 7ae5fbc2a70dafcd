"""The session side of the channels: a session's binding, its pairings, the `/bind` of a
chat, and Feishu's QR registrations (a part of `Channels`, kept apart for its size).

A session of these routes must be a top-level session (Foya's `findTopLevelSession`): a
sub-agent's session is `session_not_found`. Pairing checks, in Foya's order: the session, its
approval mode (`auto` or `full_access`, else 409 `interactive_session`: nobody in a chat can
answer an approval), a `channel_id` (trimmed for the lookup), the channel, then that it is
enabled and running (409 `channel_pairing_failed`).
"""

from __future__ import annotations

from app.errors import BadRequest
from app.kernel.channels.bindings import Bindings
from app.kernel.channels.catalog import Entry
from app.kernel.channels.errors import (
    NOT_EXIST,
    ChannelSessionNotFound,
    InteractiveSession,
    PairingFailed,
    RegistrationFailed,
    RegistrationNotFound,
)
from app.kernel.channels.pairings import ConversationBindingWire, Pairings, PairingWire
from app.kernel.channels.registration import (
    FeishuRegistrationState,
    Registrar,
    RegistrationInput,
    normalised,
)
from app.kernel.channels.runtime import Runs
from app.kernel.sessionrow import SessionRow
from app.kernel.sessions import Sessions
from app.store.events import SessionNotFound

#: Approval modes a chat-bound session may have: nobody in a chat answers an approval.
UNATTENDED = ("auto", "full_access")


class Linking:
    """Bindings, pairings and registrations, over the channels of `Channels`."""

    sessions: Sessions
    bindings: Bindings
    pairings: Pairings
    runs: Runs

    def __init__(self) -> None:
        self._registrar: Registrar | None = None

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
