"""Canvas video generation: a `generation` node of mode `video` through a video connection's
task API (app.providers.video, the protocol its `video_protocol` names), into a `video` node.

Order (Foya's, with the job's states made visible on the canvas stream):

1. As for images (app.kernel.canvas.generation): revision, nodes, then the connection — the
   request's `connection_id`, else the node's, else the `video` default; the model the node's,
   else the default's. No connection, one not of type `video`, one without a base URL or a
   `video_protocol` this kernel speaks (`seedance`, `minimax_h3`), no model, a model whose
   settings say `video_generation` is off, or no prompt: both nodes `error`, 400
   `canvas_failed`. The prompt is built as for images; the first `image` node wired into the
   generation node is the reference image (sent inline as a data URL).
2. Both nodes `queued`; the task is submitted; once the provider says it is being worked on,
   both `running`. Each is a new revision on `canvas:<id>`: that is the job's progress (Foya
   sends no finer progress). Polls come after `POLL_DELAYS`, then every `POLL_INTERVAL`
   seconds; up to `POLL_RETRIES` failed polls in a row (network, rate limit) are tolerated.
3. The finished task's video URL is downloaded through the guarded fetcher of `web_fetch`
   (app.kernel.web.fetch: a private or reserved address is refused unless
   `FOYA_WEB_FETCH_ALLOW_HOSTS` allows it, every redirect checked again), streamed to disk,
   at most 500 MiB within `DOWNLOAD_TIMEOUT`; the key is sent only to the provider's own
   origin. What arrives must be an MP4, QuickTime or WebM video by its bytes.
4. It becomes a `video` asset shown by the output node; both nodes `success`. A failed task, a
   provider error, a refused download or anything not done within `TIMEOUT` (Foya's 30
   minutes): both nodes `error` with the reason, 502 `generation_provider_failed`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.kernel.canvas import edits
from app.kernel.canvas.media import EXTENSIONS, MAX_VIDEO_BYTES, Incoming, video_type
from app.kernel.canvas.models import (
    CanvasFailed,
    Document,
    GenerationFailed,
    Node,
    UnsupportedMedia,
)
from app.kernel.canvas.ports import Board
from app.kernel.connections import Connections, video_protocol
from app.providers.base import PROTOCOLS, ProviderError, VideoProtocol, VideoRequest, VideoTask

if TYPE_CHECKING:
    from app.kernel.web.fetch import Fetcher
    from app.providers.video import VideoProvider

TIMEOUT = 1800.0
DOWNLOAD_TIMEOUT = 600.0
POLL_DELAYS = (0.25, 0.5, 1.0)
POLL_INTERVAL = 2.0
POLL_RETRIES = 3
_TRANSIENT = ("network", "rate_limit")


@dataclass(frozen=True)
class VideoJob:
    """What to ask for, and of whom; `reference` is an image asset id of this canvas."""

    base_url: str
    api_key: str
    protocol: VideoProtocol
    request: VideoRequest
    reference: str | None


def video_job(
    doc: Document, config: Node, connection_id: str, connections: Connections
) -> VideoJob:
    """The job the generation node describes, or `CanvasFailed` saying what is missing."""
    spec = config.generation
    assert spec is not None  # checked by edits.config_node
    default = connections.defaults()["video"]
    cid = connection_id or spec.connection_id or default.get("connection_id", "")
    model = (spec.model or "").strip() or default.get("model", "")
    if not cid:
        raise CanvasFailed(
            "no video connection: pass connection_id, set one in the generation node, or set "
            "the video default model (PUT /settings/default-models)"
        )
    if not connections.exists(cid):
        raise CanvasFailed(f"connection {cid} not found")
    connection = connections.get(cid)
    if connection["type"] != "video":
        raise CanvasFailed("video generation requires a video connection")
    protocol = video_protocol(connection)
    if protocol is None:
        raise CanvasFailed(
            f"the video connection has no video_protocol (one of {', '.join(PROTOCOLS)}); "
            f"set it with PATCH /connections/{cid}"
        )
    if not str(connection.get("base_url") or "").strip():
        raise CanvasFailed(
            f"the video connection has no base_url; set it with PATCH /connections/{cid}"
        )
    if not model:
        raise CanvasFailed(
            "no video model: set the generation node's model or the video default model"
        )
    settings = connection["model_settings"].get(model)
    if settings is not None and not settings.get("video_generation"):
        raise CanvasFailed(f"model {model} does not support video generation")
    prompt, references = edits.inputs(doc, config)
    request = VideoRequest(model, prompt, spec.aspect_ratio or "", spec.duration or 0)
    return VideoJob(
        str(connection["base_url"]),
        str(connection.get("api_key") or ""),
        protocol,
        request,
        references[0] if references else None,
    )


class Videos:
    """Runs video jobs for the canvases (`Generations` schedules them)."""

    def __init__(self, canvases: Board, fetcher: Callable[[], Fetcher]) -> None:
        self.canvases = canvases
        self.fetcher = fetcher

    async def run(self, canvas_id: str, ids: tuple[str, str], job: VideoJob) -> Document:
        """Submit, poll, download and store; the document showing the video."""
        request = job.request
        if job.reference is not None:
            asset = self.canvases.asset(canvas_id, job.reference)
            data = await asyncio.to_thread(self.canvases.store.read_asset, canvas_id, asset.id)
            request = VideoRequest(
                request.model,
                request.prompt,
                request.aspect_ratio,
                request.duration,
                data,
                asset.media_type,
            )
        # The HTTP client and the failure map load with the first video job, not at start.
        from app.providers.video import VideoProvider

        provider = VideoProvider(job.base_url, job.api_key, job.protocol)
        try:
            async with asyncio.timeout(TIMEOUT):
                task = await self._finished(canvas_id, ids, provider, request)
                incoming = Incoming(self.canvases.store.staging)
                try:
                    await self.fetcher().download(
                        task.video_url,
                        incoming.write,
                        max_bytes=MAX_VIDEO_BYTES,
                        time_limit=DOWNLOAD_TIMEOUT,
                        headers=provider.download_headers(task.video_url),
                    )
                    received = await incoming.finish()
                    media_type = video_type(received.head)
                    if media_type is None:
                        raise UnsupportedMedia("it is not an MP4, QuickTime or WebM video")
                    name = f"generated.{EXTENSIONS[media_type]}"
                    stored = await self.canvases.store_video(canvas_id, name, media_type, received)
                finally:
                    await asyncio.shield(incoming.discard())
        finally:
            await provider.aclose()
        return await self.canvases.change(canvas_id, edits.done(ids, stored))

    async def _finished(
        self,
        canvas_id: str,
        ids: tuple[str, str],
        provider: VideoProvider,
        request: VideoRequest,
    ) -> VideoTask:
        """The task once it succeeded; its nodes `running` once the provider works on it."""
        task = await provider.submit(request)
        shown = "queued"
        delays = iter(POLL_DELAYS)
        failures = 0
        while task.state in ("queued", "running"):
            if task.state == "running" and shown != "running":
                await self.canvases.change(canvas_id, edits.marked(ids, "running"))
                shown = "running"
            await asyncio.sleep(next(delays, POLL_INTERVAL))
            try:
                task = await provider.poll(task.id)
            except ProviderError as exc:
                failures += 1
                if exc.kind not in _TRANSIENT or failures > POLL_RETRIES:
                    raise
                continue
            failures = 0
        if task.state == "failed":
            raise GenerationFailed(f"video generation failed: {task.error}")
        return task
