"""Byte ranges (RFC 9110 §14): a single `Range: bytes=…` served as 206, so a player can seek.

- `bytes=a-b`, `bytes=a-` and `bytes=-n` (the last n bytes) are served as 206 with
  `Content-Range: bytes a-b/size`; `b` past the end is cut to it.
- A range starting at or past the end (or `-0`) is 416 `range_not_satisfiable` with
  `Content-Range: bytes */size`.
- Anything else — another unit, a malformed value, several ranges — is ignored and the whole
  body is sent (200), as the RFC allows; so is a `Range` whose `If-Range` names another ETag.

`Accept-Ranges: bytes` is on every answer of a ranged resource.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable

from starlette.responses import Response, StreamingResponse

from app.http.errors import error_response

_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
Chunks = Callable[[int, int], AsyncIterator[bytes]]


class Unsatisfiable(Exception):
    """The range starts at or past the end of the body."""


def parse(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, stop) of the one range `header` asks for (stop exclusive); None to send all."""
    match = _RANGE.fullmatch((header or "").strip())
    if match is None:
        return None
    first, last = match.groups()
    if not first:
        if not last:
            return None
        suffix = int(last)
        if suffix == 0:
            raise Unsatisfiable
        return max(size - suffix, 0), size
    start = int(first)
    if last and int(last) < start:
        return None  # invalid: ignored
    if start >= size:
        raise Unsatisfiable
    stop = min(int(last) + 1, size) if last else size
    return start, stop


def ranged(
    chunks: Chunks,
    size: int,
    media_type: str,
    headers: dict[str, str],
    range_header: str | None,
    if_range: str | None,
) -> Response:
    """The body `chunks` reads (`size` bytes), whole or the range asked for."""
    headers = {**headers, "Accept-Ranges": "bytes"}
    if if_range is not None and if_range.strip() != headers.get("ETag"):
        range_header = None  # the client's copy is another one: it needs the whole body
    try:
        wanted = parse(range_header, size)
    except Unsatisfiable:
        return error_response(
            416,
            "range_not_satisfiable",
            f"the range {range_header} starts beyond the {size} bytes of the body",
            {**headers, "Content-Range": f"bytes */{size}"},
        )
    if wanted is None:
        start, stop, status = 0, size, 200
    else:
        (start, stop), status = wanted, 206
        headers["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
    headers["Content-Length"] = str(stop - start)
    return StreamingResponse(
        chunks(start, stop), status_code=status, media_type=media_type, headers=headers
    )
