"""A multipart upload's file, read as the request body arrives: never held whole in memory.

`StreamedFile.open()` reads the body up to the headers of the first part named `file` that is
a file (has a `filename`) and answers that name; `chunks()` then yields the part's bytes as
they come and, after its end, reads the rest of the body without keeping it, so the
connection stays usable. Other file parts are skipped unread (their data is dropped as
parsed); text parts (no `filename`) are kept in `fields`, at most `MAX_FIELDS` of at most
`MAX_FIELD` bytes each (400 beyond), complete once `chunks()` has ended.

Refusals are `FoyaError`s for the route to answer: a body past `limit` (at once when
`Content-Length` says so) is the `too_large` error, a body without such a part the `missing`
one, a malformed body (or a part header longer than `MAX_HEADER`) 400 `bad_request`, and a
client that leaves mid-body 400 too (nobody reads that answer; the upload is abandoned).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from app.errors import BadRequest, FoyaError

MAX_HEADER = 16 * 1024
MAX_FIELD = 64 * 1024
MAX_FIELDS = 16


class StreamedFile:
    """The multipart field `file` of `request`, at most `limit` bytes of body in all."""

    def __init__(
        self, request: Request, limit: int, *, what: str, too_large: FoyaError, missing: FoyaError
    ) -> None:
        content_type = request.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            raise BadRequest(f"send the {what} as multipart/form-data with a field named file")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        boundary = parse_options_header(content_type)[1].get(b"boundary")
        if not boundary:
            raise BadRequest("malformed multipart body: no boundary")
        self._body = request.stream().__aiter__()
        self._limit, self._too_large, self._missing = limit, too_large, missing
        self._size = 0
        self._ended = False
        self._header_bytes = 0
        self._field, self._value = b"", b""
        self._disposition = b""
        self._current = False  # the part being parsed is the file
        self._state = "before"  # before the file part, "in" it, "after" it
        self._name = ""
        self._pieces: list[bytes] = []
        self.fields: dict[str, str] = {}
        self._text: tuple[str, bytearray] | None = None  # the text part being parsed
        self._parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._part_begin,
                "on_header_field": self._header_field,
                "on_header_value": self._header_value,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._part_data,
                "on_part_end": self._part_end,
            },
        )

    async def open(self) -> str:
        """Read up to the file part's headers; its file name."""
        while self._state == "before":
            if not await self._feed():
                raise self._missing
        return self._name

    async def chunks(self) -> AsyncIterator[bytes]:
        """The file part's bytes as they arrive, then the rest of the body drained."""
        while True:
            pieces, self._pieces = self._pieces, []
            for piece in pieces:
                yield piece
            if not await self._feed():
                break
        if self._state != "after":
            raise BadRequest("malformed multipart body: the file part does not end")

    async def _feed(self) -> bool:
        """Parse the next piece of the body; False once it has ended."""
        if self._ended:
            return False
        try:
            chunk = await anext(self._body, None)
        except ClientDisconnect:
            raise BadRequest("the client left before the upload was complete") from None
        if chunk is None:
            self._ended = True
            try:
                self._parser.finalize()
            except MultipartParseError as exc:
                raise BadRequest(f"malformed multipart body: {exc}") from None
            return False
        self._size += len(chunk)
        if self._size > self._limit:
            raise self._too_large
        try:
            self._parser.write(chunk)
        except MultipartParseError as exc:
            raise BadRequest(f"malformed multipart body: {exc}") from None
        return True

    def _part_begin(self) -> None:
        self._disposition, self._header_bytes, self._current = b"", 0, False
        self._text = None

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += self._counted(data[start:end])

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += self._counted(data[start:end])

    def _counted(self, piece: bytes) -> bytes:
        self._header_bytes += len(piece)
        if self._header_bytes > MAX_HEADER:
            raise BadRequest("malformed multipart body: a part's headers are too long")
        return piece

    def _header_end(self) -> None:
        if self._field.lower() == b"content-disposition":
            self._disposition = self._value
        self._field, self._value = b"", b""

    def _headers_finished(self) -> None:
        options = parse_options_header(self._disposition)[1]
        if self._state == "before" and options.get(b"name") == b"file" and b"filename" in options:
            self._current, self._state = True, "in"
            self._name = options[b"filename"].decode("utf-8", "replace")
        elif b"name" in options and b"filename" not in options:
            if len(self.fields) >= MAX_FIELDS:
                raise BadRequest(f"malformed multipart body: more than {MAX_FIELDS} fields")
            self._text = (options[b"name"].decode("utf-8", "replace"), bytearray())

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._current:
            self._pieces.append(data[start:end])
        elif self._text is not None:
            self._text[1].extend(data[start:end])
            if len(self._text[1]) > MAX_FIELD:
                raise BadRequest(f"field {self._text[0]!r} is longer than {MAX_FIELD} bytes")

    def _part_end(self) -> None:
        if self._current:
            self._current, self._state = False, "after"
        elif self._text is not None:
            name, value = self._text
            self.fields.setdefault(name, value.decode("utf-8", "replace"))
            self._text = None
