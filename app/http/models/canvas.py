"""Response models of the canvas routes that are the HTTP layer's own (the documents, assets and
generation requests themselves are the kernel's models)."""

from __future__ import annotations

from pydantic import BaseModel

from app.kernel.api import Asset, Document


class AssetCreated(BaseModel):
    """`POST /canvases/{id}/assets`: the new asset and the document that now holds it."""

    asset: Asset
    canvas: Document
