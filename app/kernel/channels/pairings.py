"""Pairing codes: how a chat is bound to a session (Foya's `ConversationPairingStore`).

The desktop asks for a pairing of a session with a channel and shows its `command`
(`/bind <code>`); sent in a chat of that channel, it binds the chat to the session. In memory
only, shared by every channel, lost on restart.

- Code: 8 characters of `ALPHABET` (no 0, 1, I, O), unique among the codes held (8 tries).
- Life: `pending` for `TTL`, then `expired` (checked lazily, on every operation); `completed`
  once consumed; `cancelled` by DELETE or by a newer pairing of the same session (one pending
  pairing per session, whatever its channel). A cancelled code is freed at once; any pairing
  is forgotten `KEPT` after it expired (then it is 404).
- `consume(code, channel_id, chat)`, in order: an unknown (or cancelled) code, another
  channel's, an expired one, one used by another chat are refused (`PairingFailed`); the same
  chat consuming again gets the same session (idempotent).

The clock is injected (`now`), so tests move time instead of waiting for it.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NotRequired

from typing_extensions import TypedDict

from app.kernel.channels.errors import PairingFailed, PairingNotFound
from app.store import Conversation

ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
CODE_LENGTH = 8
TTL = dt.timedelta(minutes=10)
KEPT = dt.timedelta(hours=1)
TRIES = 8

PairingStatus = Literal["pending", "completed", "expired", "cancelled"]


class ConversationBindingWire(TypedDict):
    """A bound chat as clients read it (Foya's `ConversationBinding`)."""

    channel_id: str
    conversation_key: str
    kind: str
    external_id: str
    display_name: NotRequired[str]
    active_session_id: NotRequired[str]
    last_seen_at: str
    updated_at: str


class PairingWire(TypedDict):
    """A pairing as clients read it (Foya's `ConversationPairing`)."""

    id: str
    code: str
    command: str
    channel_id: str
    session_id: str
    status: str
    conversation: NotRequired[ConversationBindingWire]
    created_at: str
    expires_at: str
    completed_at: NotRequired[str]


def iso(moment: dt.datetime) -> str:
    """RFC 3339 in UTC, as the kernel's other times (Foya: local time, nanoseconds)."""
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def binding_wire(row: Conversation) -> ConversationBindingWire:
    out: dict[str, object] = {
        "channel_id": row.channel_id,
        "conversation_key": row.conversation_key,
        "kind": row.kind,
        "external_id": row.external_id,
    }
    if row.display_name:
        out["display_name"] = row.display_name
    if row.active_session_id:
        out["active_session_id"] = row.active_session_id
    out["last_seen_at"] = iso(dt.datetime.fromtimestamp(row.last_seen_at_ns / 1e9, dt.UTC))
    out["updated_at"] = iso(dt.datetime.fromtimestamp(row.updated_at_ns / 1e9, dt.UTC))
    return out  # type: ignore[return-value]


@dataclass
class Pairing:
    """One pairing; `chat` and `conversation` are set once it is completed."""

    id: str
    code: str
    channel_id: str
    session_id: str
    created_at: dt.datetime
    status: PairingStatus = "pending"
    chat: str = ""
    conversation: ConversationBindingWire | None = None
    completed_at: dt.datetime | None = None

    @property
    def expires_at(self) -> dt.datetime:
        return self.created_at + TTL

    def wire(self) -> PairingWire:
        out: dict[str, object] = {
            "id": self.id,
            "code": self.code,
            "command": f"/bind {self.code}",
            "channel_id": self.channel_id,
            "session_id": self.session_id,
            "status": self.status,
        }
        if self.conversation is not None:
            out["conversation"] = self.conversation
        out["created_at"] = iso(self.created_at)
        out["expires_at"] = iso(self.expires_at)
        if self.completed_at is not None:
            out["completed_at"] = iso(self.completed_at)
        return out  # type: ignore[return-value]


def code_of(text: str) -> str:
    """A code as a chat sends it: trimmed, upper case."""
    return text.strip().upper()


class Pairings:
    """Every pairing, by id and by code."""

    def __init__(self, now: Callable[[], dt.datetime]) -> None:
        self.now = now
        self._by_id: dict[str, Pairing] = {}
        self._by_code: dict[str, str] = {}  # code -> pairing id, cancelled ones freed

    def _refresh(self) -> dt.datetime:
        now = self.now()
        for pairing in list(self._by_id.values()):
            if pairing.status == "pending" and now >= pairing.expires_at:
                pairing.status = "expired"
            if now - pairing.expires_at > KEPT:
                del self._by_id[pairing.id]
                if self._by_code.get(pairing.code) == pairing.id:
                    del self._by_code[pairing.code]
        return now

    def create(self, channel_id: str, session_id: str) -> Pairing:
        """A new pending pairing; the session's previous pending one is cancelled."""
        now = self._refresh()
        for pairing in self._by_id.values():
            if pairing.session_id == session_id and pairing.status == "pending":
                self._cancel(pairing)
        for _ in range(TRIES):
            code = "".join(ALPHABET[b % len(ALPHABET)] for b in secrets.token_bytes(CODE_LENGTH))
            if code not in self._by_code:
                break
        else:
            raise PairingFailed("generate unique channel pairing code")
        pairing = Pairing(secrets.token_hex(16), code, channel_id, session_id, now)
        self._by_id[pairing.id] = pairing
        self._by_code[code] = pairing.id
        return pairing

    def get(self, pairing_id: str) -> Pairing:
        self._refresh()
        found = self._by_id.get(pairing_id)
        if found is None:
            raise PairingNotFound("channel pairing not found")
        return found

    def cancel(self, pairing_id: str) -> Pairing:
        """Cancel a pending pairing; any other is left as it is."""
        pairing = self.get(pairing_id)
        if pairing.status == "pending":
            self._cancel(pairing)
        return pairing

    def _cancel(self, pairing: Pairing) -> None:
        pairing.status = "cancelled"
        if self._by_code.get(pairing.code) == pairing.id:
            del self._by_code[pairing.code]

    def usable(self, code: str, channel_id: str, chat: str) -> Pairing:
        """The pairing `code` names, if `chat` of `channel_id` may consume it; else
        `PairingFailed`. Changes nothing."""
        self._refresh()
        pairing = self._by_id.get(self._by_code.get(code_of(code), ""))
        if pairing is None or pairing.status == "cancelled":
            raise PairingFailed("channel pairing code not found")
        if pairing.channel_id != channel_id:
            raise PairingFailed("channel pairing code belongs to another channel")
        if pairing.status == "expired":
            raise PairingFailed("channel pairing code expired")
        if pairing.status == "completed" and pairing.chat != chat:
            raise PairingFailed("channel pairing code already used")
        return pairing

    def complete(
        self, pairing: Pairing, chat: str, conversation: ConversationBindingWire | None = None
    ) -> None:
        """Mark a usable pairing consumed by `chat` (again: nothing changes)."""
        if pairing.status == "pending":
            pairing.status, pairing.chat, pairing.completed_at = "completed", chat, self.now()
        if conversation is not None:
            pairing.conversation = conversation

    def consume(self, code: str, channel_id: str, chat: str) -> str:
        """Complete the pairing of `code` for `chat` of `channel_id`; its session's id
        (`PairingFailed` if the code cannot be used). `Channels.pair` also binds the chat."""
        pairing = self.usable(code, channel_id, chat)
        self.complete(pairing, chat)
        return pairing.session_id

    def drop(self, pairing: Pairing) -> None:
        """Cancel a pairing whose session is gone, whatever its status."""
        self._cancel(pairing)

    def forget_session(self, session_id: str) -> None:
        """The session is gone: its pending pairing can no longer complete."""
        for pairing in self._by_id.values():
            if pairing.session_id == session_id and pairing.status == "pending":
                self._cancel(pairing)
