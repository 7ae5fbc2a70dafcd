"""Canvases: visual workspaces of nodes, edges and image assets, with their own event stream
and image generation (Foya's `/canvases` routes)."""

from app.kernel.canvas.service import Canvases

__all__ = ["Canvases"]
