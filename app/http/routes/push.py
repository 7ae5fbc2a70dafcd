"""Web Push: the kernel's VAPID key, the browsers subscribed, and a test message."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from app.http.models.push import PushOut, PushSubscriptionIn, PushSubscriptionOut, PushTestOut
from app.kernel.api import Kernel


def router(kernel: Kernel) -> APIRouter:
    """Routes bound to `kernel`."""
    api = APIRouter(tags=["push"])
    push = kernel.push

    @api.get("/push", response_model=PushOut)
    async def get_push() -> dict[str, Any]:
        """The key a browser subscribes with, and the subscriptions (never their keys)."""
        return {"public_key": await push.public_key(), "subscriptions": push.all()}

    @api.post("/push/subscriptions", response_model=PushSubscriptionOut, status_code=201)
    async def subscribe(body: PushSubscriptionIn) -> dict[str, Any]:
        """Add a browser; the same endpoint again renews its keys and keeps its id."""
        keys = body.keys
        return dict(await push.subscribe(body.endpoint, keys.p256dh, keys.auth, body.label))

    @api.delete("/push/subscriptions/{subscription_id}", status_code=204)
    async def unsubscribe(subscription_id: str) -> Response:
        """404 `push_subscription_not_found` for an unknown id."""
        await push.remove(subscription_id)
        return Response(status_code=204)

    @api.post("/push/test", response_model=PushTestOut)
    async def test_push() -> dict[str, int]:
        """Send a test message to every subscription now: how many push services took it."""
        delivered, failed = await push.send_test()
        return {"delivered": delivered, "failed": failed}

    return api
