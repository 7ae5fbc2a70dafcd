"""A stream's request sent straight through aiohttp (`app.providers.rawstream`) against the
same request through the SDK: the provider sees the same body and key, the reply decodes to the
same items, and every failure reads the same."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.fake_provider import FakeProvider, answer, http_error
from support.helpers import free_port

from app.providers import rawstream
from app.providers.base import ChatRequest, ProviderError
from app.providers.openai import OpenAIProvider

MODEL = "m"
KEY = "sk-raw-test"
REQUEST = ChatRequest(
    model=MODEL,
    messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "héllo"}],
    tools=[{"type": "function", "function": {"name": "read", "parameters": {}}}],
    reasoning_effort="low",
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProvider]:
    with FakeProvider.running() as running:
        yield running


async def _items(provider: OpenAIProvider) -> list[Any]:
    try:
        return [item async for item in provider.stream(REQUEST)]
    finally:
        await provider.aclose()


def _both(base_url: str) -> tuple[OpenAIProvider, OpenAIProvider]:
    raw, sdk = OpenAIProvider(base_url, KEY), OpenAIProvider(base_url, KEY)
    sdk.raw = None  # the SDK's own path
    assert raw.raw is not None
    return raw, sdk


def test_the_provider_sees_the_same_request_and_the_reply_reads_the_same(
    fake: FakeProvider,
) -> None:
    raw, sdk = _both(fake.base_url)
    fake.push(MODEL, answer("Hello there."), answer("Hello there."))
    got = [asyncio.run(_items(p)) for p in (raw, sdk)]
    assert got[0] == got[1]
    first, second = fake.chats(MODEL)[-2:]
    assert first.body == second.body
    assert first.headers["authorization"] == second.headers["authorization"] == f"Bearer {KEY}"
    assert first.headers["accept-encoding"] == "identity"


@pytest.mark.parametrize("status", [401, 404, 429, 500])
def test_a_failed_status_reads_the_same(fake: FakeProvider, status: int) -> None:
    errors = []
    for provider in _both(fake.base_url):
        retries = 4 if status == 429 else 1  # a rate limit is retried (its backoff: 0 s here)
        for _ in range(retries):
            fake.push(MODEL, http_error(status, f"no {KEY}", headers={"retry-after": "0"}))
        with pytest.raises(ProviderError) as caught:
            asyncio.run(_items(provider))
        errors.append((caught.value.kind, caught.value.message))
    assert errors[0] == errors[1]
    assert KEY not in errors[0][1]


def test_an_unreachable_provider_reads_the_same() -> None:
    errors = []
    for provider in _both(f"http://127.0.0.1:{free_port()}/v1"):
        with pytest.raises(ProviderError) as caught:
            asyncio.run(_items(provider))
        errors.append((caught.value.kind, caught.value.message))
    assert errors[0] == errors[1]
    assert errors[0][0] == "network"


def test_a_configured_proxy_keeps_streams_on_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert not rawstream.direct()
    assert OpenAIProvider("http://127.0.0.1:1/v1", KEY).raw is None


def test_a_body_encodes_each_tool_once_and_reads_back_the_same() -> None:
    parameters: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}}
    tool: dict[str, Any] = {
        "type": "function",
        "function": {"name": "read", "description": "Read.", "parameters": parameters},
    }
    odd = {"type": "function", "function": {"name": "x"}, "strict": True}  # not a plain definition
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": 'héllo \\u2028 "q"'}],
        "tools": [tool, odd],
    }
    encoder = rawstream.ToolsJSON()
    first = encoder.body(body)
    assert json.loads(first) == body
    assert "héllo".encode() in first  # UTF-8 as is, not \u-escaped: the SDK's own encoding
    assert encoder.body(body) == first
    assert len(encoder._known) == 1  # the plain definition is kept, the odd one is not

    described = {**tool, "function": {**tool["function"], "description": "Read a file."}}
    again = encoder.body({**body, "tools": [described]})
    assert json.loads(again)["tools"][0]["function"]["description"] == "Read a file."
    assert json.loads(encoder.body({"model": "m", "tools": []})) == {"model": "m", "tools": []}
    assert json.loads(encoder.body({"tools": [tool]})) == {"tools": [tool]}
