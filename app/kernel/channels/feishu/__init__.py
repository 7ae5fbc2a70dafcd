"""Feishu (and Lark) for the channel runtime: `FeishuPlatform` (a `Platform`) and
`FeishuRegistrar` (a `Registrar`, the QR "create a bot by scanning" flow).

Module map:

- `platform`: `FeishuPlatform`, the bridge between the SDK's thread and our loop (holding
  Feishu's acknowledgement until the runtime's `ack`), the dedupe by event id;
- `longconn`: lark-oapi's long-connection client on a thread and loop of its own (the only
  module that imports the SDK, when a connection starts: it takes seconds to import);
- `events`: event JSON → `Inbound` (who, which chat, the text without the bot's mention);
- `cards`: the interactive card of a message (status note, escaped markdown, buttons), and
  the splitting of long texts;
- `api`: the OpenAPI over HTTP (tenant token cache, the one error map);
- `registration`: `FeishuRegistrar`, the device flow on the accounts host.

The base URL is the setting `FOYA_FEISHU_API_URL` (`https://open.feishu.cn`; Lark:
`https://open.larksuite.com`); the accounts host of a registration is derived from it
(`registration.accounts_url_for`).
"""

from app.kernel.channels.feishu.platform import DEFAULT_API_URL, FeishuPlatform
from app.kernel.channels.feishu.registration import (
    FeishuCredentials,
    FeishuRegistrar,
    accounts_url_for,
)

__all__ = [
    "DEFAULT_API_URL",
    "FeishuCredentials",
    "FeishuPlatform",
    "FeishuRegistrar",
    "accounts_url_for",
]
