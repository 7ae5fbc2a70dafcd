"""Video generation task APIs, as Foya speaks them: a connection's `video_protocol` says which.

Both protocols are asynchronous: a task is submitted, then polled until it is done, its answer
naming the video's URL. This module makes one request per call (`submit`, `poll`); how often
to poll, for how long, and how the video is downloaded are the kernel's (app.kernel.canvas.video:
the download goes through the guarded fetcher, since the URL is the provider's say-so).

- `seedance` (Volcengine Ark): `POST <base>/contents/generations/tasks`, then
  `GET …/tasks/<id>`, where `<base>` is the base URL ending in `/api/v3` (a trailing `/v1` is
  replaced by it). Body: `model`, `content` (the prompt as a `text` part, a reference image as
  an `image_url` part with role `reference_image`, as a data URL), `ratio`, `duration`,
  `resolution` `720p`, `generate_audio` true, `watermark` false.
- `minimax_h3`: `POST <root>/v2/video_generation`, then `GET <root>/v2/query/video_generation/<id>`,
  `<root>` being the base URL without a trailing `/v1` or `/v2`. Body as above with
  `resolution` `768P` and no audio or watermark fields.

`ratio` defaults to `16:9`; `duration` is 4 to 15 seconds, else 5. The key is sent as a bearer
token. An answer is read leniently, as Foya does: the task may be wrapped in `data` or `task`,
its id is `id` or `task_id`, its video URL the first of `url`, `result_url`, `video_url`,
`content.url`, `result.primary_url`, `result.url`, `content.video_url`, `result.urls[0]`
(relative to the base URL if relative). Status words are mapped to `VideoTask.state`
(`STATES`); beyond Foya's list, `running`, `queueing`, `preparing` and `fail` (the real APIs'
words) are understood too. Any other status is a `bad_response`.

Every failure is a `ProviderError`, mapped at this one boundary (`_call`): HTTP 401/403 is
`auth`, 429 `rate_limit`, any other status `bad_response` (the provider's own message quoted,
short, without the key), a transport failure `network`, an unreadable answer `bad_response`.
"""

from __future__ import annotations

import base64
from urllib.parse import quote, urljoin, urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from app.jsontypes import JSONObject
from app.logs import get_logger
from app.providers.base import (
    ErrorKind,
    ProviderError,
    State,
    VideoProtocol,
    VideoRequest,
    VideoTask,
)
from app.providers.failures import cause_of, detail_of, host_of

STATES: dict[str, State] = {
    **dict.fromkeys(("", "queued", "pending", "submitted", "queueing"), "queued"),
    **dict.fromkeys(("running", "in_progress", "processing", "preparing"), "running"),
    **dict.fromkeys(("succeeded", "completed", "success"), "succeeded"),
    **dict.fromkeys(("failed", "fail", "cancelled", "canceled", "expired"), "failed"),
}
#: A task answer larger than this is not a task answer.
MAX_ANSWER = 1024 * 1024
TIMEOUT = httpx.Timeout(60.0, connect=10.0)
_RESOLUTION = {"seedance": "720p", "minimax_h3": "768P"}


class _Text(BaseModel):
    model_config = ConfigDict(extra="ignore")
    message: str = ""


class _Urls(BaseModel):
    model_config = ConfigDict(extra="ignore")
    url: str = ""
    primary_url: str = ""
    video_url: str = ""
    urls: list[str] = []


class _Job(BaseModel):
    """The fields of a task answer that either protocol may use."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)
    id: str = ""
    task_id: str = ""
    status: str = ""
    url: str = ""
    result_url: str = ""
    video_url: str = ""
    error_message: str = ""
    fail_reason: str = ""
    error: _Text | str | None = None
    result: _Urls | None = None
    content: _Urls | None = None
    data: _Job | None = None
    task: _Job | None = None

    def unwrapped(self) -> _Job:
        if not (self.id or self.task_id):
            for inner in (self.data, self.task):
                if inner is not None:
                    return inner.unwrapped()
        return self

    def location(self) -> str:
        result, content = self.result or _Urls(), self.content or _Urls()
        for candidate in (
            self.url,
            self.result_url,
            self.video_url,
            content.url,
            result.primary_url,
            result.url,
            content.video_url,
            *result.urls[:1],
        ):
            if candidate.strip():
                return candidate.strip()
        return ""

    def reason(self) -> str:
        error = self.error.message if isinstance(self.error, _Text) else self.error or ""
        return next(
            (r.strip() for r in (error, self.error_message, self.fail_reason) if r.strip()), ""
        )


class _Refusal(_Job):
    """An error answer: the task's reason fields, or a bare `message`."""

    message: str = ""


