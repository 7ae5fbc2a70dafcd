"""Request bodies of the plugin and marketplace routes, as Foya's handlers decode them (unknown
fields refused). `enabled` must be sent: Foya reads a missing one as false, which would turn a
plugin off by accident."""

from __future__ import annotations

from pydantic import Field, StrictBool, StrictStr

from app.http.models.common import Strict


class PluginInstallRequest(Strict):
    source: StrictStr
    replace: StrictBool = False


class PluginEnabledRequest(Strict):
    enabled: StrictBool


class MarketplaceAddRequest(Strict):
    source: StrictStr
    ref: StrictStr = ""
    sparse_paths: list[StrictStr] = Field(default_factory=list)


class MarketplaceEnabledRequest(Strict):
    enabled: StrictBool


class MarketplacePluginInstallRequest(Strict):
    """The body may be left out altogether."""

    replace: StrictBool = False
