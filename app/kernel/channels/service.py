"""`Channels`: the messaging channels (Foya's `channelhub.Manager`): their catalog, their runs,
the pairings and bindings of their chats, and Feishu's QR registration.

Listing: every Feishu channel first, then every Telegram one, each kind in creation order.
`PUT` replaces every setting, except that a blank secret (token, app secret) or name keeps the
stored one, so a secret cannot be cleared through the API. Every create and `PUT` of an enabled
channel (re)starts it, even unchanged, and answers once that start ended (or after
`linking.START_WAIT`); disabling or deleting stops it. Deleting a channel also
deletes its conversations; pairings naming it stay readable but can never complete.

The session side (binding, pairing) is `app.kernel.channels.linking`, which this class
extends. Errors: app.kernel.channels.errors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import cast

from app.kernel.channels import catalog
from app.kernel.channels.bindings import Bindings
from app.kernel.channels.catalog import Entry
from app.kernel.channels.errors import (
    NOT_EXIST,
    ChannelDeleteFailed,
    ChannelNotFound,
    ChannelsUnavailable,
    InvalidChannel,
    InvalidChannelUpdate,
)
from app.kernel.channels.linking import Linking
from app.kernel.channels.pairings import Pairings
from app.kernel.channels.records import (
    KINDS,
    ChannelConfig,
    ChannelInput,
    ChannelKind,
    ChannelWire,
    FeishuBotWire,
    Secrets,
    default_name,
    kind_of,
    new_id,
    normalised,
    problem,
    wire,
)
from app.kernel.channels.registration import Credentials, RegistrationInput
from app.kernel.channels.runtime import ChannelRunner, Runs, Sleep
from app.kernel.sessions import Sessions
from app.logs import get_logger
from app.store import Store

#: The legacy `/settings/feishu-bot` answer while there is no Feishu channel (Foya's).
LEGACY_PLACEHOLDER: FeishuBotWire = {
    "id": "",
    "kind": "feishu",
    "name": "Feishu Bot",
    "locale": "zh-CN",
    "enabled": False,
    "app_id": "",
    "has_app_secret": False,
    "approval_mode": "auto",
    "allowed_users": None,
    "allowed_chats": None,
    "allow_all": False,
    "status": "stopped",
}


class Channels(Linking):
    """The channels, their runs, and (from `Linking`) their chats' sessions."""

    def __init__(
        self,
        data_dir: Path,
        store: Store,
        sessions: Sessions,
        now: Callable[[], dt.datetime],
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        """`now` is the pairings' clock, `sleep` waits out a failed start's back-off (tests
        drive both)."""
        self.files = catalog.files(data_dir)
        self.sessions = sessions
        self.bindings = Bindings(store)
        self.pairings = Pairings(now)
        self.runs = Runs(sleep)
        #: The status callback a runner is built with (app.kernel.channels.runtime).
        self.report = self.runs.report
        self.log = get_logger("foya.channels")
        self._items: dict[ChannelKind, dict[str, Entry]] = {kind: {} for kind in KINDS}
        self._lock = asyncio.Lock()  # one change (and its file write) at a time
        self._closed = False
        super().__init__()

    # -- life ----------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the catalog (what cannot be read is kept aside, and dropped). Blocking."""
        for kind, file in self.files.items():
            entries, problems = file.load()
            if problems:
                file.keep_aside(problems)
                file.write(entries)
            self._items[kind] = {config.id: (config, secrets) for config, secrets in entries}

    async def start(self) -> None:
        """Start every enabled channel (those of a kind no runner is registered for wait)."""
        for config, secrets in self._entries():
            await self.runs.start(config, secrets)

    async def stop(self) -> None:
        """Stop every channel; the routes then answer 503 `channels_unavailable`."""
        self._closed = True
        await self.runs.stop_all()

    def register_runner(self, kind: ChannelKind, runner: ChannelRunner) -> None:
        """Run `kind`'s channels with `runner` (built with `report` as its status callback)."""
        self.runs.register(kind, self.watched(runner))

    def available(self) -> None:
        """Raise `ChannelsUnavailable` once the channels are stopped."""
        if self._closed:
            raise ChannelsUnavailable("channels are unavailable")

    # -- reads ---------------------------------------------------------------------------------

    def _entries(self) -> list[Entry]:
        return [entry for kind in KINDS for entry in self._items[kind].values()]

    def _wire(self, entry: Entry) -> ChannelWire:
        config, secrets = entry
        return wire(config, secrets, *self.runs.state(config.id))

    def all(self) -> list[ChannelWire]:
        self.available()
        return [self._wire(entry) for entry in self._entries()]

    def entry(self, channel_id: str, message: str = "channel not found") -> Entry:
        """A channel's settings and secrets; `ChannelNotFound` with `message` if unknown."""
        self.available()
        for kind in KINDS:
            if (found := self._items[kind].get(channel_id)) is not None:
                return found
        raise ChannelNotFound(message)

    def get(self, channel_id: str) -> ChannelWire:
        return self._wire(self.entry(channel_id))

    # -- writes --------------------------------------------------------------------------------

    async def create(self, given: ChannelInput) -> ChannelWire:
        """A new channel (started if enabled); `InvalidChannel` if its settings break a rule."""
        self.available()
        kind = kind_of(given.kind.strip())
        if kind is None:
            raise InvalidChannel("unsupported channel kind")
        async with self._lock:
            config, secrets = normalised(new_id(kind), kind, given)
            if not config.name:
                name = default_name(kind, len(self._items[kind]))
                config = dataclasses.replace(config, name=name)
            await self._save(config, secrets, InvalidChannel)
            await self.runs.start(config, secrets)
        await self.started(config.id)
        return self.get(config.id)

    async def replace(self, channel_id: str, given: ChannelInput) -> ChannelWire:
        """Replace every setting but a blank secret or name; restart it if enabled."""
        async with self._lock:  # looked up inside: a delete may have come first
            old, old_secrets = self.entry(channel_id, NOT_EXIST)
            if given.kind.strip() and given.kind.strip() != old.kind:
                raise InvalidChannelUpdate("channel kind cannot be changed")
            config, secrets = normalised(old.id, old.kind, given)
            config = dataclasses.replace(config, name=config.name or old.name)
            secrets = Secrets(
                token=secrets.token or old_secrets.token,
                app_secret=secrets.app_secret or old_secrets.app_secret,
            )
            await self._save(config, secrets, InvalidChannelUpdate)
            await self.runs.start(config, secrets)
        await self.started(config.id)
        return self.get(config.id)

    async def _save(
        self, config: ChannelConfig, secrets: Secrets, error: type[InvalidChannel]
    ) -> None:
        if (wrong := problem(config, secrets)) is not None:
            raise error(wrong)
        for other, other_secrets in self._items[config.kind].values():
            if other.id == config.id:
                continue
            if secrets.token and secrets.token == other_secrets.token:
                raise error("a Telegram channel with this token already exists")
            if config.app_id and config.app_id == other.app_id:
                raise error("a Feishu channel with this app ID already exists")
        items = {**self._items[config.kind], config.id: (config, secrets)}
        try:
            await self.files[config.kind].save(items.values())
        except OSError as exc:
            raise error(f"save channel catalog: {exc.strerror or exc}") from exc
        self._items[config.kind] = items

    async def delete(self, channel_id: str) -> None:
        """Remove a channel: stop it, forget its conversations."""
        async with self._lock:
            config, _ = self.entry(channel_id, NOT_EXIST)
            items = dict(self._items[config.kind])
            del items[config.id]
            try:
                await self.files[config.kind].save(items.values())
            except OSError as exc:
                raise ChannelDeleteFailed(f"save channel catalog: {exc.strerror or exc}") from exc
            self._items[config.kind] = items
            await self.runs.stop(config.id)
        try:
            await self.bindings.delete_channel(config.id)
        except Exception as exc:
            raise ChannelDeleteFailed(f"delete channel conversations: {exc}") from exc

    async def complete_registration(
        self, given: RegistrationInput, found: Credentials
    ) -> tuple[ChannelWire, str]:
        """A scan's end: update the Feishu channel of the same app id (its name kept, the
        allow-lists joined, `allow_all` if either, the new secret, enabled), else create one
        from `given`; the scanner may talk to it. The channel, and why it did not start, if
        it did not."""
        users = (*given.allowed_users, found.open_id)
        old = next((e for e in self._items["feishu"].values() if e[0].app_id == found.app_id), None)
        chats, allow_all, name = given.allowed_chats, given.allow_all, given.name
        if old is not None:
            users = (*old[0].allowed_users, *users)
            chats = (*old[0].allowed_chats, *chats)
            allow_all, name = allow_all or old[0].allow_all, old[0].name
        settings = ChannelInput(
            kind="feishu",
            name=name,
            locale=given.locale,
            enabled=True,
            app_id=found.app_id,
            app_secret=found.app_secret,
            connection_id=given.connection_id,
            model=given.model,
            project_id=given.project_id,
            approval_mode=given.approval_mode,
            allowed_users=users,
            allowed_chats=chats,
            allow_all=allow_all,
        )
        if old is None:
            channel = await self.create(settings)
        else:
            channel = await self.replace(old[0].id, settings)
        return channel, channel.get("last_error", "")

    # -- the legacy single Feishu bot (`/settings/feishu-bot`) ----------------------------------

    def feishu_bot(self) -> FeishuBotWire:
        """The first Feishu channel as Foya's Feishu-only versions showed it (`app_id` always,
        no `has_token`), or their placeholder when there is none."""
        self.available()
        first = next(iter(self._items["feishu"].values()), None)
        if first is None:
            return LEGACY_PLACEHOLDER.copy()
        shown: dict[str, object] = {}
        for key, value in self._wire(first).items():
            if key == "has_app_secret":
                shown["app_id"] = first[0].app_id  # where Go declared it, never omitted
            if key not in ("app_id", "has_token"):
                shown[key] = value
        return cast(FeishuBotWire, shown)

    async def set_feishu_bot(self, given: ChannelInput) -> FeishuBotWire:
        """Create the first Feishu channel, or replace it (an empty name: `Feishu Bot`);
        every failure is `InvalidChannelUpdate`, as in Foya."""
        self.available()
        given = dataclasses.replace(given, kind="feishu", name=given.name.strip() or "Feishu Bot")
        first = next(iter(self._items["feishu"]), None)
        try:
            if first is None:
                await self.create(given)
            else:
                await self.replace(first, given)
        except InvalidChannel as exc:
            raise InvalidChannelUpdate(exc.message) from exc
        return self.feishu_bot()
