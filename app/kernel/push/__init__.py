"""Web Push: notices of approvals, questions and finished turns for browsers that subscribed,
delivered by the browser vendor's push service while the web client is closed.

- `records`: a subscription, its validation, its file (`push-subscriptions.json`)
- `vapid`: the kernel's VAPID key (`push-vapid.pem`), signing and encrypting a message
- `notices`: what a message says for a fact
- `service`: `Push`, the subscriptions and the worker that sends
"""

from app.kernel.push.service import Push

__all__ = ["Push"]
