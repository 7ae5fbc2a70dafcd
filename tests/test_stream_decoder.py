"""The provider's event-stream decoder, fed bytes split at every awkward place a network read
can split them."""

from __future__ import annotations

import json

import pytest

from app.providers.base import ProviderError, StreamItem, TextDelta, Usage
from app.providers.chatstream import MAX_LINE, LineTooLong
from app.providers.openai import StreamDecoder


def chunk(text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return f"data: {json.dumps({'choices': [choice]})}".encode()


def decode(pieces: list[bytes]) -> tuple[list[StreamItem], StreamDecoder]:
    decoder = StreamDecoder()
    items: list[StreamItem] = []
    for piece in pieces:
        items += decoder.feed(piece)
        if decoder.done:
            break
    else:
        items += decoder.flush()
    return items, decoder


def texts(items: list[StreamItem]) -> list[str]:
    return [item.text for item in items if isinstance(item, TextDelta)]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_every_split_point_and_line_ending_gives_the_same_items(ending: bytes) -> None:
    body = ending.join(
        [chunk("Hel"), b"", b": keep-alive", b"", chunk("lo", "stop"), b"", b"data: [DONE]", b""]
    )
    body += chunk("after done") + ending
    for cut in range(len(body) + 1):
        items, decoder = decode([body[:cut], body[cut:]])
        assert texts(items) == ["Hel", "lo"], cut
        assert decoder.done and decoder.finish == "stop"


def test_a_last_line_without_a_line_end_still_counts() -> None:
    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}'
    items, decoder = decode([chunk("x") + b"\n\n" + usage])
    assert texts(items) == ["x"]
    assert items[-1] == Usage(3, 2, 5, 0)
    assert not decoder.done and decoder.finish == "stop"


def test_items_before_a_malformed_line_arrive_before_the_error() -> None:
    decoder = StreamDecoder()
    received: list[StreamItem] = []
    with pytest.raises(json.JSONDecodeError):
        for item in decoder.feed(chunk("partial ") + b"\n\ndata: {not json\n\n"):
            received.append(item)
    assert texts(received) == ["partial "]


def test_an_error_chunk_is_a_provider_error() -> None:
    with pytest.raises(ProviderError) as caught:
        decode([b'data: {"error": {"message": "overloaded"}}\n\n'])
    assert caught.value.kind == "bad_response"


def test_a_line_that_never_ends_is_refused_once_past_the_limit() -> None:
    """The items before it still arrive; the unfinished line is not kept growing."""
    decoder = StreamDecoder()
    head = b'data: {"choices": [{"delta": {"content": "hi"}}]}\n'
    assert [i for i in decoder.feed(head + b"data: " + b"x" * 1000) if isinstance(i, TextDelta)]
    piece = b"x" * (1024 * 1024)
    with pytest.raises(LineTooLong):
        for _ in range(MAX_LINE // len(piece) + 1):
            list(decoder.feed(piece))
