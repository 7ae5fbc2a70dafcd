"""Telegram for the channel runtime: `TelegramPlatform` (a `Platform`).

Module map:

- `platform`: `TelegramPlatform`, long polling with our own offset, sends, edits, presses;
- `cursor`: the `getUpdates` offset, moved past an update only once the runtime acked it;
- `updates`: an update → `Inbound` (which group messages are addressed, the text cleaned of
  the bot's mention and command suffix);
- `formatting`: an `Outbound` as Telegram HTML (escaped, status in italics), split at 4,096;
- `bot`: the Bot API through python-telegram-bot's `Bot` and the one exception map (the only
  module that imports the library, when a platform starts).

The base URL is the setting `FOYA_TELEGRAM_API_URL` (`https://api.telegram.org`, or a local
Bot API server); the token goes in its path (`/bot<token>/<method>`).
"""

from app.kernel.channels.telegram.platform import DEFAULT_API_URL, TelegramPlatform

__all__ = ["DEFAULT_API_URL", "TelegramPlatform"]
