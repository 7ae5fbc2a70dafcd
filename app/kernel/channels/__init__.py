"""Messaging channels (Foya's Feishu and Telegram bots): chats of a platform talking to
sessions of the kernel.

Configuration and HTTP surface:
- `records`: a channel's settings, secrets and wire shape (normalisation and validation)
- `catalog`: the catalog files in the data directory (`feishu-channels.json`,
  `telegram-channels.json`)
- `service`: `Channels`, which owns the catalog, the runs, the pairings and the bindings
- `linking`: the session side of `Channels` (binding, pairing, `/bind`, QR registrations)
- `pairings`: the in-memory pairing codes (`/bind CODE`) and their wire shapes
- `bindings`: one chat to one session, over the store's `channel_conversations`
- `runtime`: `ChannelRunner` (the port a platform's runner fits) and each channel's run state
- `registration`: `Registrar` (the port of Feishu's QR registration) and its wire shapes
- `errors`: what the routes answer

Conversation runtime and platforms:
- `platform`: `Platform`, the one contract between the runtime and a chat platform
- `redaction`: the platforms' credentials masked in our texts and their libraries' logs
- `conversation`, `conversation_follow`, `conversation_recovery`, `inbound`, `decisions`,
  `replies`, `texts`: one channel's chats as turns of their sessions
- `telegram/`, `feishu/`: the platforms, their libraries imported only when a channel of their
  kind runs

Nothing here is imported by a start while no channel is recorded (app.kernel.wiring.ondisk).
"""

from typing import TYPE_CHECKING

from app.kernel.lazyexports import LazyExports

if TYPE_CHECKING:
    from app.kernel.channels.service import Channels

__getattr__ = LazyExports(__name__, {"app.kernel.channels.service": ("Channels",)})

__all__ = ["Channels"]
