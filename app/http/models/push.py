"""Request and response models of `/push` (Web Push; ours, Foya has none).

A subscription is posted as the browser's `PushSubscription.toJSON()` gives it (its
`expirationTime` and unknown fields are ignored), with an optional `label` naming the device.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from app.http.models.common import Lenient


class PushKeysIn(Lenient):
    p256dh: Annotated[str, Field(max_length=200, description="base64url, 65 bytes")]
    auth: Annotated[str, Field(max_length=100, description="base64url, 16 bytes")]


class PushSubscriptionIn(Lenient):
    endpoint: Annotated[str, Field(max_length=4096, description="The push service's URL")]
    keys: PushKeysIn
    label: Annotated[str, Field(max_length=1000, description="Names the device")] = ""


class PushSubscriptionOut(BaseModel):
    id: str
    label: str
    origin: Annotated[str, Field(description="The push service; never the whole endpoint")]
    created_at: str


class PushOut(BaseModel):
    public_key: Annotated[str, Field(description="VAPID: `applicationServerKey`, base64url")]
    subscriptions: list[PushSubscriptionOut]


class PushTestOut(BaseModel):
    delivered: int
    failed: int
