"""The address guard for MCP over HTTP (`streamable_http`, `sse`) to a server the user did not
name: a plugin's. The rule is web_fetch's (`app.kernel.web.guard`): no loopback, private,
link-local, metadata or other non-global target unless `FOYA_WEB_FETCH_ALLOW_HOSTS` allows it.

A server the user configured through `PUT /mcp` (typed, or picked from the registry's list and
sent by the client, with its URL on screen) is the user's own say-so and is not guarded: a
local MCP server on `localhost` is the common case. A plugin's servers arrive in its archive;
they get `GuardedTransport`.

Every request is checked where it is sent: its host's addresses are resolved and all must be
allowed, and the request then goes to the first checked address (the URL's host replaced by
it, the `Host` header and TLS's server name kept), so a name that resolves elsewhere a moment
later (DNS rebinding) changes nothing. The SDK follows redirects only within the endpoint's
origin, and each hop is a request of its own, checked the same way. No proxy from the
environment is used: a proxy would make the check meaningless.
"""

from __future__ import annotations

import httpx2

from app.kernel.web.guard import AllowList, Blocked, literal, resolve


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that refuses what `allow` does not let through (`Blocked`)."""

    def __init__(self, allow: AllowList) -> None:
        self.allow = allow
        self.inner = httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        address = await self._checked(host, port)
        if literal(host) is None:
            request.extensions = {**request.extensions, "sni_hostname": host}
            request.url = request.url.copy_with(host=address)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def _checked(self, host: str, port: int) -> str:
        # web_fetch's one resolve-and-check: every address must be allowed.
        try:
            return (await resolve(self.allow, host, port))[0].address
        except Blocked as exc:
            raise Blocked(
                f"refused to connect to {host}: a plugin's MCP server may not reach a private, "
                f"loopback or link-local address ({exc}; FOYA_WEB_FETCH_ALLOW_HOSTS can allow it)"
            ) from None
