"""What a canvas change must keep (Foya's rules); a broken one is a 400 `canvas_failed`.

Geometry is finite by type (`FiniteFloat`); these are the rules between fields and documents.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.kernel.canvas.models import Asset, CanvasFailed, Edge, Node, Viewport

NODE_TYPES = ("image", "video", "text", "generation")
BACKGROUNDS = ("dots", "grid", "blank")
GENERATION_MODES = ("image", "video")
MIN_SIDE, MAX_SIDE = 24, 100_000
MAX_COUNT, MAX_DURATION = 16, 15
MIN_ZOOM, MAX_ZOOM = 0.1, 8


def title(value: str) -> str:
    """A title, trimmed; never empty."""
    trimmed = value.strip()
    if not trimmed:
        raise CanvasFailed("canvas title is required")
    return trimmed


def nodes(items: list[Node], assets: Iterable[Asset]) -> None:
    """Unique ids, known types, sizes in range, assets of this canvas, sound generation specs."""
    asset_ids = {a.id for a in assets}
    seen: set[str] = set()
    for node in items:
        if not node.id:
            raise CanvasFailed("canvas node id is required")
        if node.id in seen:
            raise CanvasFailed(f"duplicate canvas node id {node.id!r}")
        seen.add(node.id)
        if node.type not in NODE_TYPES:
            raise CanvasFailed(
                f"unsupported canvas node type {node.type!r} (one of {', '.join(NODE_TYPES)})"
            )
        if node.asset_id is not None and node.asset_id not in asset_ids:
            raise CanvasFailed(f"canvas asset {node.asset_id!r} does not exist")
        if not (MIN_SIDE <= node.width <= MAX_SIDE and MIN_SIDE <= node.height <= MAX_SIDE):
            raise CanvasFailed(
                f"canvas node {node.id!r}: width and height must be {MIN_SIDE} to {MAX_SIDE}"
            )
        spec = node.generation
        if spec is None:
            continue
        if node.type != "generation":
            raise CanvasFailed("generation settings require a generation node")
        if spec.mode not in GENERATION_MODES:
            raise CanvasFailed("unsupported generation mode (image or video)")
        if not 0 <= (spec.count or 0) <= MAX_COUNT:
            raise CanvasFailed(f"generation count must be 0 to {MAX_COUNT}")
        if not 0 <= (spec.duration or 0) <= MAX_DURATION:
            raise CanvasFailed(f"video generation duration must be 0 to {MAX_DURATION}")


def edges(items: list[Edge], among: list[Node]) -> None:
    """Unique ids, both ends among the canvas's nodes, never a node to itself."""
    node_ids = {n.id for n in among}
    seen: set[str] = set()
    for edge in items:
        if not (edge.id and edge.from_node_id and edge.to_node_id):
            raise CanvasFailed("canvas edge id and endpoints are required")
        if edge.from_node_id == edge.to_node_id:
            raise CanvasFailed("canvas edge cannot connect a node to itself")
        if edge.id in seen:
            raise CanvasFailed(f"duplicate canvas edge id {edge.id!r}")
        seen.add(edge.id)
        for end in (edge.from_node_id, edge.to_node_id):
            if end not in node_ids:
                raise CanvasFailed(f"canvas edge end {end!r} does not exist")


def viewport(value: Viewport) -> None:
    if not MIN_ZOOM <= value.zoom <= MAX_ZOOM:
        raise CanvasFailed(f"canvas viewport zoom must be {MIN_ZOOM} to {MAX_ZOOM}")


def background(value: str) -> str:
    if value not in BACKGROUNDS:
        raise CanvasFailed(f"unsupported canvas background (one of {', '.join(BACKGROUNDS)})")
    return value
