"""Canvas generation: a `generation` node's settings and prompt, through an image connection's
images API (`Provider.generate_image`), into an `image` node.

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

Video generation is not implemented: Foya's video protocols (Seedance, MiniMax task APIs) are
not OpenAI APIs. `generate-video` answers 501 `video_generation_unsupported` for an existing
canvas, whatever connections are configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.artifacts import MAX_BYTES
from app.errors import FoyaError, InsufficientStorage, Unavailable
from app.kernel.canvas.models import (
    Asset,
    AssetTooLarge,
    CanvasFailed,
    CanvasNotFound,
    Document,
    GenerationFailed,
    GenerationRequest,
    Node,
    RevisionConflict,
    UnsupportedMedia,
    VideoUnsupported,
)
from app.kernel.connections import Connections
from app.kernel.providers import Providers
from app.logs import get_logger
from app.metrics import Metrics
from app.providers.base import ImageRequest, Provider, ProviderError

if TYPE_CHECKING:
    from app.kernel.canvas.service import Canvases, Edit

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
OUTPUT_WIDTH, HEADER_HEIGHT = 360, 32  # the output node is resized to the image, as Foya does


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
        canvases: Canvases,
        connections: Connections,
        providers: Providers,
        metrics: Metrics,
    ) -> None:
        self.canvases = canvases
        self.connections = connections
        self.providers = providers
        self._outcomes = metrics.canvas_generations
        self._tasks: dict[str, set[asyncio.Task[Document]]] = {}
        self._stopping = False

    async def image(self, canvas_id: str, request: GenerationRequest) -> Document:
        """Generate into the output node; the document once done (see the module docstring)."""
        if self._stopping:
            raise Unavailable("the kernel is stopping; generate again once it is back")
        doc = self.canvases.get(canvas_id)
        expected = request.expected_revision
        if expected != doc.revision:
            raise RevisionConflict(doc, expected)
        config = _config_node(doc, request, "image")
        ids = (request.config_node_id, request.output_node_id)
        try:
            job = self._image_job(doc, config, request.connection_id)
        except CanvasFailed as exc:
            await self.canvases.change(canvas_id, _marked(ids, "error", exc.message), expected)
            self._outcomes.labels(outcome="error").inc()
            raise
        await self.canvases.change(canvas_id, _marked(ids, "running"), expected)
        task = asyncio.create_task(self._run(canvas_id, ids, job))
        self._tasks.setdefault(canvas_id, set()).add(task)
        task.add_done_callback(lambda t: self._finished(canvas_id, t))
        return await self._outcome(canvas_id, task)

    async def video(self, canvas_id: str, request: GenerationRequest) -> Document:
        """Refused: no video-generation API is implemented (see the module docstring)."""
        self.canvases.get(canvas_id)
        raise VideoUnsupported(
            "this kernel does not generate videos (no video-generation API is implemented, so "
            "video connections are not used); generate images with POST "
            "/canvases/{id}/generate-image"
        )

    async def cancel(self, canvas_id: str) -> None:
        """Stop the canvas's generations (it is being deleted)."""
        await _cancelled(self._tasks.get(canvas_id, set()))

    async def stop(self) -> None:
        """Stop every generation (shutdown)."""
        self._stopping = True
        await _cancelled({t for tasks in self._tasks.values() for t in tasks})

    def _image_job(self, doc: Document, config: Node, connection_id: str) -> ImageJob:
        spec = config.generation
        assert spec is not None  # checked by _config_node
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
        parts = [config.prompt.strip()] if config.prompt and config.prompt.strip() else []
        references: list[str] = []
        for source in _sources(doc, config.id):
            if source.type == "text" and source.text and source.text.strip():
                parts.append(source.text.strip())
            if source.type == "image" and source.asset_id:
                references.append(source.asset_id)
        if not parts:
            raise CanvasFailed("connect a prompt node or enter a prompt in the generation node")
        size = SIZES.get(spec.aspect_ratio or "", "1024x1024")
        request = ImageRequest(model, "\n\n".join(parts), size, spec.quality)
        return ImageJob(self.providers.for_connection(cid), request, tuple(references))

    async def _run(self, canvas_id: str, ids: tuple[str, str], job: ImageJob) -> Document:
        try:
            read = self.canvases.store.read_asset
            references = [await asyncio.to_thread(read, canvas_id, a) for a in job.references]
            async with asyncio.timeout(TIMEOUT):
                request = dataclasses.replace(job.request, references=tuple(references))
                data = await job.provider.generate_image(request, MAX_BYTES)
            asset = await self.canvases.store_image(canvas_id, "generated.png", data)
            doc = await self.canvases.change(canvas_id, _done(ids, asset))
        except Exception as exc:
            if self.canvases.store.find(canvas_id) is None:
                raise  # the canvas is gone: nothing to mark
            failure = _failure(exc)
            with contextlib.suppress(CanvasNotFound):
                await self.canvases.change(canvas_id, _marked(ids, "error", failure.message))
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


