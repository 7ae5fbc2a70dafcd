"""What image and video generation share: checking a request's nodes, the generation node's
inputs (the text and images wired into it), and the document changes that show a job's state."""

from __future__ import annotations

from typing import TypedDict

from app.kernel.canvas.models import Asset, CanvasFailed, Document, GenerationRequest, Node
from app.kernel.canvas.ports import DocumentChanges, Edit

OUTPUT_WIDTH, HEADER_HEIGHT = 360, 32  # an image output node is resized to it, as Foya does
NO_PROMPT = "connect a prompt node or enter a prompt in the generation node"


def config_node(doc: Document, request: GenerationRequest, mode: str) -> Node:
    """The generation node, after checking both nodes of the request (nothing changed)."""
    config = doc.node(request.config_node_id)
    output = doc.node(request.output_node_id)
    article = "an" if mode == "image" else "a"
    if config is None or output is None or config is output:
        raise CanvasFailed("generation config and output nodes are required")
    if config.type != "generation" or config.generation is None or config.generation.mode != mode:
        raise CanvasFailed(f"node is not {article} {mode} generation configuration")
    if output.type != mode:
        raise CanvasFailed(f"generation output node must be {article} {mode}")
    return config


def sources(doc: Document, node_id: str) -> list[Node]:
    """Nodes with an edge into `node_id`, in edge order."""
    by_id = {n.id: n for n in doc.nodes}
    return [
        by_id[e.from_node_id]
        for e in doc.edges
        if e.to_node_id == node_id and e.from_node_id in by_id
    ]


def inputs(doc: Document, config: Node) -> tuple[str, list[str]]:
    """The prompt (the node's own, then each wired text node's, blank-line separated) and the
    asset ids of the wired image nodes; `CanvasFailed` when there is no prompt at all."""
    parts = [config.prompt.strip()] if config.prompt and config.prompt.strip() else []
    references: list[str] = []
    for source in sources(doc, config.id):
        if source.type == "text" and source.text and source.text.strip():
            parts.append(source.text.strip())
        if source.type == "image" and source.asset_id:
            references.append(source.asset_id)
    if not parts:
        raise CanvasFailed(NO_PROMPT)
    return "\n\n".join(parts), references


def marked(ids: tuple[str, ...], status: str, error: str | None = None) -> Edit:
    """Both nodes of a job in `status` (with `error`, or none)."""

    def edit(doc: Document) -> DocumentChanges:
        update = {"status": status, "error": error}
        return {"nodes": [n.model_copy(update=update) if n.id in ids else n for n in doc.nodes]}

    return edit


class Shown(TypedDict, total=False):
    """An output node's fields once its job succeeded: the asset it shows, at its size."""

    asset_id: str
    status: str
    error: None
    width: float
    height: float


def done(ids: tuple[str, str], asset: Asset) -> Edit:
    """The job's result added to the assets and shown by the output node; both `success`."""
    config_id, output_id = ids
    shown: Shown = {"asset_id": asset.id, "status": "success", "error": None}
    if asset.width and asset.height:
        shown["width"] = OUTPUT_WIDTH
        shown["height"] = HEADER_HEIGHT + OUTPUT_WIDTH * asset.height / asset.width

    def edit(doc: Document) -> DocumentChanges:
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
