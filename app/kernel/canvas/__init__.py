"""Canvases: visual workspaces of nodes, edges and image and video assets, with their own event
stream and image and video generation (Foya's `/canvases` routes).

Modules: `service` (the façade), `models` (documents and the exception map), `rules`, `store`
(the file and the assets), `media` (video signatures, staging to disk, serving), `stream`,
`generation` (scheduling both kinds, images), `video` (video jobs), `edits` (what both share).
"""

from app.kernel.canvas.service import Canvases

__all__ = ["Canvases"]
