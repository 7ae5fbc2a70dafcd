"""Canvas generation: a `generation` node's settings and prompt, through an image connection's
images API (`Provider.generate_image`), into an `image` node; or through a video connection's
task API into a `video` node (app.kernel.canvas.video, which says how that differs).

Order (Foya's, with the running state made the kernel's own):

1. The canvas must be at `expected_revision` (409 with the current document) and the request
   must name a `generation` node of mode `image` and an `image` node (400 `canvas_failed`,
   nothing changed).
2. The connection is the request's `connection_id`, else the node's, else the `image` default
   (`PUT /settings/default-models`); the model the node's, else the default's. A missing
   connection, one that is not of type `image`, no model, a model whose settings say
   `image_generation` is off, or no prompt fails both nodes (`status: "error"` with the reason,
   a new revision) and answers 400 `canvas_failed`.
3. Both nodes become `running` (a new revision, broadcast). The provider call runs as a task
   of the kernel's, outside any lock: other requests go on, and a client that hangs up does
   not stop it. The prompt is the node's own followed by the text of `text` nodes with an edge
   into it; `image` nodes with an edge into it are sent as references (`images.edit`).
4. The image is stored like an upload (validated, re-encoded), added to the canvas's assets and
   shown by the output node; both nodes become `success`. The answer is that document. A
   provider failure (or a result that is not a usable image, or no answer within `TIMEOUT`)
   marks both nodes `error` and answers 502 `generation_provider_failed`.

A generation cut short by a shutdown or a crash leaves its nodes `running` in the file; the
next start marks them `error` (app.kernel.canvas.store). Deleting the canvas cancels its
generations. `foya_canvas_generations{outcome}` counts success, error and interrupted.

Both kinds run the same way (`_generate`): checked, marked (`running` for an image, `queued`
for a video), run as a task of the kernel's, marked `success` or `error`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from app.artifacts import MAX_BYTES
from app.errors import FoyaError, InsufficientStorage, Unavailable
from app.kernel.canvas import edits, video
from app.kernel.canvas.models import (
    AssetTooLarge,
    CanvasFailed,
    CanvasNotFound,
    Document,
    GenerationFailed,
    GenerationRequest,
    Node,
    RevisionConflict,
    UnsupportedMedia,
)
from app.kernel.canvas.ports import Board
from app.kernel.connections import Connections
from app.kernel.providers import Providers
from app.kernel.web.errors import FetchError
from app.logs import get_logger
from app.metrics import Metrics
from app.providers.base import ImageLink, ImageRequest, Provider, ProviderError

if TYPE_CHECKING:
    from app.kernel.web.fetch import Fetcher

Job = TypeVar("Job")
TIMEOUT = 300.0
#: Foya's sizes for aspect ratios (OpenAI's three sizes); anything else is square.
SIZES = {
    "16:9": "1536x1024",
    "4:3": "1536x1024",
    "3:2": "1536x1024",
    "9:16": "1024x1536",
    "3:4": "1024x1536",
    "2:3": "1024x1536",
}


@dataclass(frozen=True)
class ImageJob:
    """What to ask for, and of whom; `references` are asset ids of this canvas."""

    provider: Provider
    request: ImageRequest
    references: tuple[str, ...]


class Generations:
    """Running generations, per canvas."""

    def __init__(
        self,
        canvases: Board,
        connections: Connections,
        providers: Providers,
        metrics: Metrics,
        fetcher: Callable[[], Fetcher],
    ) -> None:
        self.canvases = canvases
        self.connections = connections
        self.providers = providers
        self.fetcher = fetcher
        self.videos = video.Videos(canvases, fetcher)
        self._outcomes = metrics.canvas_generations
        self._tasks: dict[str, set[asyncio.Task[Document]]] = {}
        self._stopping = False

    async def image(self, canvas_id: str, request: GenerationRequest) -> Document:
        """Generate into the output node; the document once done (see the module docstring)."""

        def prepare(doc: Document, config: Node) -> ImageJob:
            return self._image_job(doc, config, request.connection_id)

        return await self._generate(canvas_id, request, "image", prepare, self._image_work)

    async def video(self, canvas_id: str, request: GenerationRequest) -> Document:
        """Generate a video into the output node; the document once done
        (app.kernel.canvas.video)."""

        def prepare(doc: Document, config: Node) -> video.VideoJob:
            return video.video_job(doc, config, request.connection_id, self.connections)

        return await self._generate(canvas_id, request, "video", prepare, self.videos.run)

    async def _generate(
        self,
        canvas_id: str,
        request: GenerationRequest,
        mode: str,
        prepare: Callable[[Document, Node], Job],
        work: Callable[[str, tuple[str, str], Job], Awaitable[Document]],
    ) -> Document:
        if self._stopping:
            raise Unavailable("the kernel is stopping; generate again once it is back")
        doc = self.canvases.get(canvas_id)
        expected = request.expected_revision
        if expected != doc.revision:
            raise RevisionConflict(doc, expected)
        config = edits.config_node(doc, request, mode)
        ids = (request.config_node_id, request.output_node_id)
        try:
            job = prepare(doc, config)
        except CanvasFailed as exc:
            await self.canvases.change(canvas_id, edits.marked(ids, "error", exc.message), expected)
            self._outcomes.labels(outcome="error").inc()
            raise
        first = "queued" if mode == "video" else "running"
        await self.canvases.change(canvas_id, edits.marked(ids, first), expected)
        started = self._run(canvas_id, ids, mode, lambda: work(canvas_id, ids, job))
        task = asyncio.create_task(started)
        self._tasks.setdefault(canvas_id, set()).add(task)
        task.add_done_callback(lambda t: self._finished(canvas_id, t))
        return await self._outcome(canvas_id, task)

    async def cancel(self, canvas_id: str) -> None:
        """Stop the canvas's generations (it is being deleted)."""
        await _cancelled(self._tasks.get(canvas_id, set()))

    async def stop(self) -> None:
        """Stop every generation (shutdown)."""
        self._stopping = True
        await _cancelled({t for tasks in self._tasks.values() for t in tasks})

    def _image_job(self, doc: Document, config: Node, connection_id: str) -> ImageJob:
        spec = config.generation
        assert spec is not None  # checked by edits.config_node
        default = self.connections.defaults()["image"]
        cid = connection_id or spec.connection_id or default.get("connection_id", "")
        model = (spec.model or "").strip() or default.get("model", "")
        if not cid:
            raise CanvasFailed(
                "no image connection: pass connection_id, set one in the generation node, or set "
                "the image default model (PUT /settings/default-models)"
            )
        if not self.connections.exists(cid):
            raise CanvasFailed(f"connection {cid} not found")
        connection = self.connections.get(cid)
        if connection["type"] != "image":
            raise CanvasFailed("image generation requires an image connection")
        if not model:
            raise CanvasFailed(
                "no image model: set the generation node's model or the image default model"
            )
        settings = connection["model_settings"].get(model)
        if settings is not None and not settings.get("image_generation"):
            raise CanvasFailed(f"model {model} does not support image generation")
        prompt, references = edits.inputs(doc, config)
        size = SIZES.get(spec.aspect_ratio or "", "1024x1024")
        request = ImageRequest(model, prompt, size, spec.quality)
        return ImageJob(self.providers.for_connection(cid), request, tuple(references))

    async def _image_work(self, canvas_id: str, ids: tuple[str, str], job: ImageJob) -> Document:
        read = self.canvases.store.read_asset
        references = [await asyncio.to_thread(read, canvas_id, a) for a in job.references]
        async with asyncio.timeout(TIMEOUT):
            request = dataclasses.replace(job.request, references=tuple(references))
            data = await job.provider.generate_image(request, MAX_BYTES)
            if isinstance(data, ImageLink):  # someone else's URL: only through the guard
                data = await self.fetcher().read(data.url, max_bytes=MAX_BYTES, time_limit=TIMEOUT)
        asset = await self.canvases.store_image(canvas_id, "generated.png", data)
        return await self.canvases.change(canvas_id, edits.done(ids, asset))

    async def _run(
        self,
        canvas_id: str,
        ids: tuple[str, str],
        mode: str,
        work: Callable[[], Awaitable[Document]],
    ) -> Document:
        """`work`'s document; on failure both nodes `error` and the failure raised."""
        try:
            doc = await work()
        except Exception as exc:
            if self.canvases.store.find(canvas_id) is None:
                raise  # the canvas is gone: nothing to mark
            failure = _failure(exc, mode)
            with contextlib.suppress(CanvasNotFound):
                await self.canvases.change(canvas_id, edits.marked(ids, "error", failure.message))
            self._outcomes.labels(outcome="error").inc()
            raise failure from None
        self._outcomes.labels(outcome="success").inc()
        return doc

    async def _outcome(self, canvas_id: str, task: asyncio.Task[Document]) -> Document:
        """The task's result, for the request that started it; a request cancelled (its
        client left) leaves the task running."""
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
        if self._stopping:
            raise Unavailable("the generation was interrupted: the kernel is stopping")
        raise CanvasNotFound(f"canvas {canvas_id} was deleted during the generation")

    def _finished(self, canvas_id: str, task: asyncio.Task[Document]) -> None:
        tasks = self._tasks.get(canvas_id, set())
        tasks.discard(task)
        if not tasks:
            self._tasks.pop(canvas_id, None)
        if task.cancelled():
            self._outcomes.labels(outcome="interrupted").inc()
        else:
            task.exception()  # retrieved here: the request that awaited it may have gone


def _failure(exc: Exception, mode: str) -> FoyaError:
    """What a generation (of an `image` or a `video`) that raised `exc` answers; its message is
    what both nodes show."""
    if isinstance(exc, TimeoutError):
        limit = video.TIMEOUT if mode == "video" else TIMEOUT
        return GenerationFailed(f"{mode} generation timed out after {limit:.0f} s")
    if isinstance(exc, ProviderError):
        return GenerationFailed(exc.message)
    if isinstance(exc, FetchError):
        return GenerationFailed(f"the generated {mode} could not be downloaded: {exc}")
    if isinstance(exc, UnsupportedMedia | AssetTooLarge):
        return GenerationFailed(f"the provider's {mode} cannot be used: {exc.message}")
    if isinstance(exc, CanvasNotFound):  # a reference image's asset
        return CanvasFailed(exc.message)
    if isinstance(exc, FoyaError):  # damaged asset files
        return exc
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return InsufficientStorage("the disk holding the data directory is full: free space on it")
    get_logger("foya.canvas").error("canvas generation failed", exc_info=exc)
    return FoyaError("the generation failed (internal error)")


async def _cancelled(tasks: set[asyncio.Task[Document]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