class VideoProvider:
    """A video connection's base URL, key and protocol, with one pool of connections."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        protocol: VideoProtocol,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.strip().rstrip("/")
        self.protocol = protocol
        self.host = host_of(self.base_url)
        self._key = api_key
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=TIMEOUT, headers=headers, transport=transport)
        self._log = get_logger("foya.providers")

    async def aclose(self) -> None:
        await self._client.aclose()

    async def submit(self, request: VideoRequest) -> VideoTask:
        """Create the task; what the provider says of it (an id unless already done)."""
        content: list[JSONObject] = [{"type": "text", "text": request.prompt}]
        if request.reference:
            encoded = base64.b64encode(request.reference).decode()
            media_type = request.reference_media_type or "application/octet-stream"
            content.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{media_type};base64,{encoded}"},
                    "role": "reference_image",
                }
            )
        body: JSONObject = {
            "model": request.model,
            "content": content,
            "ratio": request.aspect_ratio.strip() or "16:9",
            "duration": request.duration if 4 <= request.duration <= 15 else 5,
            "resolution": _RESOLUTION[self.protocol],
        }
        if self.protocol == "seedance":
            body.update(generate_audio=True, watermark=False)
        return await self._call("POST", self._create_url(), body)

    async def poll(self, task_id: str) -> VideoTask:
        """What the provider says of the task now."""
        return await self._call("GET", self._task_url(task_id))

    def download_headers(self, url: str) -> dict[str, str]:
        """The key, for a video URL on the provider's own origin (never for another host)."""
        same = _origin(url) == _origin(self.base_url)
        return {"Authorization": f"Bearer {self._key}"} if same and self._key else {}

    def _create_url(self) -> str:
        if self.protocol == "minimax_h3":
            return f"{self._root()}/v2/video_generation"
        return f"{self._ark()}/contents/generations/tasks"

    def _task_url(self, task_id: str) -> str:
        escaped = quote(task_id, safe="")
        if self.protocol == "minimax_h3":
            return f"{self._root()}/v2/query/video_generation/{escaped}"
        return f"{self._ark()}/contents/generations/tasks/{escaped}"

    def _root(self) -> str:
        base = self.base_url
        for suffix in ("/v1", "/v2"):
            base = base.removesuffix(suffix)
        return base

    def _ark(self) -> str:
        if self.base_url.endswith("/api/v3"):
            return self.base_url
        return f"{self.base_url.removesuffix('/v1')}/api/v3"

    async def _call(self, method: str, url: str, body: JSONObject | None = None) -> VideoTask:
        """One request, every failure mapped to a `ProviderError` here."""
        try:
            async with self._client.stream(method, url, json=body) as response:
                raw = await _read(response)
                if not response.is_success:
                    raise self._status(response.status_code, raw)
            job = _Job.model_validate_json(raw).unwrapped()
        except ProviderError:
            raise
        except (ValidationError, ValueError):
            raise self._failed("bad_response", f"unreadable answer from {self._at()}") from None
        except httpx.HTTPError as exc:
            cause = cause_of(exc) or "the connection failed"
            raise self._failed("network", f"cannot reach {self._at()}: {cause}") from None
        return self._task(job)

    def _task(self, job: _Job) -> VideoTask:
        status = job.status.strip().lower()
        state = STATES.get(status)
        if state is None:
            raise self._failed(
                "bad_response", f"{self._at()} answered an unknown status {status!r}"
            )
        task_id = job.id or job.task_id
        if state == "succeeded":
            location = job.location()
            if not location:
                raise self._failed("bad_response", f"{self._at()} finished without a video URL")
            return VideoTask(task_id, state, urljoin(f"{self.base_url}/", location))
        if state == "failed":
            reason = detail_of(job.reason(), self._key)
            return VideoTask(task_id, state, error=reason or "no reason given")
        if not task_id:
            raise self._failed("bad_response", f"{self._at()} answered no task id")
        return VideoTask(task_id, state)

    def _status(self, status: int, raw: bytes) -> ProviderError:
        kind: ErrorKind = (
            "auth" if status in (401, 403) else "rate_limit" if status == 429 else "bad_response"
        )
        try:
            answer = _Refusal.model_validate_json(raw)
            detail = answer.reason() or answer.message
        except (ValidationError, ValueError):
            detail = raw.decode("utf-8", "replace")
        detail = detail_of(detail, self._key)
        return self._failed(
            kind, f"{self._at()} answered HTTP {status}" + (f": {detail}" if detail else "")
        )

    def _at(self) -> str:
        return f"the video provider at {self.host}"

    def _failed(self, kind: ErrorKind, message: str) -> ProviderError:
        self._log.warning("video provider call failed", host=self.host, kind=kind, error=message)
        return ProviderError(kind, message)


async def _read(response: httpx.Response) -> bytes:
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER:
            raise ValueError("answer too large")
        chunks.append(chunk)
    return b"".join(chunks)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower()
