"""The errors of the channel routes (`/channels…`, `/sessions/{id}/channel-…`,
`/channel-pairings/…`, the legacy `/settings/feishu-bot`), with Foya's statuses and codes.

Exception map (status, code):

- `ChannelsUnavailable` 503 `channels_unavailable`: the channels are stopped (the kernel is
  shutting down)
- `InvalidChannel` 400 `channel_create_failed`: a new channel's settings break a rule (kind,
  approval mode, credentials of an enabled channel, a token or app id already used), or its
  catalog could not be written
- `InvalidChannelUpdate` 400 `channel_update_failed`: the same for a `PUT` (and a changed
  kind), and every failure of the legacy `PUT /settings/feishu-bot`
- `ChannelNotFound` 404 `channel_not_found`: no channel of that id
- `ChannelDeleteFailed` 500 `channel_delete_failed`: the catalog or the conversations could
  not be written
- `ChannelSessionNotFound` 404 `session_not_found`: no top-level session of that id
- `InteractiveSession` 409 `interactive_session`: pairing a session whose approvals need a
  person (approval mode not `auto` or `full_access`)
- `PairingFailed` 409 `channel_pairing_failed`: the channel is disabled or not running, the
  session is gone, no free code; also a `/bind` code that cannot be used
- `PairingNotFound` 404 `channel_pairing_not_found`: no pairing of that id (or pruned, an
  hour after it expired)
- `BindingFailed` 500 `channel_binding_failed`, `UnbindFailed` 500 `channel_unbind_failed`:
  the conversations could not be read or written
- `RegistrationFailed` 400 `feishu_registration_failed`: a QR registration's input breaks a
  rule, or no registrar is there to start it
- `RegistrationNotFound` 404 `feishu_registration_not_found`
- `app.errors.BadRequest` 400 `bad_request`: a pairing without `channel_id`

Messages are Foya's, including its `file does not exist` where Go reported `os.ErrNotExist`.
"""

from __future__ import annotations

from app.errors import BadRequest, Conflict, FoyaError, NotFound

#: Go's `os.ErrNotExist.Error()`, which Foya answers for a channel a change cannot find.
NOT_EXIST = "file does not exist"


class ChannelsUnavailable(FoyaError):
    """The channels are stopped (the kernel is shutting down)."""

    status = 503
    code = "channels_unavailable"


class InvalidChannel(BadRequest):
    """A new channel's settings break a rule, or the catalog could not be written."""

    code = "channel_create_failed"


class InvalidChannelUpdate(InvalidChannel):
    """A channel's new settings break a rule (or change its kind), or could not be written."""

    code = "channel_update_failed"


class ChannelNotFound(NotFound):
    """No channel of that id."""

    code = "channel_not_found"


class ChannelDeleteFailed(FoyaError):
    """The channel catalog or its conversations could not be written."""

    status = 500
    code = "channel_delete_failed"


class ChannelSessionNotFound(NotFound):
    """The session of a channel route is not a top-level session of this kernel."""

    code = "session_not_found"


class InteractiveSession(Conflict):
    """A session whose tool approvals need a person cannot be bound to a chat."""

    code = "interactive_session"


class PairingFailed(Conflict):
    """A pairing cannot be started (channel disabled or not running, session gone, no free
    code), or a `/bind` code cannot be used (unknown, expired, used, another channel's)."""

    code = "channel_pairing_failed"


class PairingNotFound(NotFound):
    """No channel pairing of that id."""

    code = "channel_pairing_not_found"


class BindingFailed(FoyaError):
    """The channel conversations could not be read."""

    status = 500
    code = "channel_binding_failed"


class UnbindFailed(FoyaError):
    """The channel conversations could not be written."""

    status = 500
    code = "channel_unbind_failed"


class RegistrationFailed(BadRequest):
    """A Feishu QR registration cannot start: its input breaks a rule, or there is no
    registrar."""

    code = "feishu_registration_failed"


class RegistrationNotFound(NotFound):
    """No Feishu registration of that id."""

    code = "feishu_registration_not_found"