def _failure(exc: Exception) -> FoyaError:
    """What a generation that raised `exc` answers; its message is what both nodes show."""
    if isinstance(exc, TimeoutError):
        return GenerationFailed(f"image generation timed out after {TIMEOUT:.0f} s")
    if isinstance(exc, ProviderError):
        return GenerationFailed(exc.message)
    if isinstance(exc, UnsupportedMedia | AssetTooLarge):
        return GenerationFailed(f"the provider's image cannot be used: {exc.message}")
    if isinstance(exc, CanvasNotFound):  # a reference image's asset
        return CanvasFailed(exc.message)
    if isinstance(exc, FoyaError):  # damaged asset files
        return exc
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return InsufficientStorage("the disk holding the data directory is full: free space on it")
    get_logger("foya.canvas").error("canvas generation failed", exc_info=exc)
    return FoyaError("the generation failed (internal error)")


def _config_node(doc: Document, request: GenerationRequest, mode: str) -> Node:
    """The generation node, after checking both nodes of the request (nothing changed)."""
    config = doc.node(request.config_node_id)
    output = doc.node(request.output_node_id)
    if config is None or output is None or config is output:
        raise CanvasFailed("generation config and output nodes are required")
    if config.type != "generation" or config.generation is None or config.generation.mode != mode:
        raise CanvasFailed(f"node is not an {mode} generation configuration")
    if output.type != mode:
        raise CanvasFailed(f"generation output node must be an {mode}")
    return config


def _sources(doc: Document, node_id: str) -> list[Node]:
    """Nodes with an edge into `node_id`, in edge order."""
    by_id = {n.id: n for n in doc.nodes}
    return [
        by_id[e.from_node_id]
        for e in doc.edges
        if e.to_node_id == node_id and e.from_node_id in by_id
    ]


def _marked(ids: tuple[str, ...], status: str, error: str | None = None) -> Edit:
    def edit(doc: Document) -> dict[str, Any]:
        update = {"status": status, "error": error}
        return {"nodes": [n.model_copy(update=update) if n.id in ids else n for n in doc.nodes]}

    return edit


def _done(ids: tuple[str, str], asset: Asset) -> Edit:
    config_id, output_id = ids
    shown: dict[str, Any] = {"asset_id": asset.id, "status": "success", "error": None}
    if asset.width and asset.height:
        shown["width"] = OUTPUT_WIDTH
        shown["height"] = HEADER_HEIGHT + OUTPUT_WIDTH * asset.height / asset.width

    def edit(doc: Document) -> dict[str, Any]:
        nodes = [
            n.model_copy(update={"status": "success", "error": None})
            if n.id == config_id
            else n.model_copy(update=shown)
            if n.id == output_id
            else n
            for n in doc.nodes
        ]
        return {"nodes": nodes, "assets": [*doc.assets, asset]}

    return edit


async def _cancelled(tasks: set[asyncio.Task[Document]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
