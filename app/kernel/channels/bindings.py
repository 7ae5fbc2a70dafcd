"""Which chat talks to which session: one to one, across every channel.

A thin rule over the store's `channel_conversations` (app.store.conversations): the
conversation key of a chat is Foya's `chat:<chat id>`, its external id the chat id. Binding a
chat replaces its older session, and takes the session from any chat it was bound to before
(that one is left unbound). The store's failures become `BindingFailed` (reads) and
`UnbindFailed` (writes); a full disk stays `insufficient_storage`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from app.errors import FoyaError
from app.kernel.channels.errors import BindingFailed, UnbindFailed
from app.kernel.channels.pairings import ConversationBindingWire, binding_wire
from app.store import Conversation, Store

T = TypeVar("T")


def key_of(chat: str) -> str:
    """The conversation key of a chat (Foya's `chat:<id>`)."""
    return f"chat:{chat}"


async def _mapped(work: Awaitable[T], error: type[FoyaError], what: str) -> T:
    try:
        return await work
    except FoyaError:
        raise
    except Exception as exc:  # sqlite3's errors, which the kernel does not import
        raise error(f"{what}: {type(exc).__name__}") from exc


class Bindings:
    """The one-to-one binding of chats and sessions; what the conversation runtime calls."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def session_of(self, channel_id: str, chat: str) -> str | None:
        """The session `chat` of `channel_id` talks to, if it is bound (the stored id: the
        caller checks that the session still exists)."""
        read = self.store.conversation(channel_id, key_of(chat))
        found = await _mapped(read, BindingFailed, "read channel conversation")
        return found.active_session_id if found and found.active_session_id else None

    async def bind(
        self,
        channel_id: str,
        chat: str,
        session_id: str,
        display_name: str,
        *,
        kind: str = "private",
    ) -> None:
        """Bind `chat` to `session_id`, replacing any older binding of that chat or that
        session; `kind` is the chat's (Telegram's `private`, `group`, `supergroup`; Feishu's
        `p2p`, `group`)."""
        item = Conversation(
            channel_id=channel_id,
            conversation_key=key_of(chat),
            kind=kind.strip() or "private",
            external_id=chat,
            display_name=display_name.strip(),
            active_session_id=session_id,
            last_seen_at_ns=0,
            updated_at_ns=0,
        )
        write = self.store.bind_conversation(item)
        await _mapped(write, UnbindFailed, "bind channel conversation")

    async def unbind_session(self, session_id: str) -> None:
        """Leave every chat bound to `session_id` unbound (their rows stay)."""
        write = self.store.unbind_conversations(session_id)
        await _mapped(write, UnbindFailed, "unbind channel conversation")

    async def binding_of(self, session_id: str) -> ConversationBindingWire | None:
        """The chat bound to `session_id` as clients read it, or None."""
        read = self.store.conversation_of(session_id)
        found = await _mapped(read, BindingFailed, "read channel conversation")
        return None if found is None else binding_wire(found)

    async def binding_for(self, channel_id: str, chat: str) -> ConversationBindingWire | None:
        """The conversation of `chat` of `channel_id`, bound or not, or None."""
        read = self.store.conversation(channel_id, key_of(chat))
        found = await _mapped(read, BindingFailed, "read channel conversation")
        return None if found is None else binding_wire(found)

    async def delete_channel(self, channel_id: str) -> None:
        """Forget every conversation of a deleted channel (a FoyaError if it fails)."""
        await self.store.delete_conversations(channel_id)
